/* The measurement core of bench/pt2pt and bench/pt2pt_opencl: the host buffers and
 * patterns, the correctness check, the timed loops, a table row and a CSV row per size,
 * and the run over directions and configurations.
 *
 * A template: each program includes it after defining
 *   struct Bench, with at least: Options o; int rank, peer; size_t max_bytes; long chunk,
 *       max_reqs; MPI_Request *reqs; MPI_Status *stats; char *host_s, *host_r;
 *       unsigned char *pat_self, *pat_peer; long mismatches, verify_failures; FILE *csv;
 *   struct Side, one rank's buffer of a direction;
 *   configs[], its Config table; TAG_ACK;
 *   send_side(b, d) and recv_side(b, d), this rank's sides of direction d;
 *   clear_side(b, s, n), which zeroes a receive side, load_side(b, s, bytes, n), which
 *       writes n bytes into a send side, and check_side(b, s, n), which counts its bytes
 *       that differ from the peer's pattern at g_pattern_shift. */
#ifndef BENCH_MEASURE_H_INCLUDED
#define BENCH_MEASURE_H_INCLUDED

/* Chunks of the manual pipeline anchor. */
enum { PIPE_CHUNK = 256 << 10 };

/* The largest size to run, the host buffers every configuration uses (faulted in before
 * timing) and both ranks' patterns. Returns 0 when no size is in [--min-size, --max-size]. */
static int setup_host_side(Bench *b) {
    long max = 0;
    for (int i = 0; i < b->o.nsizes; i++)
        if (b->o.sizes[i] <= b->o.max_size && b->o.sizes[i] >= b->o.min_size && b->o.sizes[i] > max)
            max = b->o.sizes[i];
    if (max == 0) {
        if (b->rank == 0) fprintf(stderr, "%s: no size in [--min-size, --max-size]\n", g_prog);
        return 0;
    }
    b->max_bytes = (size_t)max;
    b->chunk = PIPE_CHUNK;
    const long chunks = (long)((b->max_bytes + PIPE_CHUNK - 1) / PIPE_CHUNK);
    b->max_reqs = chunks > MAX_WINDOW ? chunks : MAX_WINDOW;
    b->reqs = calloc((size_t)b->max_reqs, sizeof *b->reqs);
    b->stats = calloc((size_t)b->max_reqs, sizeof *b->stats);
    b->host_s = malloc(b->max_bytes);
    b->host_r = malloc(b->max_bytes);
    b->pat_self = malloc(b->max_bytes + PATTERN_PERIOD);
    b->pat_peer = malloc(b->max_bytes + PATTERN_PERIOD);
    if (!b->reqs || !b->stats || !b->host_s || !b->host_r || !b->pat_self || !b->pat_peer)
        fail("cannot allocate host buffers of %zu bytes", b->max_bytes);
    fill_pattern(b->pat_self, b->max_bytes + PATTERN_PERIOD, b->rank);
    fill_pattern(b->pat_peer, b->max_bytes + PATTERN_PERIOD, b->peer);
    memcpy(b->host_s, b->pat_self, b->max_bytes);
    memset(b->host_r, 0, b->max_bytes); /* fault the pages in before timing */
    return 1;
}

/* ------------------------------------------------------------------ measurement */

static void barrier(const Config *c) {
    if (c->mpiacc)
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    else
        MPI_CHECK(PMPI_Barrier(MPI_COMM_WORLD));
}

