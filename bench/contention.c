/* How MPI-ACC shares a GPU with local work, in SHOC contention-mt's shape: 2 ranks on one
 * node, each with two threads on the same GPU(s) (rank % the devices it sees; on a machine
 * with one GPU both ranks share it).
 *
 *   task 0 (the main thread, the only one that calls MPI: MPI_THREAD_FUNNELED): --iters
 *          round trips of a --size device buffer between the ranks, as mpiacc, mpiacc-stream,
 *          staged or pipeline (contention_pingpong.c says what each is)
 *   task 1 (a second thread, no MPI): --local-iters iterations of local GPU work, as
 *          compute, global, shared, d2h, h2d or compute-legacy (contention_kernels.h); on
 *          both ranks, or on rank 0 alone with --local-ranks 1
 *
 * Each round measures every task 1 alone, every task 0 alone, then every pairing together,
 * both started at once after a barrier. A task that finishes its timed iterations first
 * goes on with untimed ones until the other has finished too (task 0 ranks agree on that
 * through an Allreduce of a flag per extra round trip), so that every timed iteration ran
 * beside the other task. Task 1's iteration is sized by calibration to last about as long
 * as task 0's loop of the first selected configuration, alone (--units sets it instead).
 * The slowdown of a task in a pairing is its time together over its time alone, less 1,
 * per round; a row's is the median over the rounds, as its times are.
 *
 * MPI-ACC reads MPIACC_IPC when it initialises, so its pipeline is a second run:
 *   MPIACC_IPC=0 mpiexec -n 2 bench/contention ...  (MPI-ACC's rows then read mpiacc-noipc
 *   and mpiacc-stream-noipc; --label sets the suffix). The hand variants run in both.
 *
 * The bytes of every round trip's message are checked after every measurement on both ranks
 * (cleared receive buffers, a pattern new to each measurement), and the triad's result
 * after each run of the global kernel; a mismatch is printed, marks its row, and makes the
 * exit code 1. The verdict lines (PASS/MISS, also "# summary:" lines in the CSV) hold
 * MPI-ACC to its goals: task 0 slows at most 4% beside the global-memory kernel and 3%
 * beside the compute and shared-memory kernels; it slows the D2H and H2D copy loops no more
 * than either hand variant does (give or take a point of noise). Task 1 beside the legacy
 * default stream has no goal: its line shows what a stream attribute (mpiacc-stream)
 * changes. No CUDA device: a message and exit code 77 (automake's "skipped").
 *
 *   mpiexec -n 2 bench/contention [--size BYTES] [--iters N] [--local-iters N] [--rounds N]
 *       [--configs LIST] [--locals LIST] [--local-ranks 1|2] [--chunk BYTES]
 *       [--array-bytes BYTES] [--copy-bytes BYTES] [--units N] [--label SUFFIX]
 *       [--csv FILE|DIR/] [--watchdog SEC]
 * CSV columns: contention_report.c.
 */
#include <cuda_runtime_api.h>
#include <mpiacc.h>
#include <signal.h>
#include <time.h>

#define BENCH_PARTS_FAIL_DEFINE
#include "bench_common.h"
#include "contention_parts.h"
#include "results_csv.h"

static void usage(void) {
    fprintf(stderr,
            "usage: mpiexec -n 2 contention [--size BYTES] [--iters N] [--local-iters N] [--rounds N]\n"
            "         [--configs LIST] [--locals LIST] [--local-ranks 1|2] [--chunk BYTES]\n"
            "         [--array-bytes BYTES] [--copy-bytes BYTES] [--units N] [--label SUFFIX]\n"
            "         [--csv FILE|DIR/] [--watchdog SEC]\n"
            "  --size: task 0's message (default 4M); --iters: its round trips (default 100)\n"
            "  --local-iters: task 1's iterations (default 100); --rounds: rows are medians (default 3, at most %d)\n"
            "  configs (task 0): mpiacc,mpiacc-stream,staged,pipeline\n"
            "  locals (task 1): compute,global,shared,d2h,h2d,compute-legacy\n"
            "  --local-ranks: task 1 on both ranks (2, default) or on rank 0 alone (1)\n"
            "  --chunk: the hand pipeline's chunk (default 256K); --array-bytes: each triad array\n"
            "           (default 64M); --copy-bytes: one copy of d2h and h2d (default --size)\n"
            "  --units: units of task 1 work per iteration, for every kind (default: calibrated)\n",
            MAX_ROUNDS);
}

