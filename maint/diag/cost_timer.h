/* What the one-process cost timers (wrapper-cost.c, window-cost.c) share: the clock, in
 * nanoseconds, and the order qsort puts their per-block times in for medians. */
#ifndef MPIACC_DIAG_COST_TIMER_H
#define MPIACC_DIAG_COST_TIMER_H
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
