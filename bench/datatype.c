/* Derived datatypes on CUDA device buffers: MPI-ACC against every anchor it is held to, in
 * one run, 2 ranks (one GPU each, or both on one).
 *
 * Pack cases (rank 0 alone; rank 1 waits): an N x N matrix of doubles, row-major, in
 * device memory, and one datatype over it:
 *   vector     the column block of the first N/4 columns: MPI_Type_vector(N, N/4, N)
 *   lower      the lower triangle, row r holding r + 1 doubles: MPI_Type_indexed
 *   stair      the triangle with rows rounded up to whole steps of 64 doubles: row r holds
 *              min(N, (r / 64 + 1) * 64) (MPI_Type_indexed)
 *   transpose  the whole matrix column by column, blocklength 1: MPI_Type_create_hvector(N,
 *              1, 8, a column); its packed form is the transposed matrix (at N = 16K it is
 *              skipped with a note: 2 GiB of packed bytes overflow MPI_Pack's int count)
 * Each is packed into and unpacked from a contiguous device buffer, by:
 *   mpiacc     MPI_Pack / MPI_Unpack through libmpiacc on the two device pointers (found by
 *              CUDA pointer autodetection, the default)
 *   memcpy     cudaMemcpyAsync device to device of the packed bytes (op "copy")
 *   memcpy2d   cudaMemcpy2DAsync of the same layout (vector only: the others are no 2D box)
 *   kernel     a hand-written CUDA kernel for that layout (bench/datatype_kernels.cu)
 *   cpu        PMPI_Pack / PMPI_Unpack of the same layout on host memory: MPICH's CPU engine
 * Every GPU call is complete when timed: each anchor synchronises its stream per call, and
 * MPI_Pack returns with the bytes in place, as MPI says. GB/s are packed bytes (1e9 B/s).
 *
 * Faces (both ranks): a grid of n x n x n doubles in device memory on each rank and the six
 * faces of its interior, each an MPI_Type_create_subarray of (n-2) x (n-2) doubles (x is
 * the slowest dimension, z the fastest: a z face is one double per row). For face x-hi each
 * rank sends its interior plane x = n-2 to the other and receives the other's into its
 * ghost plane x = 0, as a stencil code's halo exchange does (x-lo: plane 1 into plane n-1).
 *   mpiacc       MPI_Irecv + MPI_Isend of the subarray types (tagged MPIX_ACC_BUF_CUDA) on
 *                the grid itself, then MPI_Waitall
 *   kernel-send  the anchor: MPI_Irecv of the packed bytes, the hand pack kernel, MPI_Isend
 *                of the packed bytes (contiguous doubles, tagged, through libmpiacc), then
 *                MPI_Waitall and the hand unpack kernel
 * us is one exchange (the slower rank's mean); GB/s is one face's bytes over it.
 * MPI-ACC reads MPIACC_IPC when it initialises, so "IPC off" is a second process:
 *   MPIACC_IPC=0 bench/datatype --cases faces ...  (rows then read mpiacc-noipc and
 *   kernel-send-noipc; --label overrides the suffix).
 *
 * The configurations of one case and size are measured in turn, in --rounds rounds whose
 * order rotates; each CSV row is the median over the rounds (each round is a comment line).
 * Each configuration is checked once, before its first timing, against host references:
 * packed bytes against PMPI_Pack of the same matrix, unpacked matrices (cleared first)
 * against PMPI_Unpack into a cleared one, and every double of both grids after one
 * exchange. A mismatch is printed (VERIFY FAILED), marked in its row, and makes the exit
 * code 1. A call MPI-ACC refuses with MPI_ERR_UNSUPPORTED_OPERATION gives an "unsupported"
 * row, its message once as a comment, and the run goes on; any other error ends it.
 * A phase longer than --watchdog seconds is declared a hang (exit 124, naming where).
 * Last, a summary of ratios (also as "# summary:" lines in the CSV): pack and unpack over
 * memcpy (goal from 4 MiB: vector >= 0.90, lower and stair >= 0.80), over the best hand
 * anchor and over the CPU engine (goal: transpose >= 10); each face's anchor time over
 * MPI-ACC's (goal >= 1).
 *
 *   mpiexec -n 2 bench/datatype [--quick] [--sizes LIST] [--grids LIST] [--cases LIST]
 *       [--configs LIST] [--rounds N] [--iters N] [--min-time SEC] [--label SUFFIX]
 *       [--csv FILE|DIR/] [--watchdog SEC]
 * CSV columns: case,n,bytes,config,op,us,GBs,status (n: N or the grid's edge; bytes:
 * packed bytes of one call; op: pack, unpack, copy or exchange; status: ok, MISMATCH,
 * unsupported (us and GBs empty) or ref (the CPU engine is the reference itself)).
 */
