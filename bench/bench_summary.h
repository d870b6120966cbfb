/* The closing summary lines of a benchmark, shared by the programs' files that print
 * them (bench_common.h holds per-program state and is included by one file each). */
#ifndef BENCH_SUMMARY_H_INCLUDED
#define BENCH_SUMMARY_H_INCLUDED

#include <stdarg.h>
#include <stdio.h>

/* A line of a benchmark's closing summary, on stdout and in its CSV as "# summary: ...". */
static void bench_summary_line(FILE *csv, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static void bench_summary_line(FILE *csv, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("%s\n", line);
    fprintf(csv, "# summary: %s\n", line);
}

#endif
