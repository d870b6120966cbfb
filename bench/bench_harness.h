/* What bench/pt2pt and bench/pt2pt_opencl share besides bench_common.h: the command-line
 * options, the directions, the configuration table's shape and the data pattern. The
 * measurement loops are in bench_measure.h, which needs each program's Bench and Side. */
#ifndef BENCH_HARNESS_H_INCLUDED
#define BENCH_HARNESS_H_INCLUDED

#include "bench_common.h"

enum { MAX_SIZES = 64, MAX_WINDOW = 64, MAX_ROUNDS = 15 };
#define MAX_MSG (1L << 30)

typedef struct {
    long iters, bw_iters, min_iters, window, bw_bytes, min_size, max_size, rounds;
    double min_time;
    long sizes[MAX_SIZES];
    int nsizes;
    const char *configs, *dirs, *label, *csv;
} Options;

static int parse_sizes(const char *text, Options *o) {
    if (!strcmp(text, "pow2")) {
        o->nsizes = 0;
        for (long s = 1; s <= MAX_MSG && o->nsizes < MAX_SIZES; s *= 2) o->sizes[o->nsizes++] = s;
        return 1;
    }
    char buf[1024];
    if (strlen(text) >= sizeof buf) return 0;
    strcpy(buf, text);
    o->nsizes = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == MAX_SIZES || !parse_size(tok, 1, MAX_MSG, &o->sizes[o->nsizes])) return 0;
        o->nsizes++;
    }
    return o->nsizes > 0;
}

/* Iterations for a message of `bytes`: the configured count up to `ref` bytes, fewer
 * beyond in proportion, and never below `floor`. */
static long scaled(long iters, size_t bytes, long ref, long floor) {
    long n = (long)bytes <= ref ? iters : (long)((double)iters * (double)ref / (double)bytes);
    return n < floor ? floor : n;
}

/* Enough iterations of `per` seconds each for a measurement to last --min-time, capped at
 * ten times the configured count. */
static long stretched_iters(const Options *o, double per, long iters, int bw) {
    if (per > 0 && per * (double)iters < o->min_time) {
        double want = o->min_time / per + 1;
        long cap = 10 * (bw ? o->bw_iters : o->iters);
        iters = want > (double)cap ? (cap > iters ? cap : iters) : (long)want;
    }
    return iters;
}

/* Options shared by the point-to-point benchmarks; `max_size` and `sizes` are each
 * program's defaults. */
static int parse_options(int argc, char **argv, Options *o, long max_size, const char *sizes) {
    *o = (Options){.iters = 1000, .bw_iters = 100, .min_iters = 3, .window = 32, .bw_bytes = 256L << 20,
                   .min_size = 1, .max_size = max_size, .rounds = 1, .min_time = 0.02};
    parse_sizes(sizes, o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok;
        if (!v) return 0;
        if (!strcmp(a, "--iters")) ok = parse_size(v, 1, 100000000, &o->iters);
        else if (!strcmp(a, "--bw-iters")) ok = parse_size(v, 1, 100000000, &o->bw_iters);
        else if (!strcmp(a, "--min-iters")) ok = parse_size(v, 1, 1000000, &o->min_iters);
        else if (!strcmp(a, "--window")) ok = parse_size(v, 1, MAX_WINDOW, &o->window);
        else if (!strcmp(a, "--rounds")) ok = parse_size(v, 1, MAX_ROUNDS, &o->rounds);
        else if (!strcmp(a, "--bw-bytes")) ok = parse_size(v, 1, 1L << 40, &o->bw_bytes);
        else if (!strcmp(a, "--min-size")) ok = parse_size(v, 1, MAX_MSG, &o->min_size);
        else if (!strcmp(a, "--max-size")) ok = parse_size(v, 1, MAX_MSG, &o->max_size);
        else if (!strcmp(a, "--sizes")) ok = parse_sizes(v, o);
        else if (!strcmp(a, "--configs")) ok = (o->configs = v) != NULL;
        else if (!strcmp(a, "--dirs")) ok = (o->dirs = v) != NULL;
        else if (!strcmp(a, "--label")) ok = (o->label = v) != NULL;
        else if (!strcmp(a, "--csv")) ok = (o->csv = v) != NULL;
        else if (!strcmp(a, "--watchdog")) {
            long sec;
            ok = parse_size(v, 0, 86400, &sec);
            g_watchdog = (unsigned)sec;
        }
        else if (!strcmp(a, "--min-time")) {
            char *end;
            o->min_time = strtod(v, &end);
            ok = end != v && !*end && o->min_time >= 0 && o->min_time < 100;
        } else ok = 0;
        if (!ok) {
            fprintf(stderr, "%s: bad option %s %s\n", g_prog, a, v);
            return 0;
        }
        i++;
    }
    return 1;
}

