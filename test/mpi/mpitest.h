/* A small TAP harness for MPI tests: each case runs on every rank, the ranks agree on
 * the verdict (MPI_Allreduce), and rank 0 prints one TAP line named after the
 * behaviour. Checks compare the bytes that arrived, never only return codes. */
#ifndef MPITEST_H_INCLUDED
#define MPITEST_H_INCLUDED

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mt_rank, mt_size, mt_count, mt_case_failed, mt_any_failed;
static const char *mt_case_name;

static void mt_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "# [rank %d] %s:%d: %s: ", mt_rank, file, line, mt_case_name ? mt_case_name : "?");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    mt_case_failed = 1;
}

#define MT_CHECK(cond, ...)                                    \
    do {                                                       \
        if (!(cond)) mt_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

/* Every rank calls MT_INIT/MT_FINALIZE; rank 0 prints the plan at the end. */
static void mt_init(int *argc, char ***argv, int required_thread_level) {
    int provided;
    if (required_thread_level >= 0)
        MPI_Init_thread(argc, argv, required_thread_level, &provided);
    else
        MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    setvbuf(stdout, NULL, _IOLBF, 0);
}
#define MT_INIT(argc, argv) mt_init((argc), (argv), -1)

static void mt_begin(const char *name) {
    mt_case_name = name;
    mt_case_failed = 0;
}

/* Ends a case: all ranks must call it. */
static void mt_end(void) {
    int failed = 0;
    MPI_Allreduce(&mt_case_failed, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    ++mt_count;
    if (failed) mt_any_failed = 1;
    if (mt_rank == 0) printf("%s %d - %s\n", failed ? "not ok" : "ok", mt_count, mt_case_name);
    mt_case_name = NULL;
}

/* Runs the block as one named case. */
#define MT_CASE(name) for (int mt_once_ = (mt_begin(name), 1); mt_once_; mt_once_ = 0, mt_end())

/* A case that cannot run here: named and counted as skipped. All ranks call it. */
static inline void mt_skip(const char *name, const char *why) {
    ++mt_count;
    if (mt_rank == 0) printf("ok %d - %s # SKIP %s\n", mt_count, name, why);
}

static int mt_finalize(void) {
    if (mt_rank == 0) printf("1..%d\n", mt_count);
    MPI_Finalize();
    return 0; /* the verdict is in the TAP lines */
}

/* Deterministic pseudo-random bytes for (seed, index): lets receivers verify content
 * without having been sent the expected buffer. */
static inline unsigned char mt_byte(uint64_t seed, size_t i) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return (unsigned char)x;
}
static inline void mt_fill(void *buf, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; ++i) ((unsigned char *)buf)[i] = mt_byte(seed, i);
}
/* Index of the first wrong byte, or (size_t)-1 when all match. */
static inline size_t mt_verify(const void *buf, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; ++i)
        if (((const unsigned char *)buf)[i] != mt_byte(seed, i)) return i;
    return (size_t)-1;
}

/* Whether every rank runs on this rank's host (MPI_Get_processor_name): maint/multihost
 * spreads them over several, where the modes of one node do not apply. */
static inline int mt_one_host(void) {
    char mine[MPI_MAX_PROCESSOR_NAME] = {0}, first[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0, same = 0, all = 0;
    MPI_Get_processor_name(mine, &len);
    memcpy(first, mine, sizeof first);
    MPI_Bcast(first, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    same = strcmp(first, mine) == 0;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

#endif
