/* The failure checks of a benchmark whose code spans several files. bench_common.h's fail()
 * is one per program, so only the file that includes it defines the helpers: it defines
 * BENCH_PARTS_FAIL_DEFINE before including this header; the other files only call them. */
#ifndef BENCH_PARTS_FAIL_H_INCLUDED
#define BENCH_PARTS_FAIL_H_INCLUDED

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

void cuda_fail(cudaError_t e, const char *file, int line, const char *call) __attribute__((noreturn));
void mpi_fail(int rc, const char *file, int line, const char *call) __attribute__((noreturn));

#define CHECK_CUDA(call)                                                 \
    do {                                                                 \
        cudaError_t e_ = (call);                                         \
        if (e_ != cudaSuccess) cuda_fail(e_, __FILE__, __LINE__, #call); \
    } while (0)
#define CHECK_MPI(call)                                                   \
    do {                                                                  \
        int rc_ = (call);                                                 \
        if (rc_ != MPI_SUCCESS) mpi_fail(rc_, __FILE__, __LINE__, #call); \
    } while (0)

#ifdef BENCH_PARTS_FAIL_DEFINE
void cuda_fail(cudaError_t e, const char *file, int line, const char *call) {
    fail("%s:%d: %s failed: %s (%s)", file, line, call, cudaGetErrorString(e), cudaGetErrorName(e));
    exit(1); /* fail() does not return */
}

void mpi_fail(int rc, const char *file, int line, const char *call) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "?");
    fail("%s:%d: %s failed (%d): %s", file, line, call, rc, msg);
    exit(1);
}
#endif

#endif