static void ack(Bench *b, const Config *c, int sending) {
    char byte = 0;
    if (c->mpiacc) {
        if (sending)
            MPI_CHECK(MPI_Send(&byte, 1, MPI_BYTE, b->peer, TAG_ACK, MPI_COMM_WORLD));
        else
            MPI_CHECK(MPI_Recv(&byte, 1, MPI_BYTE, b->peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
        if (sending)
            MPI_CHECK(PMPI_Send(&byte, 1, MPI_BYTE, b->peer, TAG_ACK, MPI_COMM_WORLD));
        else
            MPI_CHECK(PMPI_Recv(&byte, 1, MPI_BYTE, b->peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
}

static void do_window(Bench *b, const Config *c, Side s, size_t n, int w, int sending) {
    if (sending) {
        if (c->send_window)
            c->send_window(b, s, n, w);
        else
            for (int i = 0; i < w; i++) c->send(b, s, n);
    } else {
        if (c->recv_window)
            c->recv_window(b, s, n, w);
        else
            for (int i = 0; i < w; i++) c->recv(b, s, n);
    }
}

/* One iteration of the kind measured: a round trip (latency) or a window + ack (bandwidth). */
static void one_iter(Bench *b, const Config *c, const Dir *d, size_t n, int bw, int w) {
    Side s = send_side(b, d), r = recv_side(b, d);
    if (c->rank0_only) {
        if (b->rank == 0) {
            if (bw)
                c->send_window(b, s, n, w);
            else
                c->send(b, s, n);
        }
        return;
    }
    if (bw) {
        do_window(b, c, b->rank == 0 ? s : r, n, w, b->rank == 0);
        ack(b, c, b->rank == 1);
    } else if (b->rank == 0) {
        c->send(b, s, n);
        c->recv(b, r, n);
    } else {
        c->recv(b, r, n);
        c->send(b, s, n);
    }
}

/* Seconds per iteration. The warm-up iterations are timed on rank 0 to stretch the run to
 * --min-time; the count is shared so both ranks run the same number. */
static double timed(Bench *b, const Config *c, const Dir *d, size_t n, int bw, int w, long iters, long *used) {
    phase(bw ? "bandwidth" : "latency");
    barrier(c);
    /* At least two, as OSU skips two iterations of large messages: the first transfer of a
     * size can teach the library what the second uses (a receive landing in pageable
     * memory makes the OpenCL component offer pinned bounces from then on). */
    long warm = iters / 10 < 2 ? 2 : (iters / 10 > 20 ? 20 : iters / 10);
    double t0 = PMPI_Wtime();
    for (long i = 0; i < warm; i++) one_iter(b, c, d, n, bw, w);
    double per = (PMPI_Wtime() - t0) / (double)warm;
    iters = stretched_iters(&b->o, per, iters, bw);
    if (!c->rank0_only) MPI_CHECK(PMPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    barrier(c);
    t0 = PMPI_Wtime();
    for (long i = 0; i < iters; i++) one_iter(b, c, d, n, bw, w);
    *used = iters;
    return (PMPI_Wtime() - t0) / (double)iters;
}

/* One transfer each way with the receive buffer cleared first (or the configuration's own
 * check), each rank sending its pattern from a new starting point; returns the bytes that
 * differ, summed over both ranks. Both ranks check in the same order, so they agree on
 * the shift. */
static long verify(Bench *b, const Config *c, const Dir *d, size_t n) {
    static size_t checks;
    phase("verify");
    g_pattern_shift = ++checks * 40503u % PATTERN_PERIOD;
    if (c->verify) return c->verify(b, c, d, n);
    Side s = send_side(b, d), r = recv_side(b, d);
    long bad = 0, all = 0;
    load_side(b, s, b->pat_self + g_pattern_shift, n);
    clear_side(b, r, n);
    barrier(c);
    if (b->rank == 0) {
        c->send(b, s, n);
        c->recv(b, r, n);
        bad += check_side(b, r, n);
    } else {
        c->recv(b, r, n);
        bad += check_side(b, r, n);
        c->send(b, s, n);
    }
    MPI_CHECK(PMPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    return all;
}

/* ------------------------------------------------------------------ output */

static const char *config_name(const Bench *b, const Config *c, char *buf, size_t len) {
    if (c->mpiacc && b->o.label && *b->o.label)
        snprintf(buf, len, "%s-%s", c->name, b->o.label);
    else
        snprintf(buf, len, "%s", c->name);
    return buf;
}

/* The header is written first and the rows of each size once measured, so that a run cut short
 * (a hang killed by a time limit, an abort) keeps what it had. `details` describes the
 * devices and the knobs that matter to this program. Rank 0 only. */
static void csv_header(Bench *b, int argc, char **argv, const char *details) {
    char path[4096], lib[MPI_MAX_LIBRARY_VERSION_STRING];
    b->csv = open_results_csv(b->o.csv, g_prog, path, sizeof path);
    if (!b->csv) fail("cannot write %s: %s", path, strerror(errno));
    begin_results_csv(b->csv, g_prog, argc, argv, lib);
    fprintf(b->csv, "# mpi=\"%s\" %s iters=%ld bw_iters=%ld window=%ld bw_bytes=%ld min_time=%g\n", lib, details,
            b->o.iters, b->o.bw_iters, b->o.window, b->o.bw_bytes, b->o.min_time);
    fprintf(b->csv, "config,direction,size,lat_us,bw_GBs\n");
    fflush(b->csv);
    printf("# csv: %s\n", path);
}

/* ------------------------------------------------------------------ the run */

/* One configuration in one direction: what a row of the table measures. */
typedef struct {
    const Config *c;
    const Dir *d;
    char name[64];
    int usable;
} Unit;

enum { MAX_UNITS = 64 };

/* Verifies (first round only) and times one unit at one size; one-way latency in us and
 * bandwidth in GB/s. Prints the measurement's line (rank 0). */
static void measure(Bench *b, const Unit *u, size_t n, long round, double *lat_us, double *bw_GBs) {
    const Config *c = u->c;
    snprintf(g_where, sizeof g_where, "%s %s %zu B", u->name, u->d->name, n);
    long bad = 0;
    if (round == 0) {
        bad = verify(b, c, u->d, n);
        b->mismatches += bad;
        if (bad) b->verify_failures++;
    }
    int w = (int)b->o.window;
    if ((long)n * w > b->o.bw_bytes) w = (int)(b->o.bw_bytes / (long)n);
    if (w < 1) w = 1;
    long lat_iters, bw_iters;
    double lat = timed(b, c, u->d, n, 0, w, scaled(b->o.iters, n, 8192, b->o.min_iters), &lat_iters);
    double bw_t =
        timed(b, c, u->d, n, 1, w, scaled(b->o.bw_iters, (size_t)w * n, 256 << 10, b->o.min_iters), &bw_iters);
    /* ping-pong: one way is half a round trip; a rank-0-only configuration times one copy */
    *lat_us = lat * 1e6 / (c->rank0_only ? 1.0 : 2.0);
    *bw_GBs = (double)n * w / bw_t / 1e9;
    if (b->rank == 0) {
        printf("%-18s %-5s %10zu %11.2f %10.3f %7ld %7ld %3d %3ld  %s\n", u->name, u->d->name, n, *lat_us, *bw_GBs,
               lat_iters, bw_iters, w, round + 1,
               round ? "-"
               : bad ? "MISMATCH"
                     : "ok");
        fflush(stdout);
        if (b->o.rounds > 1)
            fprintf(b->csv, "# round %ld: %s,%s,%zu,%.3f,%.4f\n", round + 1, u->name, u->d->name, n, *lat_us, *bw_GBs);
        if (bad) fprintf(b->csv, "# verify %s %s %zu: %ld bytes differ\n", u->name, u->d->name, n, bad);
        fflush(b->csv);
    }
}

/* Every selected configuration in every selected direction, for --rounds rounds. A round
 * takes the sizes in turn and, at each size, every configuration and direction, in an
 * order that rotates from round to round; each CSV row is the median over the rounds
 * (each round's own numbers are comment lines). So the anchors and MPI-ACC are measured
 * seconds apart, not one whole sweep after another: on the H200 machine plain MPICH's
 * own bandwidth at one size moved by up to 50% between sweeps a minute apart, more than
 * any difference the ratios were meant to show.
 * Each configuration is set up once for the run and torn down at its end, so the
 * configurations of one process coexist: maint/gpu-check keeps those that disturb others
 * (NCCL's threads; an IPC anchor's mapping of the buffer MPI-ACC would map) in processes
 * of their own. Prints the table's column line first (rank 0). */
static void run_all(Bench *b) {
    static Unit units[MAX_UNITS];
    int nunits = 0;
    static const size_t order[] = {3, 0, 1, 2}; /* H->H (plain MPICH) first: it is quick */
    for (size_t oi = 0; oi < sizeof order / sizeof order[0]; oi++) {
        const Dir *d = &dirs[order[oi]];
        if (!in_list(b->o.dirs, d->name) && !in_list(b->o.dirs, d->alias)) continue;
        for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
            if ((configs[i].dirs & (1u << order[oi])) && in_list(b->o.configs, configs[i].name) && nunits < MAX_UNITS) {
                Unit *u = &units[nunits++];
                u->c = &configs[i];
                u->d = d;
                config_name(b, u->c, u->name, sizeof u->name);
                u->usable = 0;
            }
    }
    if (b->rank == 0) {
        printf("%-18s %-5s %10s %11s %10s %7s %7s %3s %3s  %s\n", "config", "dir", "size", "lat_us", "bw_GBs", "lat_it",
               "bw_it", "win", "rnd", "verify");
        fflush(stdout);
    }
    signal(SIGALRM, on_alarm);

    /* Setup, once per configuration (collective: both ranks walk the same table). */
    int set_up[sizeof configs / sizeof configs[0]] = {0}; /* 1 usable, -1 unusable */
    for (int k = 0; k < nunits; k++) {
        Unit *u = &units[k];
        const size_t ci = (size_t)(u->c - configs);
        char why[256] = "";
        if (set_up[ci] == 0) {
            snprintf(g_where, sizeof g_where, "%s setup", u->name);
            phase("setup");
            set_up[ci] = !u->c->setup || u->c->setup(b, why, sizeof why) ? 1 : -1;
            if (set_up[ci] < 0 && b->rank == 0) {
                printf("# skipped %s: %s\n", u->name, why);
                fprintf(b->csv, "# skipped %s: %s\n", u->name, why);
                fflush(stdout);
                fflush(b->csv);
            }
        }
        u->usable = set_up[ci] > 0;
        if (!u->usable && u->c->mpiacc) b->verify_failures++; /* MPI-ACC unusable on a GPU machine is an error */
    }

    size_t sizes[MAX_SIZES];
    int nsizes = 0;
    for (int si = 0; si < b->o.nsizes; si++)
        if (b->o.sizes[si] >= b->o.min_size && b->o.sizes[si] <= b->o.max_size)
            sizes[nsizes++] = (size_t)b->o.sizes[si];
    const long rounds = b->o.rounds;
    double *lat = calloc((size_t)(nunits * nsizes * rounds) + 1, sizeof *lat);
    double *bw = calloc((size_t)(nunits * nsizes * rounds) + 1, sizeof *bw);
    if (!lat || !bw) fail("cannot allocate the results of %d units x %d sizes x %ld rounds", nunits, nsizes, rounds);
#define AT(k, si, r) (((size_t)(k) * (size_t)nsizes + (size_t)(si)) * (size_t)rounds + (size_t)(r))
    for (long r = 0; r < rounds; r++)
        for (int si = 0; si < nsizes; si++) {
            for (int j = 0; j < nunits; j++) {
                const int k = (int)((j + r) % nunits);
                if (units[k].usable) measure(b, &units[k], sizes[si], r, &lat[AT(k, si, r)], &bw[AT(k, si, r)]);
            }
            if (r + 1 < rounds || b->rank != 0) continue;
            /* The size's last round: its rows, in the table's order, written at once so that
             * a run cut short keeps what it had. */
            for (int k = 0; k < nunits; k++)
                if (units[k].usable)
                    fprintf(b->csv, "%s,%s,%zu,%.3f,%.4f\n", units[k].name, units[k].d->name, sizes[si],
                            bench_median(&lat[AT(k, si, 0)], (int)rounds),
                            bench_median(&bw[AT(k, si, 0)], (int)rounds));
            fflush(b->csv);
        }
    if (b->rank == 0 && rounds > 1) {
        printf("# medians over %ld rounds (the CSV's rows)\n", rounds);
        for (int k = 0; k < nunits; k++) {
            if (!units[k].usable) continue;
            for (int si = 0; si < nsizes; si++)
                printf("%-18s %-5s %10zu %11.2f %10.3f\n", units[k].name, units[k].d->name, sizes[si],
                       bench_median(&lat[AT(k, si, 0)], (int)rounds), bench_median(&bw[AT(k, si, 0)], (int)rounds));
        }
        fflush(stdout);
    }
#undef AT
    free(lat);
    free(bw);

    for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ci++)
        if (set_up[ci] > 0 && configs[ci].teardown) {
            snprintf(g_where, sizeof g_where, "%s teardown", configs[ci].name);
            phase("teardown");
            configs[ci].teardown(b);
        }
    alarm(0);
    phase("");
    snprintf(g_where, sizeof g_where, "teardown");
}

/* The closing verify line on stdout and in the CSV, which it closes (rank 0); the exit code. */
static int finish_run(Bench *b) {
    if (b->rank == 0) {
        printf("# verify: %ld mismatched bytes, %ld failed checks or unusable MPI-ACC configs\n", b->mismatches,
               b->verify_failures);
        fprintf(b->csv, "# verify: %ld mismatched bytes, %ld failed checks or unusable MPI-ACC configs\n",
                b->mismatches, b->verify_failures);
        if (fclose(b->csv) != 0) fail("cannot write the CSV: %s", strerror(errno));
    }
    return b->verify_failures == 0 ? 0 : 1;
}

#endif
