/* CK(call): a CUDA runtime call that must succeed in the maint/diag tools without MPI;
 * on failure it names the call and the error and exits. CKD(call): the same for a driver
 * API call (cuda.h). */
#ifndef MPIACC_DIAG_CUDA_CHECK_H
#define MPIACC_DIAG_CUDA_CHECK_H
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#define CKD(x)                                                             \
    do {                                                                   \
        CUresult r_ = (x);                                                 \
        if (r_ != CUDA_SUCCESS) {                                          \
            fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, r_); \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

#endif
