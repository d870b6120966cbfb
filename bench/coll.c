/* Collectives on device buffers: MPI-ACC against the anchors it is held to, in one run,
 * on any number of ranks (one GPU each, or several sharing one).
 *
 * Collectives (floats, MPI_SUM, root 0): allreduce, reduce, bcast, allgather, alltoall and
 * reduce_scatter (MPI_Reduce_scatter_block). Kinds of buffer: host, cuda, opencl (those
 * built; --kinds picks; the host kind has the mpiacc and host configurations alone).
 * Configurations, each on the same bytes:
 *   mpiacc   MPI_<Collective> through libmpiacc on the device buffers (a CUDA pointer or a
 *            cl_mem, the datatype tagged MPIX_ACC_BUF_CUDA / MPIX_ACC_BUF_OPENCL with the
 *            queue); for the host kind, host buffers through libmpiacc
 *   staged   staging by hand: the device buffer copied to pinned host memory of the same
 *            device's runtime, PMPI_<Collective> on it, the result copied back
 *   host     PMPI_<Collective> on pageable host buffers: MPICH host to host
 *   nccl     ncclAllReduce etc. called directly (alltoall: grouped ncclSend/ncclRecv), CUDA
 *            only; libnccl.so.2 is loaded with dlopen, and the configuration is skipped,
 *            with the reason, where it is missing or where ranks share one GPU (NCCL
 *            refuses two ranks on one device)
 * Every call is complete when it returns (NCCL's stream is synchronised per call).
 *
 * Sizes follow nccl-tests: `size` is the bytes of the largest buffer of a rank, i.e. the
 * vector of allreduce, reduce and bcast, the gathered result of allgather, the whole send
 * buffer of alltoall and reduce_scatter (each rank's block is size / ranks, at least one
 * float: a size below 4 x ranks bytes grows to it, and the row names the size used).
 * algbw = size / time; busbw = algbw x (allreduce 2(n-1)/n; reduce_scatter, allgather,
 * alltoall (n-1)/n; bcast, reduce 1). Time per call is the slowest rank's mean over the
 * iterations of a round, and each row the median over --rounds rounds; the configurations
 * of one collective and size are measured in turn, in an order that rotates each round.
 * x_staged (on mpiacc rows) = staged's time over mpiacc's: above 1, MPI-ACC is faster.
 *
 * Each configuration is checked once per collective and size, before it is timed: the
 * receive buffer is cleared, the call made once, and every float of the result compared
 * with the same computation on the host (values are small integers, so any order of
 * summation is exact). A mismatch is printed (VERIFY FAILED), marked in its row, and makes
 * the exit code 1. An mpiacc call that MPI-ACC refuses (MPI_ERR_UNSUPPORTED_OPERATION)
 * gives a "refused" row, and "refused: <error string>" once per collective and kind; the
 * run goes on, and exits 0 unless --require-mpiacc is given. Any other mpiacc error gives
 * an "error" row and exit code 1. A phase longer than --watchdog seconds is a hang (exit
 * 124, naming where). Last, a summary of MPI-ACC over staging and NCCL ("# summary:").
 *
 *   mpiexec -n N bench/coll [--quick] [--sizes LIST|pow2] [--max-size BYTES] [--ops LIST]
 *       [--kinds LIST] [--configs LIST] [--rounds N] [--iters N] [--min-iters N]
 *       [--min-time SEC] [--label SUFFIX] [--csv FILE|DIR/] [--watchdog SEC] [--require-mpiacc]
 * --label names the mpiacc rows mpiacc-SUFFIX; with MPIACC_IPC=0 they read mpiacc-noipc.
 * CSV columns: op,kind,config,ranks,size,us,algbw_GBs,busbw_GBs,x_staged,status (GB/s =
 * 1e9 B/s; status ok, MISMATCH, refused or error, the last two with empty numbers).
 */
#include <mpiacc.h>
#include <signal.h>

#include "bench_common.h"
#include "coll_parts.h"
#include "results_csv.h"

/* Powers of 4 from 64 B, with 8 B (one latency point) below them. */
#define DEFAULT_SIZES "8,64,256,1K,4K,16K,64K,256K,1M,4M,16M,64M,256M"
#define QUICK_SIZES "8,1K,64K,1M"
#define MAX_SIZE (1L << 30)
#define ITER_REF_BYTES (64L << 10) /* --iters holds up to this size, fewer beyond in proportion */

