/* What the files of bench/coll share: a device kind's table of calls (coll_cuda.c and
 * coll_opencl.c each fill one, where built), the run's state, and the helpers coll.c and
 * coll_summary.c define (coll.c alone includes bench_common.h, whose watchdog and names
 * are one per program). */
#ifndef BENCH_COLL_PARTS_H_INCLUDED
#define BENCH_COLL_PARTS_H_INCLUDED

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

/* The collectives measured, in the order of the table and the CSV. */
enum { OP_ALLREDUCE, OP_REDUCE, OP_BCAST, OP_ALLGATHER, OP_ALLTOALL, OP_REDUCE_SCATTER, NUM_OPS };
enum { COLL_ROOT = 0 }; /* the root of Reduce and Bcast */

/* One kind of device memory. Buffers are opaque handles: a CUDA device pointer or a cl_mem,
 * as MPI-ACC takes them. Every call is complete when it returns; a failure ends the run
 * through coll_fail. */
typedef struct {
    const char *name; /* "cuda", "opencl" */
    /* Opens this rank's device (local_rank picks it among those visible). `desc` names it
     * for the output; `id` tells whether two ranks share one device (PCI bus id, or the
     * name when there is none). Returns 0 with a reason in `why`. Not collective. */
    int (*open)(int local_rank, char *desc, size_t desclen, char *id, size_t idlen, char *why, size_t whylen);
    void *(*alloc)(size_t bytes);
    void (*release)(void *buf);
    /* Page-locked host memory for staging by hand, from this kind's runtime. */
    void *(*alloc_pinned)(size_t bytes);
    void (*release_pinned)(void *p);
    void (*to_host)(void *host, void *buf, size_t bytes);
    void (*from_host)(void *buf, const void *host, size_t bytes);
    /* A new MPI_FLOAT duplicate tagged with this kind's MPI-ACC attributes (the caller frees it). */
    MPI_Datatype (*tagged_float)(void);
    /* After MPI_Finalize (MPI-ACC may hold the device's queue or stream until then). */
    void (*close)(void);
    /* NCCL called directly, or NULL where the kind has none. nccl_open is collective over
     * MPI_COMM_WORLD and returns 0 with a reason on every rank when NCCL cannot run. */
    int (*nccl_open)(int shared_device, char *why, size_t whylen);
    /* One collective of `count` floats (per rank's block for allgather, alltoall and
     * reduce_scatter), as coll.c's MPI calls take them; complete on return. */
    void (*nccl_run)(int op, void *send, void *recv, size_t count, int nranks);
    void (*nccl_close)(void);
    const char *(*nccl_version)(void);
} DeviceKind;

#ifdef COLL_HAVE_CUDA
extern const DeviceKind cuda_kind;
/* Before MPI_Init, so that MPI-ACC's CUDA context lands on the device this rank uses. */
void cuda_pick_device_early(int local_rank);
#endif
#ifdef COLL_HAVE_OPENCL
extern const DeviceKind opencl_kind;
#endif

/* ------------------------------------------------------------------ the run's state */

enum { MAX_SIZES = 64, MAX_ROUNDS = 15, MAX_KINDS = 3, MAX_UNITS = 12, MAX_RESULTS = MAX_SIZES * NUM_OPS * MAX_UNITS };

typedef enum { CFG_MPIACC, CFG_STAGED, CFG_HOST, CFG_NCCL, NUM_CONFIGS } ConfigId;
typedef enum { ST_OK, ST_MISMATCH, ST_REFUSED, ST_ERROR } Status;
extern const char *const op_names[NUM_OPS];

typedef struct {
    long sizes[MAX_SIZES], max_size, rounds, iters, min_iters;
    int nsizes, require_mpiacc, help;
    double min_time;
    const char *ops, *kinds, *configs, *label, *csv;
} Options;

typedef struct {
    const DeviceKind *api; /* NULL: the host kind */
    const char *name;
    char desc[300], why[256];
    int opened, shared_device;
    void *dev_s, *dev_r;
    void *pinned_s, *pinned_r;
    MPI_Datatype tfloat;
} Kind;

typedef struct {
    Kind *kind;
    ConfigId cfg;
    char name[64];
    int usable, told[NUM_OPS]; /* told: its refusal of that collective was printed */
} Unit;

typedef struct {
    int op;
    const Unit *unit;
    size_t size;
    double sec; /* < 0: not measured */
} Result;

typedef struct {
    size_t count, send_elems, recv_elems, bytes;
    double busbw;
} Shape;

typedef struct {
    Options o;
    int rank, nranks;
    Kind kinds[MAX_KINDS];
    int nkinds;
    Unit units[MAX_UNITS];
    int nunits;
    size_t max_bytes;
    float *host_s, *host_r, *expect;
    FILE *csv;
    long mismatches, failed_checks, refused_rows;
    Result results[MAX_RESULTS];
    int nresults;
    char skipped[MAX_KINDS][300]; /* kinds not given by --kinds that could not open */
    int nskipped;
} Bench;

/* coll.c: prints where and what failed, and aborts the job. */
void coll_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* coll_summary.c: a measured row, and the closing summary and verify line (rank 0; closes
 * the CSV). */
const Result *find_result(const Bench *b, int op, const Kind *k, ConfigId cfg, size_t size);
void print_summary(Bench *b);

#endif
