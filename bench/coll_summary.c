/* bench/coll's closing summary: MPI-ACC over staging by hand and over NCCL, per kind and
 * collective, against the goals it is held to; on stdout and in the CSV ("# summary:"). */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "bench_summary.h"
#include "coll_parts.h"

const Result *find_result(const Bench *b, int op, const Kind *k, ConfigId cfg, size_t size) {
    for (int i = 0; i < b->nresults; i++) {
        const Result *r = &b->results[i];
        if (r->op == op && r->unit->kind == k && r->unit->cfg == cfg && r->size == size) return r;
    }
    return NULL;
}

static const char *num(double v, char *buf, size_t len) {
    if (v < 0) return "-";
    snprintf(buf, len, "%.2f", v);
    return buf;
}

/* MPI-ACC against staging by hand and NCCL, per kind and collective, with the goals it is
 * held to: CUDA never under 0.95 of staging at any size and at least 2x from 1 MiB
 * (allreduce, bcast, allgather, reduce_scatter); OpenCL never under staging (1.00).
 * NCCL's columns: the lowest busbw ratio from 16 MiB (target 0.90) and the time ratio at
 * the smallest size (target 1.2 or less), both mpiacc over nccl. Rank 0. */
void print_summary(Bench *b) {
    long met = 0, missed = 0, refused = 0;
    char v[6][32];
    bench_summary_line(b->csv,
                       "MPI-ACC over staging by hand (x = staged time / mpiacc time, > 1: MPI-ACC faster) and NCCL");
    bench_summary_line(b->csv, "%-7s %-15s %5s %8s %9s %8s %9s %9s %9s  %s", "kind", "op", "ranks", "x_min", "at",
                       "x_1M+", "at", "nccl_bus", "nccl_lat", "goal");
    for (int ki = 0; ki < b->nkinds; ki++) {
        const Kind *k = &b->kinds[ki];
        if (!k->api) continue;
        for (int op = 0; op < NUM_OPS; op++) {
            double xmin = -1, xbig = -1, bus = -1, lat = -1;
            size_t at = 0, atbig = 0, smallest = 0;
            int rows = 0, refusals = 0;
            for (int i = 0; i < b->nresults; i++) {
                const Result *r = &b->results[i];
                if (r->op != op || r->unit->kind != k || r->unit->cfg != CFG_MPIACC) continue;
                rows++;
                if (r->sec < 0) {
                    refusals++;
                    continue;
                }
                const Result *st = find_result(b, op, k, CFG_STAGED, r->size);
                const Result *nc = find_result(b, op, k, CFG_NCCL, r->size);
                if (st && st->sec > 0) {
                    const double x = st->sec / r->sec;
                    if (xmin < 0 || x < xmin) xmin = x, at = r->size;
                    if (r->size >= (1u << 20) && (xbig < 0 || x < xbig)) xbig = x, atbig = r->size;
                }
                if (nc && nc->sec > 0) {
                    if (r->size >= (16u << 20) && (bus < 0 || nc->sec / r->sec < bus)) bus = nc->sec / r->sec;
                    if (!smallest || r->size < smallest) smallest = r->size, lat = r->sec / nc->sec;
                }
            }
            if (!rows) continue;
            const int cuda = !strcmp(k->name, "cuda");
            const int twice =
                cuda && (op == OP_ALLREDUCE || op == OP_BCAST || op == OP_ALLGATHER || op == OP_REDUCE_SCATTER);
            const double bar = cuda ? 0.95 : 1.0;
            char goal[96];
            if (refusals == rows) {
                refused++;
                snprintf(goal, sizeof goal, "refused");
            } else if (xmin < 0) {
                snprintf(goal, sizeof goal, "- (no staged rows)");
            } else {
                const int ok = xmin >= bar && (!twice || xbig < 0 || xbig >= 2);
                ok ? met++ : missed++;
                snprintf(goal, sizeof goal, "%s (x_min >= %.2f%s)%s", ok ? "ok" : "MISSED", bar,
                         twice ? ", x_1M+ >= 2" : "", refusals ? " some sizes refused" : "");
            }
            char at_s[24] = "-", atbig_s[24] = "-";
            if (xmin >= 0) snprintf(at_s, sizeof at_s, "%zu", at);
            if (xbig >= 0) snprintf(atbig_s, sizeof atbig_s, "%zu", atbig);
            bench_summary_line(b->csv, "%-7s %-15s %5d %8s %9s %8s %9s %9s %9s  %s", k->name, op_names[op], b->nranks,
                               num(xmin, v[0], sizeof v[0]), at_s, num(xbig, v[1], sizeof v[1]), atbig_s,
                               num(bus, v[2], sizeof v[2]), num(lat, v[3], sizeof v[3]), goal);
        }
    }
    bench_summary_line(b->csv, "goals: %ld met, %ld missed, %ld refused (kind and collective)", met, missed, refused);
    printf("# verify: %ld mismatched floats, %ld failed checks; %ld refused rows\n", b->mismatches, b->failed_checks,
           b->refused_rows);
    fprintf(b->csv, "# verify: %ld mismatched floats, %ld failed checks; %ld refused rows\n", b->mismatches,
            b->failed_checks, b->refused_rows);
    if (fclose(b->csv) != 0) coll_fail("cannot write the CSV: %s", strerror(errno));
}