const char *const op_names[NUM_OPS] = {"allreduce", "reduce", "bcast", "allgather", "alltoall", "reduce_scatter"};
static const char *const config_names[NUM_CONFIGS] = {"mpiacc", "staged", "host", "nccl"};
static const char *const status_names[] = {"ok", "MISMATCH", "refused", "error"};

void coll_fail(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fail("%s", msg);
    exit(1); /* fail() does not return */
}

/* ------------------------------------------------------------------ options */

static void usage(FILE *to) {
    fprintf(to,
            "usage: mpiexec -n N coll [--quick] [--sizes LIST|pow2] [--max-size BYTES] [--ops LIST]\n"
            "         [--kinds LIST] [--configs LIST] [--rounds N] [--iters N] [--min-iters N]\n"
            "         [--min-time SEC] [--label SUFFIX] [--csv FILE|DIR/] [--watchdog SEC] [--require-mpiacc]\n"
            "  sizes take K, M, G suffixes (powers of 1024); default " DEFAULT_SIZES
            "\n"
            "  pow2: 8 B to 256 MiB by powers of 2; --quick: --sizes " QUICK_SIZES
            " --rounds 1 --min-time 0.01\n"
            "  ops: allreduce,reduce,bcast,allgather,alltoall,reduce_scatter\n"
            "  configs: mpiacc,staged,host,nccl; --require-mpiacc: a refused mpiacc call fails the run\n"
            "  --rounds: rows are medians over the rounds (default 3, at most %d); --iters: calls per\n"
            "           measurement up to 64 KiB (default 200), fewer beyond, at least --min-iters (3),\n"
            "           stretched to last --min-time (default 0.02 s)\n"
            "  kinds built: host"
#ifdef COLL_HAVE_CUDA
            ",cuda"
#endif
#ifdef COLL_HAVE_OPENCL
            ",opencl"
#endif
            " (OpenCL platform: $MPIACC_OPENCL_PLATFORM, a substring of its name)\n",
            MAX_ROUNDS);
}

static int parse_sizes(const char *text, Options *o) {
    char buf[1024];
    o->nsizes = 0;
    if (!strcmp(text, "pow2")) {
        for (long s = 8; s <= (256L << 20); s *= 2) o->sizes[o->nsizes++] = s;
        return 1;
    }
    if (strlen(text) >= sizeof buf) return 0;
    strcpy(buf, text);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == MAX_SIZES || !parse_size(tok, 1, MAX_SIZE, &o->sizes[o->nsizes])) return 0;
        o->nsizes++;
    }
    return o->nsizes > 0;
}

/* 1 when every item of the comma-separated `list` is one of the n `names`. */
static int known_items(const char *list, const char *const *names, int n) {
    for (const char *p = list; *p;) {
        const size_t len = strcspn(p, ",");
        int known = 0;
        for (int i = 0; i < n; i++) known |= strlen(names[i]) == len && !strncmp(p, names[i], len);
        if (!known) return 0;
        p += len + (p[len] == ',');
    }
    return 1;
}

static int parse_options(int argc, char **argv, Options *o) {
    *o = (Options){.max_size = MAX_SIZE, .rounds = 3, .iters = 200, .min_iters = 3, .min_time = 0.02};
    parse_sizes(DEFAULT_SIZES, o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok;
        if (!strcmp(a, "--quick")) {
            parse_sizes(QUICK_SIZES, o);
            o->rounds = 1;
            o->min_time = 0.01;
            continue;
        }
        if (!strcmp(a, "--require-mpiacc")) {
            o->require_mpiacc = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            o->help = 1;
            continue;
        }
        if (!v)
            ok = 0;
        else if (!strcmp(a, "--sizes"))
            ok = parse_sizes(v, o);
        else if (!strcmp(a, "--max-size"))
            ok = parse_size(v, 1, MAX_SIZE, &o->max_size);
        else if (!strcmp(a, "--rounds"))
            ok = parse_size(v, 1, MAX_ROUNDS, &o->rounds);
        else if (!strcmp(a, "--iters"))
            ok = parse_size(v, 1, 10000000, &o->iters);
        else if (!strcmp(a, "--min-iters"))
            ok = parse_size(v, 1, 1000000, &o->min_iters);
        else if (!strcmp(a, "--ops"))
            ok = known_items(o->ops = v, op_names, NUM_OPS);
        else if (!strcmp(a, "--kinds"))
            ok = (o->kinds = v) != NULL;
        else if (!strcmp(a, "--configs"))
            ok = known_items(o->configs = v, config_names, NUM_CONFIGS);
        else if (!strcmp(a, "--label"))
            ok = (o->label = v) != NULL;
        else if (!strcmp(a, "--csv"))
            ok = (o->csv = v) != NULL;
        else if (!strcmp(a, "--watchdog")) {
            long sec = 0;
            ok = parse_size(v, 0, 86400, &sec);
            if (ok) g_watchdog = (unsigned)sec;
        } else if (!strcmp(a, "--min-time")) {
            char *end;
            o->min_time = strtod(v, &end);
            ok = end != v && !*end && o->min_time >= 0 && o->min_time < 100;
        } else
            ok = 0;
        if (!ok) {
            if (g_rank == 0) fprintf(stderr, "%s: bad option %s%s%s\n", g_prog, a, v ? " " : "", v ? v : "");
            return 0;
        }
        i++;
    }
    return 1;
}

