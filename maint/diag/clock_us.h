/* The monotonic clock the maint/diag tools time with, in microseconds (CLOCK_MONOTONIC:
 * shared by the processes of one host, so two ranks' times line up). */
#ifndef MPIACC_DIAG_CLOCK_US_H
#define MPIACC_DIAG_CLOCK_US_H
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

#endif
