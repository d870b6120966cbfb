/* How the applications take their CUDA device and stop on a failed CUDA call: every rank ends, after a message naming
 * the program (kProgram, which each application defines), the call, its error and the place. */
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <mpiacc.h>
#include <stdio.h>

static inline void app_cuda_fail(const char *program, cudaError_t err, const char *call, const char *file, int line) {
    fprintf(stderr, "%s: %s failed with %s (%s) (%s:%d)\n", program, call, cudaGetErrorName(err),
            cudaGetErrorString(err), file, line);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#define CUDA_CHECK(call)                                                                                         \
    do {                                                                                                         \
        cudaError_t cuda_check_err_ = (call);                                                                    \
        if (cuda_check_err_ != cudaSuccess) app_cuda_fail(kProgram, cuda_check_err_, #call, __FILE__, __LINE__); \
    } while (0)

/* The CUDA device an application rank takes: the local rank's modulo the count, so that the
 * ranks of one node spread over its GPUs. 0 where MPI-ACC or this node has no CUDA device. */
static inline int app_cuda_device(int local_rank, int *device) {
    int count = 0;
    if (!MPIX_Query_cuda_support() || cudaGetDeviceCount(&count) != cudaSuccess || count < 1) return 0;
    *device = local_rank % count;
    return 1;
}