/* ------------------------------------------------------------------ shapes and data */

static Shape shape_of(int op, long size, int n) {
    Shape s = {0};
    const size_t floats = (size_t)size / sizeof(float) ? (size_t)size / sizeof(float) : 1;
    const size_t block = floats / (size_t)n ? floats / (size_t)n : 1;
    const double part = (double)(n - 1) / n;
    switch (op) {
        case OP_ALLREDUCE: s = (Shape){floats, floats, floats, floats, 2 * part}; break;
        case OP_REDUCE:
        case OP_BCAST: s = (Shape){floats, floats, floats, floats, 1}; break;
        case OP_ALLGATHER: s = (Shape){block, block, block * n, block * n, part}; break;
        case OP_ALLTOALL: s = (Shape){block, block * n, block * n, block * n, part}; break;
        case OP_REDUCE_SCATTER: s = (Shape){block, block * n, block, block * n, part}; break;
    }
    s.bytes *= sizeof(float);
    return s;
}

/* Never 0 (a cleared buffer never matches), different on every rank, a small integer: the
 * sum over any number of ranks below 2^16 is exact in a float, in any order. */
static inline float value(int rank, size_t i, unsigned shift) {
    return (float)(1 + (i * 31u + (size_t)rank * 17u + shift) % 251u);
}

/* This rank's send data (bcast: the root's vector) into host_s, and the result it should
 * receive into expect. */
static void prepare_data(Bench *b, int op, const Shape *sh, unsigned shift) {
    const size_t c = sh->count, n = (size_t)b->nranks, me = (size_t)b->rank;
    const int src = op == OP_BCAST ? COLL_ROOT : b->rank;
    for (size_t i = 0; i < sh->send_elems; i++) b->host_s[i] = value(src, i, shift);
    float *e = b->expect;
    switch (op) {
        case OP_ALLREDUCE:
        case OP_REDUCE:
        case OP_REDUCE_SCATTER: {
            const size_t base = op == OP_REDUCE_SCATTER ? me * c : 0;
            for (size_t i = 0; i < c; i++) {
                float sum = 0;
                for (size_t k = 0; k < n; k++) sum += value((int)k, base + i, shift);
                e[i] = sum;
            }
            break;
        }
        case OP_BCAST: memcpy(e, b->host_s, c * sizeof *e); break;
        case OP_ALLGATHER:
        case OP_ALLTOALL:
            for (size_t k = 0; k < n; k++)
                for (size_t j = 0; j < c; j++)
                    e[k * c + j] = value((int)k, (op == OP_ALLTOALL ? me * c : 0) + j, shift);
            break;
    }
}

/* ------------------------------------------------------------------ the configurations */

/* One collective through MPI-ACC (lib = 1) or straight to MPICH (lib = 0). */
#define COLL_CALLS(P)                                                                                    \
    switch (op) {                                                                                        \
        case OP_ALLREDUCE: return P##MPI_Allreduce(s, r, c, t, MPI_SUM, MPI_COMM_WORLD);                 \
        case OP_REDUCE: return P##MPI_Reduce(s, r, c, t, MPI_SUM, COLL_ROOT, MPI_COMM_WORLD);            \
        case OP_BCAST: return P##MPI_Bcast(r, c, t, COLL_ROOT, MPI_COMM_WORLD);                          \
        case OP_ALLGATHER: return P##MPI_Allgather(s, c, t, r, c, t, MPI_COMM_WORLD);                    \
        case OP_ALLTOALL: return P##MPI_Alltoall(s, c, t, r, c, t, MPI_COMM_WORLD);                      \
        case OP_REDUCE_SCATTER: return P##MPI_Reduce_scatter_block(s, r, c, t, MPI_SUM, MPI_COMM_WORLD); \
        default: return MPI_ERR_OP;                                                                      \
    }