#include <cuda_runtime_api.h>
#include <mpiacc.h>
#include <signal.h>
#include <strings.h>

#define BENCH_PARTS_FAIL_DEFINE
#include "bench_common.h"
#include "bench_summary.h"
#include "datatype_parts.h"
#include "results_csv.h"

static void usage(void) {
    fprintf(stderr,
            "usage: mpiexec -n 2 datatype [--quick] [--sizes LIST] [--grids LIST] [--cases LIST]\n"
            "         [--configs LIST] [--rounds N] [--iters N] [--min-time SEC] [--label SUFFIX]\n"
            "         [--csv FILE|DIR/] [--watchdog SEC]\n"
            "  --sizes: matrix edges N (default " DEFAULT_SIZES
            "; multiples of 64)\n"
            "  --grids: grid edges n (default " DEFAULT_GRIDS
            ")\n"
            "  --quick: --sizes " QUICK_SIZES " --grids " QUICK_GRIDS
            " --min-time 0.02 (options after it still apply)\n"
            "  cases: vector,lower,stair,transpose,faces\n"
            "  configs: mpiacc,memcpy,memcpy2d,kernel,cpu,kernel-send\n"
            "  --rounds: rows are medians over the rounds (default 3, at most %d)\n"
            "  --iters: at most this many calls a measurement (default 1000); --min-time: at least\n"
            "           this long (default 0.05 s)\n",
            MAX_ROUNDS);
}

static int parse_list(const char *text, long lo, long hi, long *out, int *n) {
    char buf[512];
    if (strlen(text) >= sizeof buf) return 0;
    strcpy(buf, text);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_LIST || !parse_size(tok, lo, hi, &out[*n])) return 0;
        (*n)++;
    }
    return *n > 0;
}

static int parse_options(int argc, char **argv, Options *o) {
    *o = (Options){.rounds = 3, .iters = 1000, .min_time = 0.05};
    parse_list(DEFAULT_SIZES, 64, MAX_N, o->sizes, &o->nsizes);
    parse_list(DEFAULT_GRIDS, 8, MAX_GRID, o->grids, &o->ngrids);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok;
        if (!strcmp(a, "--quick")) {
            parse_list(QUICK_SIZES, 64, MAX_N, o->sizes, &o->nsizes);
            parse_list(QUICK_GRIDS, 8, MAX_GRID, o->grids, &o->ngrids);
            o->min_time = 0.02;
            continue;
        }
        if (!v) return 0;
        if (!strcmp(a, "--sizes")) {
            ok = parse_list(v, 64, MAX_N, o->sizes, &o->nsizes);
            for (int k = 0; ok && k < o->nsizes; k++) ok = o->sizes[k] % 64 == 0;
        } else if (!strcmp(a, "--grids"))
            ok = parse_list(v, 8, MAX_GRID, o->grids, &o->ngrids);
        else if (!strcmp(a, "--rounds"))
            ok = parse_size(v, 1, MAX_ROUNDS, &o->rounds);
        else if (!strcmp(a, "--iters"))
            ok = parse_size(v, 1, 1000000, &o->iters);
        else if (!strcmp(a, "--cases"))
            ok = (o->cases = v) != NULL;
        else if (!strcmp(a, "--configs"))
            ok = (o->configs = v) != NULL;
        else if (!strcmp(a, "--label"))
            ok = (o->label = v) != NULL;
        else if (!strcmp(a, "--csv"))
            ok = (o->csv = v) != NULL;
        else if (!strcmp(a, "--watchdog")) {
            long sec;
            ok = parse_size(v, 0, 86400, &sec);
            g_watchdog = (unsigned)sec;
        } else if (!strcmp(a, "--min-time")) {
            char *end;
            o->min_time = strtod(v, &end);
            ok = end != v && !*end && o->min_time >= 0 && o->min_time < 100;
        } else
            ok = 0;
        if (!ok) {
            if (g_rank == 0) fprintf(stderr, "%s: bad option %s %s\n", g_prog, a, v);
            return 0;
        }
        i++;
    }
    return 1;
}

