/* Host-to-host cost of going through libmpiacc, against plain MPICH, in the same run.
 *
 * OSU-style latency (ping-pong; one-way time = round trip / 2) and bandwidth (a window
 * of 64 nonblocking sends, then a one-byte ack) for 8 B .. 4 MiB, on 2 ranks. The
 * anchor path calls PMPI_* (straight into MPICH); the measured path calls MPI_*
 * (through libmpiacc, which this program is linked with). Within each round the two take
 * turns every few round trips (every window for bandwidth), who goes first alternating
 * from round to round: drift (clocks, caches, neighbours on the host) falls on both paths
 * alike. Blocks of one path at a time (ABBA) let a 4 MiB latency differ by 8% between two
 * identical paths on the GPU machine. The times shown are medians over the rounds; an
 * overhead is the median over the rounds of that round's ratio of the two paths (a paired
 * comparison: a round that ran slow for both counts once, as a ratio near 1, rather than
 * moving one path's median and not the other's).
 *
 * --control measures MPICH against itself (both paths PMPI_*): the overheads it prints
 * are what the measurement alone makes of two identical paths, the noise floor under
 * the budgets.
 *
 * DESIGN.md section 5: latency through libmpiacc at most 3% above MPICH below the
 * rendezvous threshold, and large-message bandwidth within 3%. --budget-lat and
 * --budget-bw check those; --enforce makes a missed budget fail the exit code. A size
 * fails only when its overhead passes the budget by more than the run-to-run spread
 * measured for it (half the interquartile range of the rounds' ratios): on a small
 * shared machine, neighbours move single rounds by more than the budget, and the check
 * says so instead of blaming the library. The CSV goes where --csv says (a file, or a
 * folder), else into the current directory.
 *
 *   mpiexec -n 2 bench/host_overhead [--iters N] [--lat-iters N] [--rounds N] [--max-size N]
 *           [--csv FILE|DIR/] [--budget-lat PCT] [--budget-bw PCT] [--enforce] [--control]
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "results_csv.h"

enum { WINDOW = 64, TAG_DATA = 1, TAG_ACK = 2, MIN_SIZE = 8, MAX_ROUNDS = 1000 };

/* DESIGN.md holds host latency to its budget for messages under the rendezvous
 * threshold (at and above it a message pays the RTS/CTS round trip by design); the
 * bandwidth budget is for "large" messages, rendezvous included, as small ones are
 * latency-bound. */
#define BW_BUDGET_MIN_SIZE (1L << 20)
/* libmpiacc's value of a numeric knob (SIZE in bytes), -1 when unknown. */
long long mpiacc_knob_value(const char *name);

