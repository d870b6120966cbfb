/* What every MPI benchmark here shares: a watchdog that names a hang instead of waiting
 * for an outer time limit, MPI error checks, size parsing and comma-separated filters. */
#ifndef BENCH_COMMON_H_INCLUDED
#define BENCH_COMMON_H_INCLUDED

#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *g_prog = "bench"; /* program name in messages */
static int g_rank = -1;
static char g_where[160] = "setup";
static const char *g_phase = "";  /* verify, latency or bandwidth */
static unsigned g_watchdog = 120; /* seconds without finishing a phase before a hang is declared */

/* A hang (a lost message, a protocol deadlock) names where it happened and ends the job,
 * instead of waiting for an outer time limit that says nothing. */
static void on_alarm(int sig) {
    char msg[400];
    int len = snprintf(msg, sizeof msg, "%s: rank %d: HANG: no progress for %u s in [%s] %s; aborting\n", g_prog,
                       g_rank, g_watchdog, g_where, g_phase);
    (void)sig;
    if (len > 0 && write(2, msg, (size_t)len) < 0) _exit(124);
    _exit(124);
}

static void phase(const char *name) {
    g_phase = name;
    if (g_watchdog) alarm(g_watchdog);
}

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: rank %d: [%s] %s: ", g_prog, g_rank, g_where, g_phase);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    fflush(stdout);
    PMPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define MPI_CHECK(call)                                                                               \
    do {                                                                                              \
        int rc_ = (call);                                                                             \
        if (rc_ != MPI_SUCCESS) {                                                                     \
            char msg_[MPI_MAX_ERROR_STRING];                                                          \
            int len_ = 0;                                                                             \
            if (PMPI_Error_string(rc_, msg_, &len_) != MPI_SUCCESS) snprintf(msg_, sizeof msg_, "?"); \
            fail("%s:%d: %s failed (%d): %s", __FILE__, __LINE__, #call, rc_, msg_);                  \
        }                                                                                             \
    } while (0)

/* MPI_ERR_IN_STATUS says only that some request failed; the message that names the call and
 * the argument is in that request's status, so report the first failed one. */
static void check_statuses(int rc, const char *file, int line, const char *call, int n, const MPI_Status *stats)
    __attribute__((unused));
static void check_statuses(int rc, const char *file, int line, const char *call, int n, const MPI_Status *stats) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (rc == MPI_SUCCESS) return;
    if (rc == MPI_ERR_IN_STATUS) {
        for (int i = 0; i < n; i++) {
            int e = stats[i].MPI_ERROR;
            if (e == MPI_SUCCESS || e == MPI_ERR_PENDING) continue;
            if (MPI_Error_string(e, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "?");
            fail("%s:%d: %s failed: request %d of %d (%d): %s", file, line, call, i, n, e, msg);
        }
    }
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "?");
    fail("%s:%d: %s failed (%d): %s", file, line, call, rc, msg);
}
#define MPI_CHECK_ALL(call, n, stats) check_statuses((call), __FILE__, __LINE__, #call, (int)(n), (stats))

static int parse_size(const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text) return 0;
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    else if (*end == 'G' || *end == 'g')
        v <<= 30, end++;
    if (*end && strcmp(end, "B") && strcmp(end, "iB")) return 0;
    if (v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* 1 when `name` is an item of the comma-separated `list` (a NULL list holds everything). */
static int in_list(const char *list, const char *name) {
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

/* A knob given as off (0, no, off, false), as MPI-ACC reads it. */
static inline int env_is_off(const char *name) {
    const char *v = getenv(name);
    return v && (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off") || !strcasecmp(v, "false"));
}

/* This rank's index on its node, from whichever launcher started it (0 if none says). */
static inline int local_rank_from_env(void) {
    const char *names[] = {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

/* Median of n values (n <= 64), the mean of the middle two when n is even; v is left as
 * it was. Rows of every benchmark are medians over their rounds. */
static int bench_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static inline double bench_median(const double *v, int n) {
    double s[64];
    if (n <= 0) return 0;
    if (n > 64) n = 64;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

#endif