/* ------------------------------------------------------------------ shared by both parts */

void mpi_fail_status(int rc, const char *file, int line, const char *call, int n, const MPI_Status *stats) {
    check_statuses(rc, file, line, call, n, stats);
    exit(1);
}

void die(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fail("%s", msg);
    exit(1);
}

void set_where(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_where, sizeof g_where, fmt, ap);
    va_end(ap);
}

void set_phase(const char *name) { phase(name); }

void stop_watchdog(void) { alarm(0); }

int selected(const char *list, const char *name) { return in_list(list, name); }

int refused(Bench *b, int rc, const char *call) {
    if (rc == MPI_SUCCESS) return 0;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0, cls = rc;
    if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = rc;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "?");
    if (cls != MPI_ERR_UNSUPPORTED_OPERATION) fail("%s failed (%d, class %d): %s", call, rc, cls, msg);
    /* Each refusal's text once: the same call refuses every case for the same reason. */
    for (int i = 0; i < b->nrefusals; i++)
        if (!strcmp(b->refusals[i], call)) return 1;
    if (b->nrefusals < MAX_REFUSALS) snprintf(b->refusals[b->nrefusals++], sizeof b->refusals[0], "%s", call);
    if (b->rank == 0)
        printf("# unsupported: %s: %s\n", call, msg);
    else
        printf("# unsupported (rank %d): %s: %s\n", b->rank, call, msg);
    if (b->csv) fprintf(b->csv, "# unsupported: %s: %s\n", call, msg);
    return 1;
}

long compare_doubles(const double *want, const double *got, size_t count, const char *what) {
    if (!memcmp(want, got, count * sizeof *want)) return 0;
    long bad = 0;
    size_t first = 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp(&want[i], &got[i], sizeof *want) && bad++ == 0) first = i;
    fprintf(stderr,
            "%s: rank %d: VERIFY FAILED [%s] %s: %ld of %zu doubles differ (first at %zu: got %.17g, want %.17g)\n",
            g_prog, g_rank, g_where, what, bad, count, first, got[first], want[first]);
    return bad;
}

const char *config_name(const Bench *b, const char *base, int through_mpiacc, char *buf, size_t len) {
    if (through_mpiacc && b->o.label && *b->o.label)
        snprintf(buf, len, "%s-%s", base, b->o.label);
    else
        snprintf(buf, len, "%s", base);
    return buf;
}

void print_round(Bench *b, const char *cas, long n, long bytes, const char *config, const char *op, double sec,
                 long iters, long round, const char *verify) {
    if (b->rank != 0) return;
    if (sec <= 0) { /* not measured */
        printf("%-12s %6ld %11ld %-20s %-8s %12s %9s %6s %3s  %s\n", cas, n, bytes, config, op, "-", "-", "-", "-",
               verify);
        fflush(stdout);
        return;
    }
    printf("%-12s %6ld %11ld %-20s %-8s %12.2f %9.2f %6ld %3ld  %s\n", cas, n, bytes, config, op, sec * 1e6,
           (double)bytes / sec / 1e9, iters, round + 1, verify);
    fflush(stdout);
    if (b->o.rounds > 1)
        fprintf(b->csv, "# round %ld: %s,%ld,%ld,%s,%s,%.3f,%.4f\n", round + 1, cas, n, bytes, config, op, sec * 1e6,
                (double)bytes / sec / 1e9);
}