/* ------------------------------------------------------------------ directions and configurations */

typedef struct {
    const char *name, *alias;
    int src_dev, dst_dev; /* rank 0's buffer, rank 1's buffer: 1 = device memory */
} Dir;

static const Dir dirs[] = {{"D->D", "DD", 1, 1}, {"D->H", "DH", 1, 0}, {"H->D", "HD", 0, 1}, {"H->H", "HH", 0, 0}};
enum { DIR_DD = 1, DIR_DH = 2, DIR_HD = 4, DIR_HH = 8, DIR_DEV = DIR_DD | DIR_DH | DIR_HD };

/* Each program defines struct Bench (its state; bench_measure.h lists the fields it
 * reads) and struct Side (one rank's buffer of a direction). */
typedef struct Bench Bench;
typedef struct Side Side;

/* One configuration measured: an anchor or MPI-ACC. */
typedef struct Config Config;
struct Config {
    const char *name;
    unsigned dirs;  /* DIR_* it runs in */
    int mpiacc;     /* through libmpiacc: gets the label; acks through MPI_* */
    int rank0_only; /* rank 0 alone (memcpy-peer copies between its two devices) */
    /* Collective; returns 1 when usable, else 0 with a reason in `why`. NULL: usable. */
    int (*setup)(Bench *, char *why, size_t whylen);
    void (*send)(Bench *, Side, size_t);
    void (*recv)(Bench *, Side, size_t);
    void (*send_window)(Bench *, Side, size_t, int); /* NULL: `window` blocking sends */
    void (*recv_window)(Bench *, Side, size_t, int);
    /* Undoes setup at the end of the run (every configuration of a run is set up at its
     * start: they are measured interleaved). NULL: nothing to undo. */
    void (*teardown)(Bench *);
    /* Checks one transfer itself (collective; the differing bytes summed over both
     * ranks). NULL: one transfer each way into cleared receive buffers. */
    long (*verify)(Bench *, const Config *, const Dir *, size_t);
};

/* ------------------------------------------------------------------ data pattern */

/* Never 0, so a cleared receive buffer never matches, and different between the ranks at
 * every byte. It repeats every PATTERN_PERIOD bytes, so a buffer PATTERN_PERIOD bytes
 * longer than a message holds it from any starting point: each check sends it from a new
 * one (g_pattern_shift). Within a period the bytes are hashed, so two starting points agree
 * on about 1 byte in 251: bytes an earlier transfer left behind, or a slot's earlier
 * contents, read as wrong. */
enum { PATTERN_PERIOD = 512 * 251 };
static size_t g_pattern_shift;
static void fill_pattern(unsigned char *p, size_t n, int rank) {
    const size_t period = n < PATTERN_PERIOD ? n : PATTERN_PERIOD;
    for (size_t i = 0; i < period; i++) {
        uint32_t h = (uint32_t)i * 0x9E3779B1u;
        h ^= h >> 15;
        h *= 0x85EBCA6Bu;
        h ^= h >> 13;
        p[i] = (unsigned char)((h % 251u + (uint32_t)rank * 17u) % 251u + 1u);
    }
    for (size_t at = period; at < n; at += period) memcpy(p + at, p, n - at < period ? n - at : period);
}

/* Bytes of `got` that differ from `want`; prints the first difference. */
static long count_mismatches(const unsigned char *want, const unsigned char *got, size_t n, const char *what) {
    if (!memcmp(got, want, n)) return 0;
    long bad = 0;
    size_t first = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && bad++ == 0) first = i;
    fprintf(stderr, "%s: rank %d: VERIFY FAILED [%s] %s: %ld of %zu bytes differ (first at offset %zu: got 0x%02x, want 0x%02x)\n",
            g_prog, g_rank, g_where, what, bad, n, first, got[first], want[first]);
    return bad;
}

#endif
