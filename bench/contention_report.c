/* bench/contention's results, on rank 0: a table and a CSV row per pairing (task 0's
 * configuration beside task 1's kind), each round as a comment line of the CSV, then the
 * verdict lines that hold MPI-ACC to its goals (stdout, and "# summary:" in the CSV).
 *
 * CSV columns: config,local,size,iters,local_iters,units,t0_alone_us,t0_together_us,
 * task0_slowdown_pct,t1_alone_us,t1_together_us,task1_slowdown_pct,status
 *   t0_*: microseconds per round trip of task 0, alone and beside task 1
 *   t1_*: microseconds per iteration of task 1 (units of work, then a wait), alone and
 *         beside task 0
 *   *_slowdown_pct: 100 (together / alone - 1), the median of the rounds' (negative: faster
 *         together, within noise)
 *   status: ok, or MISMATCH when a message of that pairing arrived wrong */
#include <stdarg.h>
#include <string.h>

#include "bench_summary.h"
#include "contention_parts.h"

/* Goals of task 0's slowdown beside each kernel (the dissertation's measurements). */
#define GOAL_GLOBAL 0.04
#define GOAL_COMPUTE 0.03
/* A copy loop's slowdown beside MPI-ACC may exceed a hand variant's by this much: near
 * zero, the rounds' noise alone (about a point) would otherwise flip the verdict. */
#define COPY_NOISE 0.01

typedef struct {
    double t0_alone, t0_with, slow0, t1_alone, t1_with, slow1;
} Row;

