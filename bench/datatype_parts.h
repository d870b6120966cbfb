/* What the files of bench/datatype share: its state, its options, one measured row, and the
 * helpers datatype.c defines (it alone includes bench_common.h, whose watchdog and names
 * are one per program). datatype_pack.c measures the pack cases, datatype_faces.c the
 * halo exchange of a 3D grid's faces. */
#ifndef BENCH_DATATYPE_PARTS_H_INCLUDED
#define BENCH_DATATYPE_PARTS_H_INCLUDED

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#include "bench_parts_fail.h"

#define DEFAULT_SIZES "1K,2K,4K,8K,16K"
#define DEFAULT_GRIDS "64,128,256,512"
#define QUICK_SIZES "1K,4K"
#define QUICK_GRIDS "64,256"
enum {
    MAX_LIST = 16,
    MAX_ROUNDS = 15,
    MAX_RESULTS = 1024,
    MAX_REFUSALS = 8,
    MAX_N = 32768,
    MAX_GRID = 1024,
    STAIR_STEP = 64, /* doubles per step of the stair triangle */
    TAG_FACE = 31,
    TAG_FLAGS = 32,
    TAG_INFO = 33
};
/* The goals against cudaMemcpy (vector 0.90, triangles 0.80) count from 4 MiB of packed bytes. */
#define GOAL_BYTES (4L << 20)

typedef struct {
    long sizes[MAX_LIST], grids[MAX_LIST];
    int nsizes, ngrids;
    long rounds, iters;
    double min_time;
    const char *cases, *configs, *label, *csv;
} Options;

/* One CSV row, kept for the summary. */
typedef struct {
    const char *cas, *base, *op; /* base: the configuration without the label */
    char config[64];
    long n, bytes;
    double sec; /* median seconds per call; < 0: unsupported */
} Result;

typedef struct {
    Options o;
    int rank, peer, device, ndev;
    int pack_autodetect;   /* MPI_Pack can find device pointers (MPIACC_CUDA_AUTODETECT not off) */
    cudaStream_t stream;   /* the anchors' work */
    MPI_Datatype dbl_cuda; /* MPI_DOUBLE tagged MPIX_ACC_BUF_CUDA: contiguous device doubles */
    FILE *csv;             /* rank 0 */
    long mismatches, failed_checks, unsupported;
    char refusals[MAX_REFUSALS][64]; /* calls whose refusal was printed */
    int nrefusals;
    Result results[MAX_RESULTS];
    int nresults;
} Bench;

/* datatype.c */
void mpi_fail_status(int rc, const char *file, int line, const char *call, int n, const MPI_Status *stats)
    __attribute__((noreturn));
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void set_where(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void set_phase(const char *name); /* and restarts the watchdog */
void stop_watchdog(void);
int selected(const char *list, const char *name); /* a NULL list selects everything */
/* 0 for MPI_SUCCESS; 1 for MPI_ERR_UNSUPPORTED_OPERATION, whose message is printed once per
 * call name; any other error ends the run. */
int refused(Bench *b, int rc, const char *call);
long compare_doubles(const double *want, const double *got, size_t count, const char *what);
const char *config_name(const Bench *b, const char *base, int through_mpiacc, char *buf, size_t len);
void print_round(Bench *b, const char *cas, long n, long bytes, const char *config, const char *op, double sec,
                 long iters, long round, const char *verify);
/* The row of the median of `secs` (rank 0); status "unsupported" ignores secs. */
void add_result(Bench *b, const char *cas, long n, long bytes, const char *base, const char *config, const char *op,
                const double *secs, int rounds, const char *status);
void print_summary(Bench *b);

/* datatype_pack.c: every selected pack case at every size, on rank 0 (rank 1 waits). */
void run_pack_cases(Bench *b);
/* datatype_faces.c: the six faces of an n^3 grid, both ranks. */
void run_grid(Bench *b, long n);

#define CHECK_MPI_ALL(call, n, stats)                                                          \
    do {                                                                                       \
        int rc_ = (call);                                                                      \
        if (rc_ != MPI_SUCCESS) mpi_fail_status(rc_, __FILE__, __LINE__, #call, (n), (stats)); \
    } while (0)

#endif