/* Sizes from here on pay the RTS/CTS round trip; 0 means never. */
static long rndv_threshold(void) {
    long long n = mpiacc_knob_value("MPIACC_HOST_RNDV_THRESHOLD");
    return n > 0 ? (long)n : 1L << 62;
}
/* One way into MPI: the same benchmark code runs over either table. */
typedef struct {
    const char *name;
    int (*send)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
    int (*recv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
    int (*isend)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    int (*irecv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    int (*waitall)(int, MPI_Request[], MPI_Status[]);
} Path;

static const Path mpich_path = {"mpich", PMPI_Send, PMPI_Recv, PMPI_Isend, PMPI_Irecv, PMPI_Waitall};
static const Path mpiacc_path = {"mpiacc", MPI_Send, MPI_Recv, MPI_Isend, MPI_Irecv, MPI_Waitall};

typedef struct {
    long iters, lat_iters, rounds, max_size; /* lat_iters 0: same as iters */
    double budget_lat, budget_bw;            /* percent; < 0 when not asked for */
    int enforce, control;
    const char *csv;
} Options;

static void usage(void) {
    fprintf(stderr,
            "usage: mpiexec -n 2 host_overhead [--iters N] [--lat-iters N] [--rounds N] [--max-size BYTES]\n"
            "         [--csv FILE|DIR/] [--budget-lat PCT] [--budget-bw PCT] [--enforce] [--control]\n");
}

static int parse_long(const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static int parse_pct(const char *text, double *out) {
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || v < 0) return 0;
    *out = v;
    return 1;
}

static int parse_options(int argc, char **argv, Options *o) {
    *o = (Options){.iters = 2000, .rounds = 10, .max_size = 4L << 20, .budget_lat = -1, .budget_bw = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok;
        if (!strcmp(a, "--enforce")) {
            o->enforce = 1;
            continue;
        }
        if (!strcmp(a, "--control")) {
            o->control = 1;
            continue;
        }
        if (!v) return 0;
        if (!strcmp(a, "--iters"))
            ok = parse_long(v, 10, 100000000, &o->iters);
        else if (!strcmp(a, "--lat-iters"))
            ok = parse_long(v, 10, 100000000, &o->lat_iters);
        else if (!strcmp(a, "--rounds"))
            ok = parse_long(v, 1, MAX_ROUNDS, &o->rounds);
        else if (!strcmp(a, "--max-size"))
            ok = parse_long(v, MIN_SIZE, 1L << 30, &o->max_size);
        else if (!strcmp(a, "--csv"))
            ok = (o->csv = v) != NULL;
        else if (!strcmp(a, "--budget-lat"))
            ok = parse_pct(v, &o->budget_lat);
        else if (!strcmp(a, "--budget-bw"))
            ok = parse_pct(v, &o->budget_bw);
        else
            ok = 0;
        if (!ok) return 0;
        i++;
    }
    return 1;
}

/* Fewer iterations for large messages, as OSU does, so a run stays short. */
static long scaled(long iters, long size, long floor) {
    long n = size <= 8192 ? iters : iters * 8192 / size;
    return n < floor ? floor : n;
}

/* Round trips (or windows) per turn: the two paths take turns every few iterations,
 * so that anything that drifts during a run (clocks, caches, neighbours on the host)
 * falls on both alike. A turn lasts at least ~8 KiB of traffic, so PMPI_Wtime's own cost
 * stays out of small-message figures. */
static long turn_length(long size) { return size >= 8192 ? 1 : 8192 / size < 16 ? 8192 / size : 16; }

/* One-way latency in microseconds of each path, over `iters` round trips each (after
 * `warmup` untimed ones each), the paths taking turns; `first` says who starts. */
static void latency_us(const Path *const paths[2], int first, int rank, char *sbuf, char *rbuf, int size, long iters,
                       long warmup, double out[2]) {
    MPI_Comm comm = MPI_COMM_WORLD;
    const long turn = turn_length(size);
    double spent[2] = {0, 0};
    long done[2] = {0, 0}, timed[2] = {0, 0};
    PMPI_Barrier(comm);
    for (long t = 0; done[0] < warmup + iters || done[1] < warmup + iters; t++) {
        const int k = (first + (int)(t % 2)) % 2;
        const Path *p = paths[k];
        const long n = turn < warmup + iters - done[k] ? turn : warmup + iters - done[k];
        if (n <= 0) continue;
        double t0 = PMPI_Wtime();
        for (long i = 0; i < n; i++) {
            if (rank == 0) {
                p->send(sbuf, size, MPI_CHAR, 1, TAG_DATA, comm);
                p->recv(rbuf, size, MPI_CHAR, 1, TAG_DATA, comm, MPI_STATUS_IGNORE);
            } else {
                p->recv(rbuf, size, MPI_CHAR, 0, TAG_DATA, comm, MPI_STATUS_IGNORE);
                p->send(sbuf, size, MPI_CHAR, 0, TAG_DATA, comm);
            }
        }
        /* Turns that start past the warm-up count are timed, with what they ran. */
        if (done[k] >= warmup) {
            spent[k] += PMPI_Wtime() - t0;
            timed[k] += n;
        }
        done[k] += n;
    }
    for (int k = 0; k < 2; k++) out[k] = spent[k] * 1e6 / (2.0 * (double)timed[k]);
}

/* One window: WINDOW nonblocking messages and a one-byte ack. Unlike osu_bw, each receive
 * of a window has its own slice of rbuf: concurrently pending receives into the same
 * bytes are a data race, and MPI-ACC sends such receives through a bounce buffer (an
 * envelope landing in bytes another pending receive owns could be overwritten before it
 * is read), which would measure that copy rather than the library's overhead. */
static void window(const Path *p, int rank, char *sbuf, char *rbuf, int size) {
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Request reqs[WINDOW];
    char ack = 0;
    if (rank == 0) {
        for (int w = 0; w < WINDOW; w++) p->isend(sbuf, size, MPI_CHAR, 1, TAG_DATA, comm, &reqs[w]);
        p->waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
        p->recv(&ack, 1, MPI_CHAR, 1, TAG_ACK, comm, MPI_STATUS_IGNORE);
    } else {
        for (int w = 0; w < WINDOW; w++)
            p->irecv(rbuf + (size_t)w * (size_t)size, size, MPI_CHAR, 0, TAG_DATA, comm, &reqs[w]);
        p->waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
        p->send(&ack, 1, MPI_CHAR, 0, TAG_ACK, comm);
    }
}

/* Bandwidth in GB/s (1e9 bytes) of each path over `iters` windows each, the paths taking
 * turns window by window. */
static void bandwidth_GBs(const Path *const paths[2], int first, int rank, char *sbuf, char *rbuf, int size, long iters,
                          long warmup, double out[2]) {
    double spent[2] = {0, 0};
    PMPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < warmup + iters; i++) {
        for (int j = 0; j < 2; j++) {
            const int k = (first + j) % 2;
            double t0 = PMPI_Wtime();
            window(paths[k], rank, sbuf, rbuf, size);
            if (i >= warmup) spent[k] += PMPI_Wtime() - t0;
        }
    }
    for (int k = 0; k < 2; k++) out[k] = (double)size * WINDOW * (double)iters / spent[k] / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    long size;
    double lat[2], bw[2];         /* [0] MPICH, [1] MPI-ACC: medians over rounds */
    double lat_ovh, bw_ovh;       /* percent, paired: medians over rounds of each round's ratio */
    double lat_spread, bw_spread; /* percent: half the interquartile range of those ratios */
} Row;

/* Half the interquartile range of v[0..n), which median() has sorted, in percent of 1. */
static double spread_pct(const double *sorted, int n) {
    return n < 4 ? 0.0 : (sorted[(3 * n) / 4] - sorted[n / 4]) / 2.0 * 100.0;
}

/* Positive = MPI-ACC slower, for both. */
static double lat_overhead(const Row *r) { return r->lat_ovh; }
static double bw_overhead(const Row *r) { return r->bw_ovh; }
static double lat_spread(const Row *r) { return r->lat_spread; }
static double bw_spread(const Row *r) { return r->bw_spread; }
/* The same from the medians alone (ratio of medians), which the CSV keeps beside them. */
static double lat_overhead_of_medians(const Row *r) { return (r->lat[1] - r->lat[0]) / r->lat[0] * 100.0; }
static double bw_overhead_of_medians(const Row *r) { return (r->bw[0] - r->bw[1]) / r->bw[0] * 100.0; }

static FILE *open_csv(const Options *o, char *path, size_t len) {
    return open_results_csv(o->csv, "host_overhead", path, len);
}

static int write_csv(const Options *o, int argc, char **argv, const Row *rows, int nrows) {
    char path[4096], lib[MPI_MAX_LIBRARY_VERSION_STRING];
    FILE *f = open_csv(o, path, sizeof path);
    if (!f) {
        fprintf(stderr, "host_overhead: cannot write %s: %s\n", path, strerror(errno));
        return 0;
    }
    begin_results_csv(f, "host_overhead", argc, argv, lib);
    fprintf(f,
            "# mpi=\"%s\" rounds=%ld iters=%ld lat_iters=%ld window=%d median_of=%ld turns=interleaved "
            "overhead=median_of_paired_ratios%s\n",
            lib, o->rounds, o->iters, o->lat_iters ? o->lat_iters : o->iters, WINDOW, o->rounds,
            o->control ? " control=mpich_vs_mpich" : "");
    fprintf(f,
            "size,mpich_lat_us,mpiacc_lat_us,lat_overhead_pct,mpich_bw_GBs,mpiacc_bw_GBs,bw_overhead_pct,"
            "lat_overhead_of_medians_pct,bw_overhead_of_medians_pct,lat_spread_pct,bw_spread_pct\n");
    for (int i = 0; i < nrows; i++) {
        const Row *r = &rows[i];
        fprintf(f, "%ld,%.4f,%.4f,%.2f,%.4f,%.4f,%.2f,%.2f,%.2f,%.2f,%.2f\n", r->size, r->lat[0], r->lat[1],
                lat_overhead(r), r->bw[0], r->bw[1], bw_overhead(r), lat_overhead_of_medians(r),
                bw_overhead_of_medians(r), lat_spread(r), bw_spread(r));
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "host_overhead: cannot write %s: %s\n", path, strerror(errno));
        return 0;
    }
    printf("# csv: %s\n", path);
    return 1;
}

