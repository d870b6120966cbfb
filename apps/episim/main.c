/* GPU-EpiSimdemics: an agent-based epidemic on a seeded synthetic population, with its visit
 * exchange written three ways, as in the MPI-ACC port of GPU-EpiSimdemics: basic (fragments
 * in host memory, one blocking copy to the GPU), advanced (pinned fragments, asynchronous
 * copies and unpack kernels overlapping the exchange) and mpi-acc (the persistent receives
 * post into GPU memory, unpack kernels overlapping the exchange). A fourth, cpu, runs the
 * same exchange with computeInteractions on the CPU: a test aid that needs no GPU.
 *
 *   mpiexec -n 2 apps/episim/episim --persons 1000000 --locations 100000 --days 10 --csv results/
 *   mpiexec -n 4 apps/episim/episim --persons 20000 --locations 2000 --days 20 --check
 *
 * Without a usable CUDA device on every rank a GPU variant says so and exits with 77
 * (automake's "skipped"). See apps/episim/README.md for the model and the lines-of-code
 * count of the loops. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../common/app_common.h"
#include "episim.h"
#include "results_csv.h"

const char kProgram[] = "episim";
const char *const kVariantNames[VARIANTS] = {"basic", "advanced", "mpi-acc", "cpu"};
static day_times (*const kRun[VARIANTS])(sim *, int) = {run_basic, run_advanced, run_mpi_acc, run_cpu};
enum { GPU_VARIANTS = 1 << V_BASIC | 1 << V_ADVANCED | 1 << V_MPI_ACC };

typedef struct {
    int persons, locations, days, seed, fragment, warmup, check, variants;
    const char *csv;
} options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: mpiexec -n N %s [options]\n"
            "  --persons P         persons, cut in blocks over the ranks (default 1000000)\n"
            "  --locations L       locations, cut in blocks over the ranks (default 100000)\n"
            "  --days D            simulated days, timed (default 10)\n"
            "  --seed S            the population's and the infections' seed (default 1)\n"
            "  --fragment B        bytes per visit fragment, a multiple of %zu up to 16 MiB (default 131072)\n"
            "  --warmup W          untimed days first, from the same start (default 1, at most --days)\n"
            "  --variant V         basic, advanced, mpi-acc, all (the three, in that order; the default)\n"
            "                      or cpu (a test aid: computeInteractions on the CPU, no GPU needed)\n"
            "  --check             compare S, E, I and R after each day with a serial reference on rank 0;\n"
            "                      they must be equal\n"
            "  --csv FILE          per-day visits, interactions, unpack and communication times, one row per\n"
            "                      variant (a folder, or a path ending in '/', gets %s-<date>.csv)\n"
            "  --help              this text\n"
            "  device: local rank modulo the node's CUDA device count\n",
            kProgram, sizeof(visit_msg), kProgram);
}

static int variant_bits(const char *v) {
    if (!strcmp(v, "all")) return GPU_VARIANTS;
    for (int i = 0; i < VARIANTS; i++)
        if (!strcmp(v, kVariantNames[i])) return 1 << i;
    return 0;
}

/* 0 on success, 1 for --help, 2 (with the message printed on rank 0) for a bad option. */
static int parse(int argc, char **argv, int rank, options *o) {
    *o = (options){.persons = 1000000,
                   .locations = 100000,
                   .days = 10,
                   .seed = 1,
                   .fragment = 131072,
                   .warmup = 1,
                   .variants = GPU_VARIANTS};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "--help")) return 1;
        if (!strcmp(a, "--check")) {
            o->check = 1;
            continue;
        }
        if (!strcmp(a, "--persons"))
            ok = app_number(v, 1, &o->persons) && o->persons <= 1 << 28;
        else if (!strcmp(a, "--locations"))
            ok = app_number(v, 1, &o->locations);
        else if (!strcmp(a, "--days"))
            ok = app_number(v, 1, &o->days);
        else if (!strcmp(a, "--seed"))
            ok = app_number(v, 0, &o->seed);
        else if (!strcmp(a, "--fragment"))
            ok = app_number(v, (long)sizeof(visit_msg), &o->fragment) && o->fragment % sizeof(visit_msg) == 0 &&
                 o->fragment <= 1 << 24;
        else if (!strcmp(a, "--warmup"))
            ok = app_number(v, 0, &o->warmup);
        else if (!strcmp(a, "--csv"))
            ok = (o->csv = v) && *v;
        else if (!strcmp(a, "--variant"))
            ok = v && (o->variants = variant_bits(v));
        else {
            if (rank == 0) fprintf(stderr, "%s: unknown option %s\n", kProgram, a);
            return 2;
        }
        if (!ok) {
            if (rank == 0) fprintf(stderr, "%s: bad option %s %s\n", kProgram, a, v ? v : "(missing value)");
            return 2;
        }
        i++;
    }
    if (o->warmup > o->days) {
        if (rank == 0) fprintf(stderr, "%s: --warmup %d is more than --days %d\n", kProgram, o->warmup, o->days);
        return 2;
    }
    return 0;
}

/* FNV-1a over the counts' bytes: two runs print the same value exactly when every day's
 * S, E, I and R are the same. */