static int mpi_coll(int lib, int op, void *s, void *r, size_t count, MPI_Datatype t) {
    const int c = (int)count;
    if (lib) {
        COLL_CALLS()
    } else {
        COLL_CALLS(P)
    }
}

/* One call of a unit; MPI's return code (only mpiacc's may be other than MPI_SUCCESS). */
static int run_once(Bench *b, const Unit *u, int op, const Shape *sh) {
    Kind *k = u->kind;
    const size_t sb = sh->send_elems * sizeof(float), rb = sh->recv_elems * sizeof(float);
    const int root = b->rank == COLL_ROOT;
    int rc;
    switch (u->cfg) {
        case CFG_HOST: rc = mpi_coll(0, op, b->host_s, b->host_r, sh->count, MPI_FLOAT); break;
        case CFG_MPIACC:
            if (!k->api) return mpi_coll(1, op, b->host_s, b->host_r, sh->count, MPI_FLOAT);
            return mpi_coll(1, op, k->dev_s, k->dev_r, sh->count, k->tfloat);
        case CFG_STAGED:
            if (op != OP_BCAST)
                k->api->to_host(k->pinned_s, k->dev_s, sb);
            else if (root)
                k->api->to_host(k->pinned_r, k->dev_r, rb);
            rc = mpi_coll(0, op, k->pinned_s, k->pinned_r, sh->count, MPI_FLOAT);
            if (rc == MPI_SUCCESS && (op == OP_BCAST ? !root : op != OP_REDUCE || root))
                k->api->from_host(k->dev_r, k->pinned_r, rb);
            break;
        case CFG_NCCL: k->api->nccl_run(op, k->dev_s, k->dev_r, sh->count, b->nranks); return MPI_SUCCESS;
        default: rc = MPI_ERR_OTHER;
    }
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        PMPI_Error_string(rc, msg, &len);
        fail("%s failed (%d): %s", config_names[u->cfg], rc, msg);
    }
    return rc;
}

static int on_device(const Unit *u) { return u->kind->api && u->cfg != CFG_HOST; }