void add_result(Bench *b, const char *cas, long n, long bytes, const char *base, const char *config, const char *op,
                const double *secs, int rounds, const char *status) {
    if (b->rank != 0) return;
    const int measured = strcmp(status, "unsupported") != 0;
    const double sec = measured ? bench_median(secs, rounds) : 0;
    if (measured)
        fprintf(b->csv, "%s,%ld,%ld,%s,%s,%.3f,%.4f,%s\n", cas, n, bytes, config, op, sec * 1e6,
                (double)bytes / sec / 1e9, status);
    else
        fprintf(b->csv, "%s,%ld,%ld,%s,%s,,,%s\n", cas, n, bytes, config, op, status);
    fflush(b->csv);
    if (b->nresults == MAX_RESULTS) return;
    Result *r = &b->results[b->nresults++];
    *r = (Result){.cas = cas, .n = n, .bytes = bytes, .base = base, .op = op, .sec = measured ? sec : -1};
    snprintf(r->config, sizeof r->config, "%s", config);
}

/* ------------------------------------------------------------------ summary */

static const Result *find_result(const Bench *b, const char *cas, long n, const char *base, const char *op) {
    for (int i = 0; i < b->nresults; i++) {
        const Result *r = &b->results[i];
        if (!strcmp(r->cas, cas) && r->n == n && !strcmp(r->base, base) && !strcmp(r->op, op)) return r;
    }
    return NULL;
}

static double gbs(const Result *r) { return r && r->sec > 0 ? (double)r->bytes / r->sec / 1e9 : -1; }

/* "%.2f" of v, or "-" when v < 0 (not measured). */
static const char *num(double v, char *buf) {
    if (v < 0) return "-";
    snprintf(buf, 32, "%.2f", v);
    return buf;
}

/* The goal a pack case is held to: ratio of `what` at least `bar`, from `min_bytes` up. */
static void pack_goal(const char *cas, double *bar, const char **what, long *min_bytes) {
    *min_bytes = GOAL_BYTES;
    *what = "memcpy";
    if (!strcmp(cas, "vector"))
        *bar = 0.90;
    else if (!strcmp(cas, "transpose"))
        *bar = 10, *what = "cpu", *min_bytes = 0;
    else
        *bar = 0.80;
}

/* Whether MPI-ACC has rows of faces (exchange = 1) or of pack cases (0). */
static int have_rows(const Bench *b, int exchange) {
    for (int i = 0; i < b->nresults; i++) {
        const int is_exchange = strcmp(b->results[i].op, "exchange") == 0;
        if (!strcmp(b->results[i].base, "mpiacc") && is_exchange == exchange) return 1;
    }
    return 0;
}