static uint64_t counts_hash(const long long (*counts)[EPI_STATES], int days) {
    const unsigned char *b = (const unsigned char *)counts;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < (size_t)days * sizeof *counts; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* What a run found, on rank 0. */
typedef struct {
    int ok, peak_day;
    long long peak, infected; /* most infectious on one day; persons ever infected */
    char text[256];
} verdict;

static verdict judge(const options *o, const long long (*got)[EPI_STATES], long long (**want)[EPI_STATES]) {
    verdict v = {1, 0, 0, 0, "check off"};
    for (int d = 0; d < o->days; d++)
        if (got[d][EPI_I] > v.peak) v.peak = got[d][EPI_I], v.peak_day = d;
    v.infected = o->persons - got[o->days - 1][EPI_S];
    if (!o->check) return v;
    if (!*want) {
        *want = malloc((size_t)o->days * sizeof **want);
        reference(o->persons, o->locations, o->days, (uint64_t)o->seed, *want);
    }
    snprintf(v.text, sizeof v.text, "check OK: S, E, I, R of all %d days equal the serial reference", o->days);
    for (int d = 0; d < o->days && v.ok; d++)
        if (memcmp(got[d], (*want)[d], sizeof got[d])) {
            v.ok = 0;
            snprintf(v.text, sizeof v.text,
                     "check FAILED: day %d has S E I R %lld %lld %lld %lld, the reference %lld %lld %lld %lld", d,
                     got[d][0], got[d][1], got[d][2], got[d][3], (*want)[d][0], (*want)[d][1], (*want)[d][2],
                     (*want)[d][3]);
        }
    return v;
}

static day_times run_variant(sim *s, int v, int days) {
    sim_reset(s);
    return kRun[v](s, days);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options o;
    const int parsed = parse(argc, argv, rank, &o);
    if (parsed) {
        if (rank == 0) usage(parsed == 1 ? stdout : stderr);
        MPI_Finalize();
        return parsed == 1 ? 0 : 2;
    }
    const int gpu = (o.variants & GPU_VARIANTS) != 0;
    if (gpu) {
        MPI_Comm node;
        int local_rank = 0, usable, all_usable = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &local_rank);
        MPI_Comm_free(&node);
        usable = device_find(local_rank);
        MPI_Allreduce(&usable, &all_usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all_usable) {
            if (rank == 0) printf("%s: no usable CUDA device on some rank; nothing to show\n", kProgram);
            MPI_Finalize();
            return 77;
        }
    }
    sim s = {0};
    sim_open(&s, o.persons, o.locations, o.days, (uint64_t)o.seed, o.fragment / (int)sizeof(visit_msg));
    if (gpu) device_open(&s);

    FILE *csv = NULL;
    char csv_path[4096] = "", lib[MPI_MAX_LIBRARY_VERSION_STRING];
    if (o.csv && rank == 0) {
        csv = open_results_csv(o.csv, kProgram, csv_path, sizeof csv_path);
        if (!csv) fprintf(stderr, "%s: cannot write %s\n", kProgram, csv_path);
    }
    if (csv) {
        begin_results_csv(csv, kProgram, argc, argv, lib);
        fprintf(csv,
                "# %s\nvariant,ranks,persons,locations,days,seed,fragment_bytes,visits_us,interactions_us,unpack_us,"
                "comm_us,total_us,infected,peak_infectious,check,counts_fnv1a\n",
                lib);
    }
    long long(*total)[EPI_STATES] = malloc((size_t)o.days * sizeof *total), (*want)[EPI_STATES] = NULL;
    int failed = 0;
    for (int v = 0; v < VARIANTS; v++) {
        if (!(o.variants & (1 << v))) continue;
        /* The first days allocate the rows and set up MPI-ACC's staging; then a fresh start. */
        if (o.warmup) run_variant(&s, v, o.warmup);
        MPI_Barrier(s.comm);
        const day_times t = run_variant(&s, v, o.days);
        const double mine[5] = {t.visits, t.interactions, t.unpack, t.comm,
                                t.visits + t.interactions + t.unpack + t.comm};
        double most[5];
        MPI_Reduce(mine, most, 5, MPI_DOUBLE, MPI_MAX, 0, s.comm);
        MPI_Reduce(s.counts, total, o.days * EPI_STATES, MPI_LONG_LONG, MPI_SUM, 0, s.comm);
        if (rank != 0) continue;
        const verdict verdict = judge(&o, (const long long(*)[EPI_STATES])total, &want);
        const uint64_t hash = counts_hash((const long long(*)[EPI_STATES])total, o.days);
        const double us = 1e6 / o.days;
        const long long *last = total[o.days - 1];
        failed |= !verdict.ok;
        printf(
            "%s: %s, %d ranks, %d persons, %d locations, %d days: visits %.1f, interactions %.1f, unpack %.1f, comm "
            "%.1f us/day; last day S E I R %lld %lld %lld %lld, peak infectious %lld on day %d, %s, counts fnv1a "
            "0x%016llx\n",
            kProgram, kVariantNames[v], size, o.persons, o.locations, o.days, most[0] * us, most[1] * us, most[2] * us,
            most[3] * us, last[0], last[1], last[2], last[3], verdict.peak, verdict.peak_day, verdict.text,
            (unsigned long long)hash);
        if (csv)
            fprintf(csv, "%s,%d,%d,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%lld,%lld,%s,0x%016llx\n", kVariantNames[v],
                    size, o.persons, o.locations, o.days, o.seed, o.fragment, most[0] * us, most[1] * us, most[2] * us,
                    most[3] * us, most[4] * us, verdict.infected, verdict.peak,
                    !o.check     ? "off"
                    : verdict.ok ? "ok"
                                 : "failed",
                    (unsigned long long)hash);
        fflush(stdout);
    }
    if (csv) {
        fclose(csv);
        printf("%s: wrote %s\n", kProgram, csv_path);
    }
    free(total);
    free(want);
    MPI_Bcast(&failed, 1, MPI_INT, 0, s.comm);
    if (gpu) device_close(&s);
    sim_close(&s);
    MPI_Finalize();
    return failed ? 1 : 0;
}
