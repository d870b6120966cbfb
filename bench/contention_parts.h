/* What the files of bench/contention share: its options, its state, the task 0 variants and
 * the helpers contention.c defines (it alone includes bench_common.h, whose watchdog and
 * names are one per program). contention_pingpong.c holds task 0, the device ping-pong in
 * its four forms; contention_kernels.cu task 1, the local GPU work. */
#ifndef BENCH_CONTENTION_PARTS_H_INCLUDED
#define BENCH_CONTENTION_PARTS_H_INCLUDED

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "bench_parts_fail.h"

#include "contention_kernels.h"

enum {
    MAX_ROUNDS = 15,
    PIPE_SLOTS = 2, /* the hand pipeline's pinned buffers: double buffering */
    TAG_DATA = 41,
    TAG_CHUNK = 42,
    TAG_INFO = 43
};

typedef enum { TASK0_MPIACC, TASK0_MPIACC_STREAM, TASK0_STAGED, TASK0_PIPELINE, TASK0_CONFIGS } Task0Kind;

typedef struct {
    long size, chunk, iters, local_iters, rounds, array_bytes, copy_bytes, units;
    int local_ranks; /* 2: task 1 on both ranks (SHOC's layout); 1: on rank 0 alone */
    const char *configs, *locals, *label, *csv;
} Options;

typedef struct {
    Options o;
    int rank, peer, device, ndev;
    /* task 0 */
    char *dev_send, *dev_recv; /* device: what rank 0 sends / where each rank receives */
    char *pinned;              /* staged: the host copy of one message */
    char *slot[PIPE_SLOTS];    /* pipeline: pinned chunk buffers */
    cudaEvent_t slot_ready[PIPE_SLOTS];
    cudaStream_t stream;       /* the hand pipeline's copies; mpiacc-stream's attribute */
    MPI_Datatype cuda_bytes;   /* MPI_BYTE tagged MPIX_ACC_BUF_CUDA */
    MPI_Datatype stream_bytes; /* the same with MPIX_ACC_STREAM = stream */
    unsigned char *pattern;    /* host: the bytes of the current measurement */
    unsigned char *check;      /* host: what arrived, read back */
    unsigned stamp;            /* changes the pattern at every measurement */
    /* task 1 */
    LocalWork work;
    long units[LOCAL_KINDS]; /* per iteration, from calibration (or --units) */
    /* the two threads of a rank */
    pthread_t worker;
    pthread_barrier_t start, end;
    struct {
        int quit, run_local;
        LocalKind kind;
        double seconds; /* task 1's timed iterations, on the worker */
    } job;
    atomic_int task0_done; /* task 0's round trips, untimed ones included, are over */
    atomic_int task1_done; /* task 1's timed iterations are over */
    /* what runs: selected[] by --configs and --locals */
    int task0_selected[TASK0_CONFIGS], local_selected[LOCAL_KINDS];
    const char *label; /* suffix of MPI-ACC's rows: "noipc" with MPIACC_IPC=0, else none */
    /* per round, in seconds: task 0 per round trip, task 1 per iteration */
    double t0_alone[TASK0_CONFIGS][MAX_ROUNDS], t1_alone[LOCAL_KINDS][MAX_ROUNDS];
    double t0_with[TASK0_CONFIGS][LOCAL_KINDS][MAX_ROUNDS], t1_with[TASK0_CONFIGS][LOCAL_KINDS][MAX_ROUNDS];
    long pair_mismatches[TASK0_CONFIGS][LOCAL_KINDS];
    FILE *csv; /* rank 0 */
    long mismatches, failed_checks;
} Bench;

/* contention.c */
double now_seconds(void);

/* contention_report.c (rank 0): the table, the CSV rows and the verdict lines. */
void report(Bench *b);
const char *config_label(const Bench *b, Task0Kind c, char *buf, size_t len);

/* contention_pingpong.c */
extern const char *const task0_names[TASK0_CONFIGS];
/* One round trip of the message: rank 0 sends dev_send and receives into dev_recv; rank 1
 * receives into dev_recv and sends it back. */
void task0_round_trip(Bench *b, Task0Kind kind);
/* Buffers, streams, events and datatypes for every variant; and their release. */
void task0_setup(Bench *b);
void task0_teardown(Bench *b);

#endif