void print_summary(Bench *b) {
    long met = 0, missed = 0;
    char v[6][32];
    if (have_rows(b, 0)) {
        bench_summary_line(b->csv,
                           "MPI-ACC over its anchors (GB/s; x = MPI-ACC's bandwidth over the anchor's, > 1: faster)");
        bench_summary_line(b->csv, "%-10s %6s %11s %-7s %9s %9s %8s %-17s %7s %8s %8s  %s", "case", "n", "bytes", "op",
                           "mpiacc", "memcpy", "x_memcpy", "best_hand", "x_hand", "cpu", "x_cpu", "goal");
    }
    for (int i = 0; i < b->nresults; i++) {
        const Result *r = &b->results[i];
        if (strcmp(r->base, "mpiacc") || !strcmp(r->op, "exchange")) continue;
        const Result *copy = find_result(b, r->cas, r->n, "memcpy", "copy");
        const Result *cpu = find_result(b, r->cas, r->n, "cpu", r->op);
        const Result *hand = NULL;
        const char *hands[] = {"memcpy2d", "kernel"};
        for (int k = 0; k < 2; k++) {
            const Result *h = find_result(b, r->cas, r->n, hands[k], r->op);
            if (gbs(h) > gbs(hand)) hand = h;
        }
        const double mine = gbs(r);
        const double x_copy = mine > 0 && gbs(copy) > 0 ? mine / gbs(copy) : -1;
        const double x_hand = mine > 0 && gbs(hand) > 0 ? mine / gbs(hand) : -1;
        const double x_cpu = mine > 0 && gbs(cpu) > 0 ? mine / gbs(cpu) : -1;
        double bar;
        const char *what;
        long min_bytes;
        pack_goal(r->cas, &bar, &what, &min_bytes);
        const double x = !strcmp(what, "cpu") ? x_cpu : x_copy;
        char goal[64];
        if (r->sec < 0)
            snprintf(goal, sizeof goal, "unsupported");
        else if (r->bytes < min_bytes)
            snprintf(goal, sizeof goal, "- (under 4 MiB)");
        else if (x < 0)
            snprintf(goal, sizeof goal, "- (no %s row)", what);
        else {
            const int ok = x >= bar;
            ok ? met++ : missed++;
            snprintf(goal, sizeof goal, "%s (x_%s >= %.2f)", ok ? "ok" : "MISSED", what, bar);
        }
        bench_summary_line(b->csv, "%-10s %6ld %11ld %-7s %9s %9s %8s %-17s %7s %8s %8s  %s", r->cas, r->n, r->bytes,
                           r->op, r->sec < 0 ? "unsupp." : num(mine, v[0]), num(gbs(copy), v[1]), num(x_copy, v[2]),
                           hand ? hand->config : "-", num(x_hand, v[3]), num(gbs(cpu), v[4]), num(x_cpu, v[5]), goal);
    }
    if (have_rows(b, 1)) {
        bench_summary_line(b->csv,
                           "Faces, D->D (us per exchange; x = the anchor's time over MPI-ACC's, > 1: MPI-ACC faster)");
        bench_summary_line(b->csv, "%-10s %6s %11s %-20s %10s %-20s %10s %7s  %s", "face", "n", "bytes", "config", "us",
                           "anchor", "us", "x", "goal");
    }
    for (int i = 0; i < b->nresults; i++) {
        const Result *r = &b->results[i];
        if (strcmp(r->base, "mpiacc") || strcmp(r->op, "exchange")) continue;
        const Result *anchor = find_result(b, r->cas, r->n, "kernel-send", "exchange");
        const double x = r->sec > 0 && anchor && anchor->sec > 0 ? anchor->sec / r->sec : -1;
        char goal[64];
        if (r->sec < 0)
            snprintf(goal, sizeof goal, "unsupported");
        else if (x < 0)
            snprintf(goal, sizeof goal, "- (no anchor row)");
        else {
            x >= 1 ? met++ : missed++;
            snprintf(goal, sizeof goal, "%s (x >= 1)", x >= 1 ? "ok" : "MISSED");
        }
        bench_summary_line(b->csv, "%-10s %6ld %11ld %-20s %10s %-20s %10s %7s  %s", r->cas, r->n, r->bytes, r->config,
                           r->sec < 0 ? "unsupp." : num(r->sec * 1e6, v[0]), anchor ? anchor->config : "-",
                           num(anchor && anchor->sec > 0 ? anchor->sec * 1e6 : -1, v[1]), num(x, v[2]), goal);
    }
    bench_summary_line(b->csv, "goals: %ld met, %ld missed; %ld unsupported rows", met, missed, b->unsupported);
}

/* ------------------------------------------------------------------ main */