static int select_names(const char *list, const char *const *names, int n, int *selected) {
    int any = 0;
    for (int i = 0; i < n; i++) any |= selected[i] = in_list(list, names[i]);
    /* Every item of the list must be a name. */
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        int known = 0;
        for (int i = 0; i < n; i++) known |= strlen(names[i]) == len && !strncmp(p, names[i], len);
        if (!known) return 0;
        p = e ? e + 1 : p + len;
    }
    return any;
}

static int parse_options(int argc, char **argv, Bench *b) {
    Options *o = &b->o;
    *o = (Options){.size = 4L << 20,
                   .chunk = 256L << 10,
                   .iters = 100,
                   .local_iters = 100,
                   .rounds = 3,
                   .array_bytes = 64L << 20,
                   .copy_bytes = 0,
                   .units = 0,
                   .local_ranks = 2};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n = 0;
        int ok;
        if (!v) {
            if (g_rank == 0) fprintf(stderr, "%s: option %s needs a value\n", g_prog, a);
            return 0;
        }
        if (!strcmp(a, "--size"))
            ok = parse_size(v, 1, 1L << 30, &o->size);
        else if (!strcmp(a, "--iters"))
            ok = parse_size(v, 1, 1000000, &o->iters);
        else if (!strcmp(a, "--local-iters"))
            ok = parse_size(v, 1, 1000000, &o->local_iters);
        else if (!strcmp(a, "--rounds"))
            ok = parse_size(v, 1, MAX_ROUNDS, &o->rounds);
        else if (!strcmp(a, "--chunk"))
            ok = parse_size(v, 1, 1L << 30, &o->chunk);
        else if (!strcmp(a, "--array-bytes"))
            ok = parse_size(v, 8, 4L << 30, &o->array_bytes);
        else if (!strcmp(a, "--copy-bytes"))
            ok = parse_size(v, 1, 4L << 30, &o->copy_bytes);
        else if (!strcmp(a, "--units"))
            ok = parse_size(v, 1, 1000000, &o->units);
        else if (!strcmp(a, "--local-ranks"))
            ok = parse_size(v, 1, 2, &n), o->local_ranks = (int)n;
        else if (!strcmp(a, "--configs"))
            ok = select_names(o->configs = v, task0_names, TASK0_CONFIGS, b->task0_selected);
        else if (!strcmp(a, "--locals"))
            ok = select_names(o->locals = v, local_kind_names, LOCAL_KINDS, b->local_selected);
        else if (!strcmp(a, "--label"))
            ok = (o->label = v) != NULL;
        else if (!strcmp(a, "--csv"))
            ok = (o->csv = v) != NULL;
        else if (!strcmp(a, "--watchdog"))
            ok = parse_size(v, 0, 86400, &n), g_watchdog = (unsigned)n;
        else
            ok = 0;
        if (!ok) {
            if (g_rank == 0) fprintf(stderr, "%s: bad option %s %s\n", g_prog, a, v);
            return 0;
        }
        i++;
    }
    if (!o->configs) select_names(NULL, task0_names, TASK0_CONFIGS, b->task0_selected);
    if (!o->locals) select_names(NULL, local_kind_names, LOCAL_KINDS, b->local_selected);
    if (o->chunk > o->size) o->chunk = o->size;
    if (!o->copy_bytes) o->copy_bytes = o->size;
    return 1;
}

/* ------------------------------------------------------------------ shared by the parts */

double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ------------------------------------------------------------------ task 1's thread */

static void *worker_main(void *arg) {
    Bench *b = arg;
    CHECK_CUDA(cudaSetDevice(b->device)); /* the current device is per thread */
    for (;;) {
        pthread_barrier_wait(&b->start);
        if (b->job.quit) break;
        if (b->job.run_local) {
            const LocalKind k = b->job.kind;
            const double t = now_seconds();
            for (long i = 0; i < b->o.local_iters; i++) CHECK_CUDA(local_work_iteration(&b->work, k, b->units[k]));
            b->job.seconds = now_seconds() - t;
            atomic_store(&b->task1_done, 1);
            while (!atomic_load(&b->task0_done)) CHECK_CUDA(local_work_iteration(&b->work, k, b->units[k]));
        }
        pthread_barrier_wait(&b->end);
    }
    return NULL;
}

/* ------------------------------------------------------------------ one measurement */