/* Prints one PASS/FAIL line for sizes in [lo, hi); returns 1 when the budget holds (or
 * when no size in range was measured). A size over budget by no more than its measured
 * spread passes, and the line says so: that excess is within the measurement's noise. */
static int check_budget(const char *what, double budget, const Row *rows, int nrows, long lo, long hi,
                        double (*overhead)(const Row *), double (*spread)(const Row *)) {
    int worst = -1, decisive = -1; /* the largest overhead; the largest excess over budget + spread */
    for (int i = 0; i < nrows; i++) {
        if (rows[i].size < lo || rows[i].size >= hi) continue;
        if (worst < 0 || overhead(&rows[i]) > overhead(&rows[worst])) worst = i;
        if (decisive < 0 || overhead(&rows[i]) - spread(&rows[i]) > overhead(&rows[decisive]) - spread(&rows[decisive]))
            decisive = i;
    }
    if (worst < 0) {
        printf("budget %s %.1f%%: PASS (no message size in its range was measured)\n", what, budget);
        return 1;
    }
    char range[64] = "";
    if (hi < (1L << 62)) snprintf(range, sizeof range, " below %ld B", hi);
    const Row *w = &rows[worst], *d = &rows[decisive];
    const double excess = overhead(d) - budget;
    if (overhead(w) <= budget) {
        printf("budget %s %.1f%%%s: PASS (worst %+.2f%% at %ld B, run-to-run spread there %.2f%%)\n", what, budget,
               range, overhead(w), w->size, spread(w));
        return 1;
    }
    if (excess <= spread(d)) {
        printf(
            "budget %s %.1f%%%s: PASS within noise (worst %+.2f%% at %ld B: over budget by %.2f%%, less than the "
            "run-to-run spread %.2f%% measured there)\n",
            what, budget, range, overhead(w), w->size, overhead(w) - budget, spread(w));
        return 1;
    }
    printf(
        "budget %s %.1f%%%s: FAIL (%+.2f%% at %ld B: over budget by %.2f%%, more than the run-to-run spread "
        "%.2f%% measured there; on a shared machine that may still be noise: rerun with more --rounds, and "
        "--control for the noise floor)\n",
        what, budget, range, overhead(d), d->size, excess, spread(d));
    return 0;
}