static double median(const double *v, long n) {
    double s[MAX_ROUNDS] = {0};
    memcpy(s, v, (size_t)n * sizeof *s);
    for (long i = 1; i < n; i++)
        for (long j = i; j > 0 && s[j - 1] > s[j]; j--) {
            const double t = s[j];
            s[j] = s[j - 1], s[j - 1] = t;
        }
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static Row row_of(const Bench *b, int c, int k) {
    const long n = b->o.rounds;
    double s0[MAX_ROUNDS] = {0}, s1[MAX_ROUNDS] = {0};
    for (long r = 0; r < n; r++) {
        s0[r] = b->t0_with[c][k][r] / b->t0_alone[c][r] - 1;
        s1[r] = b->t1_with[c][k][r] / b->t1_alone[k][r] - 1;
    }
    return (Row){median(b->t0_alone[c], n), median(b->t0_with[c][k], n), median(s0, n),
                 median(b->t1_alone[k], n), median(b->t1_with[c][k], n), median(s1, n)};
}

const char *config_label(const Bench *b, Task0Kind c, char *buf, size_t len) {
    const int mpiacc = c == TASK0_MPIACC || c == TASK0_MPIACC_STREAM;
    if (mpiacc && b->label && *b->label)
        snprintf(buf, len, "%s-%s", task0_names[c], b->label);
    else
        snprintf(buf, len, "%s", task0_names[c]);
    return buf;
}

/* ------------------------------------------------------------------ verdicts */

static long passed, missed;

static void verdict(const Bench *b, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void verdict(const Bench *b, int ok, const char *fmt, ...) {
    char text[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    bench_summary_line(b->csv, "verdict: %s %s", ok ? "PASS" : "MISS", text);
    ok ? passed++ : missed++;
}

/* "+1.2%" of a slowdown, or "-" where that configuration was not measured. */
static const char *pct(const Bench *b, int c, int k, int task, char *buf) {
    if (!b->task0_selected[c] || !b->local_selected[k]) return "-";
    const Row r = row_of(b, c, k);
    snprintf(buf, 24, "%+.1f%%", 100 * (task ? r.slow1 : r.slow0));
    return buf;
}

static void kernel_goal(const Bench *b, const char *name, LocalKind k, double goal) {
    if (!b->local_selected[k]) return;
    const Row r = row_of(b, TASK0_MPIACC, k);
    const int intact = !b->pair_mismatches[TASK0_MPIACC][k];
    verdict(b, r.slow0 <= goal && intact, "%s beside %s: task 0 slowed %+.1f%% (goal <= %.0f%%)%s", name,
            local_kind_names[k], 100 * r.slow0, 100 * goal, intact ? "" : "; its messages arrived wrong");
}

/* MPI-ACC slows the copy loop no more than each hand variant that was measured (within
 * COPY_NOISE). */
static void copy_goal(const Bench *b, const char *name, LocalKind k) {
    if (!b->local_selected[k]) return;
    char v[3][24];
    const Row r = row_of(b, TASK0_MPIACC, k);
    const int intact = !b->pair_mismatches[TASK0_MPIACC][k];
    int ok = intact, hands = 0;
    for (int c = TASK0_STAGED; c <= TASK0_PIPELINE; c++) {
        if (!b->task0_selected[c]) continue;
        hands++;
        ok &= r.slow1 <= row_of(b, c, k).slow1 + COPY_NOISE;
    }
    if (!hands) {
        bench_summary_line(b->csv, "verdict: n/a %s beside %s: no hand variant measured (--configs)", name,
                           local_kind_names[k]);
        return;
    }
    verdict(b, ok, "%s beside %s: the copy loop slowed %s (staged %s, pipeline %s; goal <= both, +%.0f point)%s", name,
            local_kind_names[k], pct(b, TASK0_MPIACC, k, 1, v[0]), pct(b, TASK0_STAGED, k, 1, v[1]),
            pct(b, TASK0_PIPELINE, k, 1, v[2]), 100 * COPY_NOISE, intact ? "" : "; its messages arrived wrong");
}

static void print_verdicts(Bench *b) {
    char name[64], v[4][24];
    if (!b->task0_selected[TASK0_MPIACC]) {
        bench_summary_line(b->csv, "verdict: n/a: mpiacc not measured (--configs); no goal checked");
        return;
    }
    config_label(b, TASK0_MPIACC, name, sizeof name);
    kernel_goal(b, name, LOCAL_GLOBAL, GOAL_GLOBAL);
    kernel_goal(b, name, LOCAL_COMPUTE, GOAL_COMPUTE);
    kernel_goal(b, name, LOCAL_SHARED, GOAL_COMPUTE);
    copy_goal(b, name, LOCAL_D2H);
    copy_goal(b, name, LOCAL_H2D);
    if (b->local_selected[LOCAL_COMPUTE_LEGACY])
        bench_summary_line(b->csv,
                           "info: beside compute-legacy (no goal; the paper saw MPI stall behind stream 0): task 0 "
                           "slowed %s, mpiacc-stream %s, staged %s, pipeline %s",
                           pct(b, TASK0_MPIACC, LOCAL_COMPUTE_LEGACY, 0, v[0]),
                           pct(b, TASK0_MPIACC_STREAM, LOCAL_COMPUTE_LEGACY, 0, v[1]),
                           pct(b, TASK0_STAGED, LOCAL_COMPUTE_LEGACY, 0, v[2]),
                           pct(b, TASK0_PIPELINE, LOCAL_COMPUTE_LEGACY, 0, v[3]));
    bench_summary_line(b->csv, "verdicts: %ld PASS, %ld MISS", passed, missed);
}

/* ------------------------------------------------------------------ table and CSV */

void report(Bench *b) {
    char name[64];
    printf("%-20s %-14s %6s %11s %11s %8s %11s %11s %8s  %s\n", "config", "local", "units", "t0_alone", "t0_with",
           "slow0", "t1_alone", "t1_with", "slow1", "status");
    fprintf(b->csv,
            "config,local,size,iters,local_iters,units,t0_alone_us,t0_together_us,task0_slowdown_pct,t1_alone_us,"
            "t1_together_us,task1_slowdown_pct,status\n");
    for (int c = 0; c < TASK0_CONFIGS; c++) {
        if (!b->task0_selected[c]) continue;
        config_label(b, (Task0Kind)c, name, sizeof name);
        for (int k = 0; k < LOCAL_KINDS; k++) {
            if (!b->local_selected[k]) continue;
            for (long r = 0; r < b->o.rounds; r++)
                fprintf(b->csv, "# round %ld: %s,%s,%.2f,%.2f,%.2f,%.2f\n", r + 1, name, local_kind_names[k],
                        1e6 * b->t0_alone[c][r], 1e6 * b->t0_with[c][k][r], 1e6 * b->t1_alone[k][r],
                        1e6 * b->t1_with[c][k][r]);
            const Row w = row_of(b, c, k);
            const char *status = b->pair_mismatches[c][k] ? "MISMATCH" : "ok";
            printf("%-20s %-14s %6ld %11.1f %11.1f %+7.1f%% %11.1f %11.1f %+7.1f%%  %s\n", name, local_kind_names[k],
                   b->units[k], 1e6 * w.t0_alone, 1e6 * w.t0_with, 100 * w.slow0, 1e6 * w.t1_alone, 1e6 * w.t1_with,
                   100 * w.slow1, status);
            fprintf(b->csv, "%s,%s,%ld,%ld,%ld,%ld,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%s\n", name, local_kind_names[k],
                    b->o.size, b->o.iters, b->o.local_iters, b->units[k], 1e6 * w.t0_alone, 1e6 * w.t0_with,
                    100 * w.slow0, 1e6 * w.t1_alone, 1e6 * w.t1_with, 100 * w.slow1, status);
        }
    }
    printf("# t0: us per round trip of task 0; t1: us per iteration of task 1; slow = together / alone - 1\n");
    print_verdicts(b);
    printf("# verify: %ld mismatched bytes, %ld failed checks\n", b->mismatches, b->failed_checks);
    fprintf(b->csv, "# verify: %ld mismatched bytes, %ld failed checks\n", b->mismatches, b->failed_checks);
    fflush(stdout);
}