/* Each measurement's message differs from the one before, so stale bytes read as wrong. */
static void load_message(Bench *b) {
    const size_t n = (size_t)b->o.size;
    b->stamp++;
    for (size_t i = 0; i < n; i++) b->pattern[i] = (unsigned char)((i * 131u + i / 4099u + b->stamp * 29u + 7u) & 0xff);
    if (b->rank == 0) CHECK_CUDA(cudaMemcpy(b->dev_send, b->pattern, n, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(b->dev_recv, 0, n));
    CHECK_CUDA(cudaDeviceSynchronize());
}

/* The message's bytes in this rank's receive buffer; mismatches counted, summed over ranks. */
static long check_message(Bench *b, const char *what) {
    const size_t n = (size_t)b->o.size;
    long bad = 0, all = 0;
    size_t first = 0;
    CHECK_CUDA(cudaDeviceSynchronize()); /* a receive ordered on task 0's stream has landed */
    CHECK_CUDA(cudaMemcpy(b->check, b->dev_recv, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (b->check[i] != b->pattern[i] && bad++ == 0) first = i;
    if (bad)
        fprintf(stderr, "%s: rank %d: VERIFY FAILED [%s]: %ld of %zu bytes differ (first at %zu: got %u, want %u)\n",
                g_prog, b->rank, what, bad, n, first, b->check[first], b->pattern[first]);
    CHECK_MPI(PMPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    b->mismatches += all;
    return all;
}

/* Task 0 as `config` (or none, < 0) beside task 1 as `kind` (or none, < 0). t0: seconds per
 * round trip, the slower rank's; t1: seconds per iteration, the slowest rank's that ran it.
 * Returns the mismatched bytes of the message (summed over ranks). */
static long measure(Bench *b, int config, int kind, double *t0, double *t1) {
    char where[160];
    snprintf(where, sizeof where, "%s beside %s", config >= 0 ? task0_names[config] : "nothing",
             kind >= 0 ? local_kind_names[kind] : "nothing");
    snprintf(g_where, sizeof g_where, "%s", where);
    phase("measure");
    if (config >= 0) load_message(b);
    b->job.kind = kind >= 0 ? (LocalKind)kind : LOCAL_COMPUTE;
    b->job.run_local = kind >= 0 && (b->rank == 0 || b->o.local_ranks == 2);
    b->job.seconds = 0;
    atomic_store(&b->task0_done, config < 0);
    atomic_store(&b->task1_done, !b->job.run_local);
    CHECK_MPI(PMPI_Barrier(MPI_COMM_WORLD));
    pthread_barrier_wait(&b->start);
    double mine0 = 0, mine1;
    if (config >= 0) {
        const double t = now_seconds();
        for (long i = 0; i < b->o.iters; i++) task0_round_trip(b, (Task0Kind)config);
        mine0 = (now_seconds() - t) / (double)b->o.iters;
        /* Round trips go on, untimed, until task 1 has finished on every rank; so does
         * task 1 where it has, so that a slower rank's task 1 keeps its company too. */
        for (;;) {
            int done = atomic_load(&b->task1_done), all = 0;
            CHECK_MPI(PMPI_Allreduce(&done, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
            if (all) break;
            task0_round_trip(b, (Task0Kind)config);
        }
        atomic_store(&b->task0_done, 1);
    }
    pthread_barrier_wait(&b->end);
    mine1 = b->job.run_local ? b->job.seconds / (double)b->o.local_iters : 0;
    CHECK_MPI(PMPI_Allreduce(&mine0, t0, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    CHECK_MPI(PMPI_Allreduce(&mine1, t1, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    long bad = config >= 0 ? check_message(b, where) : 0;
    if (kind == LOCAL_GLOBAL) {
        long wrong = b->job.run_local ? local_work_check_triad(&b->work) : 0, all_wrong = 0;
        if (wrong < 0) fail("reading the triad's result back failed");
        if (wrong)
            fprintf(stderr, "%s: rank %d: VERIFY FAILED [%s]: %ld triad elements wrong\n", g_prog, b->rank, where,
                    wrong);
        CHECK_MPI(PMPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        b->failed_checks += all_wrong != 0;
    }
    return bad;
}

/* ------------------------------------------------------------------ sizing task 1 */

/* Units per iteration so that task 1's loop lasts about as long as task 0's loop of the
 * first selected configuration: each kind's unit timed on the ranks that run task 1, at
 * once, as in its measurements; rank 0's times decide. */
static void calibrate(Bench *b) {
    int reference = -1;
    for (int c = 0; c < TASK0_CONFIGS && reference < 0; c++)
        if (b->task0_selected[c]) reference = c;
    double t0 = 0, t1;
    for (int warm = 0; warm < 2; warm++) measure(b, reference, -1, &t0, &t1);
    const double target = t0 * (double)b->o.iters / (double)b->o.local_iters;
    const int runs = b->rank == 0 || b->o.local_ranks == 2;
    snprintf(g_where, sizeof g_where, "calibration");
    for (int k = 0; k < LOCAL_KINDS; k++) {
        if (!b->local_selected[k]) continue;
        double unit = 0;
        CHECK_MPI(PMPI_Barrier(MPI_COMM_WORLD));
        if (runs) {
            CHECK_CUDA(local_work_iteration(&b->work, (LocalKind)k, 2)); /* warm */
            const double t = now_seconds();
            CHECK_CUDA(local_work_iteration(&b->work, (LocalKind)k, 4));
            unit = (now_seconds() - t) / 4;
        }
        CHECK_MPI(PMPI_Bcast(&unit, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
        long units = unit > 0 ? (long)(target / unit + 0.5) : 1;
        b->units[k] = b->o.units ? b->o.units : units < 1 ? 1 : units > 100000 ? 100000 : units;
        if (b->rank == 0)
            printf("# calibration: %-14s unit %9.1f us, %6ld units an iteration (task 0 alone: %.1f us a round trip)\n",
                   local_kind_names[k], unit * 1e6, b->units[k], t0 * 1e6);
    }
}

/* ------------------------------------------------------------------ the rounds */

static void run_rounds(Bench *b) {
    int order[TASK0_CONFIGS] = {0}, n = 0;
    for (int c = 0; c < TASK0_CONFIGS; c++)
        if (b->task0_selected[c]) order[n++] = c;
    const double t = now_seconds();
    for (long r = 0; r < b->o.rounds; r++) {
        double unused;
        for (int k = 0; k < LOCAL_KINDS; k++)
            if (b->local_selected[k]) measure(b, -1, k, &unused, &b->t1_alone[k][r]);
        /* The configurations' order rotates, so that a drift of the machine spreads over them. */
        for (int i = 0; i < n; i++) {
            const int c = order[(i + r) % n];
            measure(b, c, -1, &b->t0_alone[c][r], &unused);
            for (int k = 0; k < LOCAL_KINDS; k++) {
                if (!b->local_selected[k]) continue;
                b->pair_mismatches[c][k] += measure(b, c, k, &b->t0_with[c][k][r], &b->t1_with[c][k][r]);
            }
        }
        if (b->rank == 0) {
            printf("# round %ld of %ld measured (%.1f s so far)\n", r + 1, b->o.rounds, now_seconds() - t);
            fflush(stdout);
        }
    }
}

/* ------------------------------------------------------------------ main */

static void describe(Bench *b, char *out, size_t len) {
    struct cudaDeviceProp prop;
    char bus[32] = "?", mine[320], theirs[320];
    CHECK_CUDA(cudaGetDeviceProperties(&prop, b->device));
    CHECK_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, b->device));
    snprintf(mine, sizeof mine, "%s (%s)", prop.name, bus);
    CHECK_MPI(PMPI_Sendrecv(mine, sizeof mine, MPI_CHAR, b->peer, TAG_INFO, theirs, sizeof theirs, MPI_CHAR, b->peer,
                            TAG_INFO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    const char *mps = getenv("CUDA_MPS_PIPE_DIRECTORY");
    snprintf(out, len, "rank0_device=\"%s\" rank1_device=\"%s\" one_gpu=%s mps_pipe=%s", b->rank == 0 ? mine : theirs,
             b->rank == 0 ? theirs : mine, strcmp(mine, theirs) ? "no" : "yes", mps && *mps ? mps : "(unset)");
}

int main(int argc, char **argv) {
    static Bench bb;
    Bench *b = &bb;
    g_prog = "contention";
    /* The device is picked before MPI_Init, so that MPI-ACC's CUDA context lands on it. */
    cudaError_t count_err = cudaGetDeviceCount(&b->ndev);
    if (count_err == cudaSuccess && b->ndev > 0) cudaSetDevice(local_rank_from_env() % b->ndev);

    int provided = MPI_THREAD_SINGLE, nranks = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    PMPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &nranks);
    g_rank = b->rank;
    b->peer = 1 - b->rank;
    if (!parse_options(argc, argv, b) || nranks != 2) {
        if (b->rank == 0) {
            if (nranks != 2) fprintf(stderr, "%s: needs exactly 2 ranks, got %d\n", g_prog, nranks);
            usage();
        }
        MPI_Finalize();
        return 2;
    }
    int usable = count_err == cudaSuccess && b->ndev > 0 && MPIX_Query_cuda_support(), all = 0;
    PMPI_Allreduce(&usable, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (!usable)
            fprintf(stderr, "%s: rank %d: no CUDA device (cudaGetDeviceCount: %s, %d devices; CUDA in MPI-ACC: %s)\n",
                    g_prog, b->rank, cudaGetErrorString(count_err), count_err == cudaSuccess ? b->ndev : 0,
                    MPIX_Query_cuda_support() ? "yes" : "no");
        MPI_Finalize();
        return 77; /* automake's "skipped" */
    }
    if (provided < MPI_THREAD_FUNNELED) {
        if (b->rank == 0) fprintf(stderr, "%s: MPI_THREAD_FUNNELED not provided (got %d)\n", g_prog, provided);
        MPI_Finalize();
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    b->label = b->o.label ? b->o.label : env_is_off("MPIACC_IPC") ? "noipc" : "";
    b->device = local_rank_from_env() % b->ndev;
    CHECK_CUDA(cudaSetDevice(b->device));
    signal(SIGALRM, on_alarm);
    phase("setup");

    b->pattern = malloc((size_t)b->o.size);
    b->check = malloc((size_t)b->o.size);
    if (!b->pattern || !b->check) fail("out of host memory for %ld-byte messages", b->o.size);
    task0_setup(b);
    CHECK_CUDA(local_work_create(&b->work, (size_t)b->o.array_bytes, (size_t)b->o.copy_bytes));
    if (pthread_barrier_init(&b->start, NULL, 2) || pthread_barrier_init(&b->end, NULL, 2))
        fail("pthread_barrier_init failed");
    if (pthread_create(&b->worker, NULL, worker_main, b)) fail("pthread_create failed");

    char devinfo[1024];
    describe(b, devinfo, sizeof devinfo);
    if (b->rank == 0) {
        char path[4096], lib[MPI_MAX_LIBRARY_VERSION_STRING];
        const char *ipc = getenv("MPIACC_IPC");
        b->csv = open_results_csv(b->o.csv, g_prog, path, sizeof path);
        if (!b->csv) fail("cannot write %s: %s", path, strerror(errno));
        begin_results_csv(b->csv, g_prog, argc, argv, lib);
        fprintf(b->csv,
                "# mpi=\"%s\" %s MPIACC_IPC=%.64s size=%ld iters=%ld local_iters=%ld rounds=%ld local_ranks=%d "
                "chunk=%ld array_bytes=%ld copy_bytes=%ld\n",
                lib, devinfo, ipc ? ipc : "(unset)", b->o.size, b->o.iters, b->o.local_iters, b->o.rounds,
                b->o.local_ranks, b->o.chunk, b->o.array_bytes, b->o.copy_bytes);
        printf("# csv: %s\n# contention: 2 ranks x 2 threads, %s, MPIACC_IPC=%s\n", path, devinfo,
               ipc ? ipc : "(unset)");
        printf("# task 0: %ld round trips of %ld bytes; task 1: %ld iterations on %s\n", b->o.iters, b->o.size,
               b->o.local_iters, b->o.local_ranks == 2 ? "both ranks" : "rank 0");
        fflush(stdout);
    }

    /* Every configuration's bytes once before anything is timed (and its first use). */
    for (int c = 0; c < TASK0_CONFIGS; c++) {
        if (!b->task0_selected[c]) continue;
        snprintf(g_where, sizeof g_where, "verify %s", task0_names[c]);
        phase("verify");
        load_message(b);
        task0_round_trip(b, (Task0Kind)c);
        if (check_message(b, g_where)) b->failed_checks++;
    }
    calibrate(b);
    run_rounds(b);
    alarm(0);

    b->job.quit = 1;
    pthread_barrier_wait(&b->start);
    pthread_join(b->worker, NULL);
    pthread_barrier_destroy(&b->start);
    pthread_barrier_destroy(&b->end);
    if (b->rank == 0) {
        report(b);
        if (fclose(b->csv) != 0) fail("cannot write the CSV: %s", strerror(errno));
    }
    CHECK_CUDA(local_work_destroy(&b->work));
    task0_teardown(b);
    free(b->pattern);
    free(b->check);
    MPI_Finalize();
    return b->mismatches || b->failed_checks ? 1 : 0;
}