int main(int argc, char **argv) {
    int rank, nranks;
    Options o;
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (!parse_options(argc, argv, &o) || nranks != 2) {
        if (rank == 0) {
            if (nranks != 2) fprintf(stderr, "host_overhead: needs exactly 2 ranks, got %d\n", nranks);
            usage();
        }
        MPI_Finalize();
        return 2;
    }

    char *sbuf = malloc((size_t)o.max_size), *rbuf = malloc((size_t)o.max_size * WINDOW);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "host_overhead: cannot allocate 2 x %ld bytes\n", o.max_size);
        PMPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    memset(sbuf, 'a' + rank, (size_t)o.max_size); /* fault the pages in before timing */
    memset(rbuf, 0, (size_t)o.max_size * WINDOW);

    const Path *paths[2] = {&mpich_path, o.control ? &mpich_path : &mpiacc_path};
    Row rows[32];
    int nrows = 0;
    double lat[2][MAX_ROUNDS], bw[2][MAX_ROUNDS], lat_ratio[MAX_ROUNDS], bw_ratio[MAX_ROUNDS];

    if (rank == 0) {
        if (o.control) printf("# host_overhead --control: MPICH against itself; \"mpiacc\" below is MPICH too\n");
        printf("# host_overhead: 2 ranks, median of %ld rounds; the paths take turns within each\n", o.rounds);
        printf("# overhead %%: median over the rounds of each round's ratio; > 0 means MPI-ACC is slower\n");
        printf("# bandwidth in GB/s (1e9 B/s), window %d\n", WINDOW);
        printf("%10s %13s %13s %9s %13s %13s %9s\n", "size", "mpich_lat_us", "mpiacc_lat_us", "lat_ovh%",
               "mpich_bw_GBs", "mpiacc_bw_GBs", "bw_ovh%");
        fflush(stdout);
    }
    for (long size = MIN_SIZE; size <= o.max_size; size *= 2) {
        /* Latency samples are cheap where the overhead is hardest to see (a few ns on a
         * 0.5 us round trip): --lat-iters raises them without lengthening the windows. */
        long lat_iters = scaled(o.lat_iters ? o.lat_iters : o.iters, size, 40);
        long bw_iters = scaled(o.iters / 10, size, 10);
        long lat_warm = lat_iters / 10 + 1, bw_warm = bw_iters / 10 + 1;
        int n = 0;
        for (long round = 0; round < o.rounds; round++, n++) {
            /* Who takes the first turn alternates from round to round. */
            double l[2], b[2];
            latency_us(paths, (int)(round % 2), rank, sbuf, rbuf, (int)size, lat_iters, lat_warm, l);
            bandwidth_GBs(paths, (int)((round + 1) % 2), rank, sbuf, rbuf, (int)size, bw_iters, bw_warm, b);
            for (int p = 0; p < 2; p++) {
                lat[p][n] = l[p];
                bw[p][n] = b[p];
            }
            lat_ratio[n] = l[1] / l[0];
            bw_ratio[n] = b[1] / b[0];
        }
        Row *r = &rows[nrows++];
        r->size = size;
        for (int p = 0; p < 2; p++) {
            r->lat[p] = median(lat[p], n);
            r->bw[p] = median(bw[p], n);
        }
        r->lat_ovh = (median(lat_ratio, n) - 1.0) * 100.0;
        r->bw_ovh = (1.0 - median(bw_ratio, n)) * 100.0;
        r->lat_spread = spread_pct(lat_ratio, n);
        r->bw_spread = spread_pct(bw_ratio, n);
        if (rank == 0) {
            printf("%10ld %13.3f %13.3f %+9.2f %13.3f %13.3f %+9.2f\n", size, r->lat[0], r->lat[1], lat_overhead(r),
                   r->bw[0], r->bw[1], bw_overhead(r));
            fflush(stdout);
        }
    }

    int ok = 1;
    if (rank == 0) {
        if (!write_csv(&o, argc, argv, rows, nrows)) ok = 0;
        if (o.budget_lat >= 0 &&
            !check_budget("lat", o.budget_lat, rows, nrows, 0, rndv_threshold(), lat_overhead, lat_spread) && o.enforce)
            ok = 0;
        if (o.budget_bw >= 0 &&
            !check_budget("bw", o.budget_bw, rows, nrows, BW_BUDGET_MIN_SIZE, 1L << 62, bw_overhead, bw_spread) &&
            o.enforce)
            ok = 0;
    }
    PMPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return ok ? 0 : 1;
}