/* The unit's one checked call, the result against `expect`. Collective; the agreed status. */
static Status check_unit(Bench *b, Unit *u, int op, const Shape *sh) {
    Kind *k = u->kind;
    const size_t sb = sh->send_elems * sizeof(float), rb = sh->recv_elems * sizeof(float);
    const int bcast_root = op == OP_BCAST && b->rank == COLL_ROOT;
    phase("verify");
    memset(b->host_r, 0, rb);
    if (bcast_root) memcpy(b->host_r, b->host_s, rb);
    if (on_device(u)) {
        if (op != OP_BCAST) k->api->from_host(k->dev_s, b->host_s, sb);
        k->api->from_host(k->dev_r, b->host_r, rb);
    }
    MPI_CHECK(PMPI_Barrier(MPI_COMM_WORLD));
    const int rc = run_once(b, u, op, sh);
    int cls = MPI_SUCCESS, mine = ST_OK, all = ST_OK;
    char msg[MPI_MAX_ERROR_STRING] = "";
    if (rc != MPI_SUCCESS) {
        int len = 0;
        if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = rc;
        if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
        mine = cls == MPI_ERR_UNSUPPORTED_OPERATION ? ST_REFUSED : ST_ERROR;
    }
    MPI_CHECK(PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (all == ST_REFUSED || all == ST_ERROR) {
        if (mine == ST_OK)
            snprintf(msg, sizeof msg, "(this rank's call succeeded; another rank's %s)",
                     all == ST_REFUSED ? "was refused" : "failed");
        if (!u->told[op] && b->rank == 0) {
            printf("%s: %s %s %s: %s\n", all == ST_REFUSED ? "refused" : "error", u->name, k->name, op_names[op], msg);
            fprintf(b->csv, "# %s: %s %s %s: %s\n", all == ST_REFUSED ? "refused" : "error", u->name, k->name,
                    op_names[op], msg);
        } else if (all == ST_ERROR && mine == ST_ERROR) {
            fprintf(stderr, "%s: rank %d: [%s] %s\n", g_prog, b->rank, g_where, msg);
        }
        u->told[op] = 1;
        return (Status)all;
    }
    long bad = 0, total = 0;
    if (op != OP_REDUCE || b->rank == COLL_ROOT) {
        const float *got = b->host_r;
        if (on_device(u)) {
            k->api->to_host(k->pinned_r, k->dev_r, rb);
            got = k->pinned_r;
        }
        /* Bitwise: every value is a small integer, exact in any order of summation. */
        if (memcmp(got, b->expect, rb) != 0) {
            size_t first = 0;
            for (size_t i = 0; i < sh->recv_elems; i++)
                if (memcmp(&got[i], &b->expect[i], sizeof *got) != 0 && bad++ == 0) first = i;
            fprintf(stderr,
                    "%s: rank %d: VERIFY FAILED [%s]: %ld of %zu floats differ (first at %zu: got %g, want %g)\n",
                    g_prog, b->rank, g_where, bad, sh->recv_elems, first, got[first], b->expect[first]);
        }
    }
    MPI_CHECK(PMPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    b->mismatches += total;
    return total ? ST_MISMATCH : ST_OK;
}

/* A timed call: an mpiacc call that passed its check and then fails ends the run. */
static void must_run(Bench *b, const Unit *u, int op, const Shape *sh) {
    const int rc = run_once(b, u, op, sh);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        PMPI_Error_string(rc, msg, &len);
        fail("%s failed after its check passed (%d): %s", u->name, rc, msg);
    }
}

/* Seconds per call: the slowest rank's mean over iterations stretched to --min-time. */
static double timed(Bench *b, const Unit *u, int op, const Shape *sh) {
    phase("timing");
    long iters = (long)sh->bytes <= ITER_REF_BYTES
                     ? b->o.iters
                     : (long)((double)b->o.iters * (double)ITER_REF_BYTES / (double)sh->bytes);
    if (iters < b->o.min_iters) iters = b->o.min_iters;
    long warm = iters / 10 < 1 ? 1 : iters / 10 > 10 ? 10 : iters / 10;
    MPI_CHECK(PMPI_Barrier(MPI_COMM_WORLD));
    double t0 = PMPI_Wtime();
    for (long i = 0; i < warm; i++) must_run(b, u, op, sh);
    const double per = (PMPI_Wtime() - t0) / (double)warm;
    if (per > 0 && per * (double)iters < b->o.min_time) {
        const double want = b->o.min_time / per + 1, cap = 10.0 * (double)b->o.iters;
        if (want > (double)iters) iters = want > cap ? (long)cap : (long)want;
        if (iters < b->o.min_iters) iters = b->o.min_iters;
    }
    MPI_CHECK(PMPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    MPI_CHECK(PMPI_Barrier(MPI_COMM_WORLD));
    t0 = PMPI_Wtime();
    for (long i = 0; i < iters; i++) must_run(b, u, op, sh);
    double t = (PMPI_Wtime() - t0) / (double)iters, slowest = 0;
    MPI_CHECK(PMPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return slowest;
}

/* ------------------------------------------------------------------ the run */

/* The rows of one collective and size, once its rounds are measured (rank 0). */
static void write_rows(Bench *b, int op, const Shape *sh, double secs[][MAX_ROUNDS], const Status *st) {
    const int first = b->nresults;
    for (int k = 0; k < b->nunits && b->nresults < MAX_RESULTS; k++) {
        if (!b->units[k].usable) continue;
        const int measured = st[k] == ST_OK || st[k] == ST_MISMATCH;
        b->results[b->nresults++] =
            (Result){op, &b->units[k], sh->bytes, measured ? bench_median(secs[k], (int)b->o.rounds) : -1};
    }
    for (int i = first; i < b->nresults; i++) {
        const Result *r = &b->results[i];
        const Unit *u = r->unit;
        const Status s = st[u - b->units];
        char x[32] = "", us[32] = "", alg[32] = "", bus[32] = "";
        if (r->sec > 0) {
            const double a = (double)sh->bytes / r->sec / 1e9;
            snprintf(us, sizeof us, "%.3f", r->sec * 1e6);
            snprintf(alg, sizeof alg, "%.6g", a);
            snprintf(bus, sizeof bus, "%.6g", a * sh->busbw);
            const Result *staged = find_result(b, op, u->kind, CFG_STAGED, sh->bytes);
            if (u->cfg == CFG_MPIACC && staged && staged->sec > 0) snprintf(x, sizeof x, "%.3f", staged->sec / r->sec);
        }
        fprintf(b->csv, "%s,%s,%s,%d,%zu,%s,%s,%s,%s,%s\n", op_names[op], u->kind->name, u->name, b->nranks, sh->bytes,
                us, alg, bus, x, status_names[s]);
        printf("%-15s %-7s %-14s %5d %11zu %12s %11s %11s %8s  %s\n", op_names[op], u->kind->name, u->name, b->nranks,
               sh->bytes, *us ? us : "-", *alg ? alg : "-", *bus ? bus : "-", *x ? x : "-", status_names[s]);
    }
    fflush(b->csv);
    fflush(stdout);
}

static void run_all(Bench *b) {
    static double secs[MAX_UNITS][MAX_ROUNDS];
    Status st[MAX_UNITS] = {ST_OK};
    long checks = 0;
    for (int si = 0; si < b->o.nsizes; si++) {
        if (b->o.sizes[si] > b->o.max_size) continue;
        for (int op = 0; op < NUM_OPS; op++) {
            if (!in_list(b->o.ops, op_names[op])) continue;
            const Shape sh = shape_of(op, b->o.sizes[si], b->nranks);
            /* Sizes below 4 x ranks bytes grow to it: one row for all of them. */
            if (si > 0 && shape_of(op, b->o.sizes[si - 1], b->nranks).bytes == sh.bytes) continue;
            snprintf(g_where, sizeof g_where, "%s %zu B: host reference", op_names[op], sh.bytes);
            phase("verify");
            prepare_data(b, op, &sh, (unsigned)(++checks * 40503u % 251u));
            for (long r = 0; r < b->o.rounds; r++)
                for (int j = 0; j < b->nunits; j++) {
                    const int k = (int)((j + r) % b->nunits);
                    Unit *u = &b->units[k];
                    if (!u->usable) continue;
                    snprintf(g_where, sizeof g_where, "%s %s %s %zu B", op_names[op], u->kind->name, u->name, sh.bytes);
                    if (r == 0) st[k] = check_unit(b, u, op, &sh);
                    if (st[k] == ST_REFUSED || st[k] == ST_ERROR) continue;
                    secs[k][r] = timed(b, u, op, &sh);
                }
            for (int k = 0; k < b->nunits; k++) {
                if (!b->units[k].usable) continue;
                if (st[k] == ST_MISMATCH) b->failed_checks++;
                if (st[k] == ST_ERROR) b->failed_checks++;
                if (st[k] == ST_REFUSED) b->refused_rows++;
            }
            if (b->rank == 0) write_rows(b, op, &sh, secs, st);
        }
    }
    alarm(0);
}

/* ------------------------------------------------------------------ setup */

/* Opens the kinds asked for (every kind built when --kinds is not given: those that cannot
 * open are then skipped, named). Collective. Returns 0 when an asked-for kind cannot open. */
static int open_kinds(Bench *b, int local_rank) {
    static const DeviceKind *const built[] = {
#ifdef COLL_HAVE_CUDA
        &cuda_kind,
#endif
#ifdef COLL_HAVE_OPENCL
        &opencl_kind,
#endif
        NULL};
    if (in_list(b->o.kinds, "host")) b->kinds[b->nkinds++] = (Kind){.name = "host", .opened = 1};
    for (int i = 0; built[i]; i++) {
        if (!in_list(b->o.kinds, built[i]->name)) continue;
        Kind *k = &b->kinds[b->nkinds];
        char id[128] = "";
        *k = (Kind){.api = built[i], .name = built[i]->name};
        int ok = k->api->open(local_rank, k->desc, sizeof k->desc, id, sizeof id, k->why, sizeof k->why), all = 0;
        MPI_CHECK(PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
        if (!all) {
            if (ok) snprintf(k->why, sizeof k->why, "not usable on another rank");
            if (b->o.kinds) {
                fprintf(stderr, "%s: rank %d: %s: %s\n", g_prog, b->rank, k->name, k->why);
                return 0;
            }
            char line[sizeof b->skipped[0]];
            snprintf(line, sizeof line, "# skipped kind %s: %s", k->name, k->why);
            if (b->nskipped < MAX_KINDS) memcpy(b->skipped[b->nskipped++], line, sizeof line);
            continue;
        }
        char *ids = calloc((size_t)b->nranks, sizeof id);
        if (!ids) fail("out of memory");
        MPI_CHECK(PMPI_Allgather(id, sizeof id, MPI_CHAR, ids, sizeof id, MPI_CHAR, MPI_COMM_WORLD));
        for (int x = 0; x < b->nranks; x++)
            for (int y = x + 1; y < b->nranks; y++)
                if (!strcmp(ids + (size_t)x * sizeof id, ids + (size_t)y * sizeof id)) k->shared_device = 1;
        free(ids);
        k->opened = 1;
        b->nkinds++;
    }
    for (const char *p = b->o.kinds; p && *p;) { /* a kind asked for that is not built */
        const size_t len = strcspn(p, ",");
        int known = 0;
        for (int i = 0; i < b->nkinds; i++)
            known |= strlen(b->kinds[i].name) == len && !strncmp(p, b->kinds[i].name, len);
        if (!known) {
            if (b->rank == 0) fprintf(stderr, "%s: kind %.*s is not built here (see --help)\n", g_prog, (int)len, p);
            return 0;
        }
        p += len + (p[len] == ',');
    }
    return 1;
}

/* The units: every configuration of every kind that it applies to, as --configs selects;
 * each set up here (NCCL's communicator) and usable or skipped with a reason. */
static void make_units(Bench *b) {
    for (int i = 0; i < b->nkinds; i++) {
        Kind *k = &b->kinds[i];
        for (int c = 0; c < NUM_CONFIGS; c++) {
            if (!in_list(b->o.configs, config_names[c]) || b->nunits == MAX_UNITS) continue;
            if (!k->api && c != CFG_MPIACC && c != CFG_HOST) continue;
            if (c == CFG_NCCL && !k->api->nccl_open) continue;
            Unit *u = &b->units[b->nunits++];
            *u = (Unit){.kind = k, .cfg = (ConfigId)c, .usable = 1};
            if (c == CFG_MPIACC && b->o.label && *b->o.label)
                snprintf(u->name, sizeof u->name, "mpiacc-%s", b->o.label);
            else
                snprintf(u->name, sizeof u->name, "%s", config_names[c]);
            if (c != CFG_NCCL) continue;
            char why[256] = "";
            snprintf(g_where, sizeof g_where, "nccl setup");
            phase("setup");
            u->usable = k->api->nccl_open(k->shared_device, why, sizeof why);
            if (!u->usable && b->rank == 0) {
                printf("# skipped nccl %s: %s\n", k->name, why);
                fprintf(b->csv, "# skipped nccl %s: %s\n", k->name, why);
            }
        }
    }
}

static size_t largest_bytes(const Bench *b) {
    size_t max = 0;
    for (int si = 0; si < b->o.nsizes; si++)
        for (int op = 0; op < NUM_OPS && b->o.sizes[si] <= b->o.max_size; op++) {
            const Shape sh = shape_of(op, b->o.sizes[si], b->nranks);
            /* Sizes below 4 x ranks bytes grow to it: one row for all of them. */
            if (si > 0 && shape_of(op, b->o.sizes[si - 1], b->nranks).bytes == sh.bytes) continue;
            if (sh.bytes > max) max = sh.bytes;
        }
    return max;
}

static void csv_header(Bench *b, int argc, char **argv) {
    char path[4096], lib[MPI_MAX_LIBRARY_VERSION_STRING];
    b->csv = open_results_csv(b->o.csv, g_prog, path, sizeof path);
    if (!b->csv) fail("cannot write %s: %s", path, strerror(errno));
    begin_results_csv(b->csv, g_prog, argc, argv, lib);
    fprintf(b->csv, "# mpi=\"%s\" ranks=%d rounds=%ld iters=%ld min_iters=%ld min_time=%g type=float op=sum root=%d\n",
            lib, b->nranks, b->o.rounds, b->o.iters, b->o.min_iters, b->o.min_time, COLL_ROOT);
    printf(
        "# csv: %s\n# coll: %d ranks; times per call (the slowest rank), rows the median of %ld round(s);"
        " GB/s = 1e9 B/s\n",
        path, b->nranks, b->o.rounds);
    for (int i = 0; i < b->nskipped; i++) {
        printf("%s\n", b->skipped[i]);
        fprintf(b->csv, "%s\n", b->skipped[i]);
    }
    for (int i = 0; i < b->nkinds; i++) {
        const Kind *k = &b->kinds[i];
        if (!k->api) continue;
        fprintf(b->csv, "# kind %s: rank 0 device \"%s\"%s\n", k->name, k->desc,
                k->shared_device ? " (ranks share a device)" : "");
        printf("# kind %s: rank 0 device \"%s\"%s\n", k->name, k->desc,
               k->shared_device ? " (ranks share a device)" : "");
    }
    fprintf(b->csv, "op,kind,config,ranks,size,us,algbw_GBs,busbw_GBs,x_staged,status\n");
    fflush(b->csv);
}

static Bench g_bench;

int main(int argc, char **argv) {
    Bench *b = &g_bench;
    g_prog = "coll";
    const int local_rank = local_rank_from_env();
#ifdef COLL_HAVE_CUDA
    const char *kinds_arg = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--kinds")) kinds_arg = argv[i + 1];
    if (in_list(kinds_arg, "cuda")) cuda_pick_device_early(local_rank);
#endif
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &b->nranks);
    g_rank = b->rank;
    /* Refusals come back as codes: a refused configuration is a row, not the end of the run. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int parsed = parse_options(argc, argv, &b->o);
    if (!parsed || b->o.help) {
        if (b->rank == 0) usage(parsed ? stdout : stderr);
        MPI_Finalize();
        return parsed ? 0 : 2;
    }
    /* MPI-ACC reads MPIACC_IPC when it initialises: its IPC-off rows are another process's. */
    if (!b->o.label) b->o.label = env_is_off("MPIACC_IPC") ? "noipc" : "";
    b->max_bytes = largest_bytes(b);
    if (b->max_bytes == 0) {
        if (b->rank == 0) fprintf(stderr, "%s: no size up to --max-size\n", g_prog);
        MPI_Finalize();
        return 2;
    }
    if (!open_kinds(b, local_rank)) {
        MPI_Finalize();
        return 1;
    }
    b->host_s = malloc(b->max_bytes);
    b->host_r = malloc(b->max_bytes);
    b->expect = malloc(b->max_bytes);
    if (!b->host_s || !b->host_r || !b->expect) fail("cannot allocate 3 host buffers of %zu bytes", b->max_bytes);
    memset(b->host_s, 0, b->max_bytes); /* fault the pages in before timing */
    memset(b->host_r, 0, b->max_bytes);
    for (int i = 0; i < b->nkinds; i++) {
        Kind *k = &b->kinds[i];
        if (!k->api) continue;
        k->dev_s = k->api->alloc(b->max_bytes);
        k->dev_r = k->api->alloc(b->max_bytes);
        k->pinned_s = k->api->alloc_pinned(b->max_bytes);
        k->pinned_r = k->api->alloc_pinned(b->max_bytes);
        k->tfloat = k->api->tagged_float();
    }
    if (b->rank == 0) csv_header(b, argc, argv);
    signal(SIGALRM, on_alarm);
    make_units(b);
    if (b->rank == 0)
        printf("%-15s %-7s %-14s %5s %11s %12s %11s %11s %8s  %s\n", "op", "kind", "config", "ranks", "size", "us",
               "algbw", "busbw", "x_staged", "verify");
    run_all(b);
    phase("teardown");
    for (int i = 0; i < b->nunits; i++)
        if (b->units[i].usable && b->units[i].cfg == CFG_NCCL) b->units[i].kind->api->nccl_close();
    alarm(0);
    if (b->rank == 0) print_summary(b);
    for (int i = 0; i < b->nkinds; i++)
        if (b->kinds[i].api) MPI_Type_free(&b->kinds[i].tfloat);
    (void)check_statuses; /* bench_common.h's, for programs that wait on requests */
    const int failed = b->failed_checks > 0 || (b->o.require_mpiacc && b->refused_rows > 0);
    MPI_Finalize();
    /* After MPI_Finalize: MPI-ACC may hold a queue, stream or mapping of these until then. */
    for (int i = 0; i < b->nkinds; i++) {
        Kind *k = &b->kinds[i];
        if (!k->api) continue;
        k->api->release(k->dev_s);
        k->api->release(k->dev_r);
        k->api->release_pinned(k->pinned_s);
        k->api->release_pinned(k->pinned_r);
        k->api->close();
    }
    return failed ? 1 : 0;
}
