/* Task 1 of bench/contention: the local GPU work that shares the GPU with the ping-pong
 * (bench/contention_kernels.cu). Each kind has one unit of work (a kernel launch or one
 * copy); an iteration is `work` units on the kind's stream, then a wait for that stream, so
 * that each iteration's time is the GPU's and `work` sizes it. */
#ifndef BENCH_CONTENTION_KERNELS_H_INCLUDED
#define BENCH_CONTENTION_KERNELS_H_INCLUDED

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    LOCAL_COMPUTE,        /* multiply-adds in registers, on a non-blocking stream */
    LOCAL_GLOBAL,         /* STREAM triad over arrays in global memory, on a non-blocking stream */
    LOCAL_SHARED,         /* reads and writes of shared memory, on a non-blocking stream */
    LOCAL_D2H,            /* cudaMemcpyAsync device to pinned host, on a non-blocking stream */
    LOCAL_H2D,            /* cudaMemcpyAsync pinned host to device, on a non-blocking stream */
    LOCAL_COMPUTE_LEGACY, /* the compute kernel on the legacy default stream (stream 0) */
    LOCAL_KINDS
} LocalKind;

/* The names --locals takes and the CSV writes, in LocalKind's order. */
extern const char *const local_kind_names[LOCAL_KINDS];

/* What task 1 works on: device arrays, a pinned host buffer and its own stream. */
typedef struct {
    size_t array_bytes; /* each of the triad's three arrays */
    size_t copy_bytes;  /* one copy of the D2H and H2D loops */
    double *a, *b, *c;  /* device: the triad's arrays (a also takes the kernels' results) */
    void *dev_copy;     /* device: copy_bytes */
    void *host_copy;    /* pinned host: copy_bytes */
    float *scratch;     /* device: one float per thread of the compute and shared kernels */
    int blocks;         /* of the kernels: enough to fill every multiprocessor */
    cudaStream_t stream;
} LocalWork;

/* Allocates and fills the buffers and creates the stream on the current device; frees them. */
cudaError_t local_work_create(LocalWork *w, size_t array_bytes, size_t copy_bytes);
cudaError_t local_work_destroy(LocalWork *w);

/* One iteration of `kind`: `units` units enqueued, then waited for. */
cudaError_t local_work_iteration(LocalWork *w, LocalKind kind, long units);

/* Checks the last triad's result (a = b + 3 c, every element): 0 when right, else the
 * count of wrong elements (at most the array's length), or -1 when a CUDA call failed. */
long local_work_check_triad(LocalWork *w);

#ifdef __cplusplus
}
#endif

#endif