/* "visible_devices=N rank0_device=... rank1_device=..." for the CSV and the table. */
static void describe_devices(Bench *b, char *out, size_t len) {
    struct cudaDeviceProp prop;
    char bus[32] = "?", mine[320], theirs[320];
    CHECK_CUDA(cudaGetDeviceProperties(&prop, b->device));
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, b->device) != cudaSuccess) snprintf(bus, sizeof bus, "?");
    snprintf(mine, sizeof mine, "%d %s (%s)", b->device, prop.name, bus);
    CHECK_MPI(PMPI_Sendrecv(mine, sizeof mine, MPI_CHAR, b->peer, TAG_INFO, theirs, sizeof theirs, MPI_CHAR, b->peer,
                            TAG_INFO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    snprintf(out, len, "visible_devices=%d rank0_device=\"%s\" rank1_device=\"%s\"", b->ndev,
             b->rank == 0 ? mine : theirs, b->rank == 0 ? theirs : mine);
}

static Bench g_bench;

int main(int argc, char **argv) {
    Bench *b = &g_bench;
    b->dbl_cuda = MPI_DATATYPE_NULL;
    g_prog = "datatype";

    /* The device is picked before MPI_Init, so that MPI-ACC's CUDA context lands on it. */
    cudaError_t count_err = cudaGetDeviceCount(&b->ndev);
    if (count_err == cudaSuccess && b->ndev > 0) cudaSetDevice(local_rank_from_env() % b->ndev);

    MPI_Init(&argc, &argv);
    int nranks;
    PMPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &nranks);
    g_rank = b->rank;
    b->peer = 1 - b->rank;
    /* Refusals come back as codes: an unsupported case is a row, not the end of the run. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (!parse_options(argc, argv, &b->o) || nranks != 2) {
        if (b->rank == 0) {
            if (nranks != 2) fprintf(stderr, "datatype: needs exactly 2 ranks, got %d\n", nranks);
            usage();
        }
        MPI_Finalize();
        return 2;
    }
    int usable = count_err == cudaSuccess && b->ndev > 0 && MPIX_Query_cuda_support(), all = 0;
    CHECK_MPI(PMPI_Allreduce(&usable, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all) {
        if (!usable)
            fprintf(stderr,
                    "datatype: rank %d: no usable CUDA device (cudaGetDeviceCount: %s, %d devices; "
                    "MPIX_Query_cuda_support: %d)\n",
                    b->rank, cudaGetErrorString(count_err), b->ndev,
                    count_err == cudaSuccess && b->ndev > 0 ? MPIX_Query_cuda_support() : 0);
        MPI_Finalize();
        return 1;
    }
    if (!b->o.label) b->o.label = env_is_off("MPIACC_IPC") ? "noipc" : "";
    b->device = b->rank % b->ndev;
    CHECK_CUDA(cudaSetDevice(b->device));
    CHECK_CUDA(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    CHECK_MPI(MPI_Type_dup(MPI_DOUBLE, &b->dbl_cuda));
    CHECK_MPI(MPI_Type_set_attr(b->dbl_cuda, MPIX_ACC_BUF_TYPE, (void *)(intptr_t)MPIX_ACC_BUF_CUDA));
    /* MPI_Pack has no attribute for its packed buffer: MPI-ACC finds both by pointer query. */
    b->pack_autodetect = !env_is_off("MPIACC_CUDA_AUTODETECT");

    char devinfo[1024];
    describe_devices(b, devinfo, sizeof devinfo);
    if (b->rank == 0) {
        char path[4096], lib[MPI_MAX_LIBRARY_VERSION_STRING];
        const char *ipc = getenv("MPIACC_IPC");
        b->csv = open_results_csv(b->o.csv, g_prog, path, sizeof path);
        if (!b->csv) fail("cannot write %s: %s", path, strerror(errno));
        begin_results_csv(b->csv, g_prog, argc, argv, lib);
        fprintf(b->csv,
                "# mpi=\"%s\" %s MPIACC_IPC=%.64s rounds=%ld iters=%ld min_time=%g colblock=N/4 stair_step=%d\n", lib,
                devinfo, ipc ? ipc : "(unset)", b->o.rounds, b->o.iters, b->o.min_time, STAIR_STEP);
        fprintf(b->csv, "case,n,bytes,config,op,us,GBs,status\n");
        fflush(b->csv);
        printf("# csv: %s\n# datatype: 2 ranks, %s\n", path, devinfo);
        printf("# GB/s = 1e9 packed bytes/s; us per call (faces: per exchange, the slower rank)\n");
        printf("%-12s %6s %11s %-20s %-8s %12s %9s %6s %3s  %s\n", "case", "n", "bytes", "config", "op", "us", "GB/s",
               "iters", "rnd", "verify");
        fflush(stdout);
    }
    signal(SIGALRM, on_alarm);

    run_pack_cases(b);
    if (selected(b->o.cases, "faces"))
        for (int i = 0; i < b->o.ngrids; i++) run_grid(b, b->o.grids[i]);
    alarm(0);

    if (b->rank == 0) {
        print_summary(b);
        printf("# verify: %ld mismatched doubles, %ld failed checks; %ld unsupported rows\n", b->mismatches,
               b->failed_checks, b->unsupported);
        fprintf(b->csv, "# verify: %ld mismatched doubles, %ld failed checks; %ld unsupported rows\n", b->mismatches,
                b->failed_checks, b->unsupported);
        if (fclose(b->csv) != 0) fail("cannot write the CSV: %s", strerror(errno));
    }
    MPI_Type_free(&b->dbl_cuda);
    CHECK_CUDA(cudaStreamDestroy(b->stream));
    MPI_Finalize();
    return b->failed_checks ? 1 : 0;
}
