// quiet(): a CUDA runtime call's result, with a failure taken back from the thread's
// last error, where the application's own cudaGetLastError() would otherwise find it.
#ifndef MPIACC_ACCEL_CUDA_CUDA_QUIET_H
#define MPIACC_ACCEL_CUDA_CUDA_QUIET_H

#include <cuda_runtime.h>

namespace mpiacc {

inline cudaError_t quiet(cudaError_t e) {
    if (e != cudaSuccess) (void)cudaGetLastError();
    return e;
}

}  // namespace mpiacc

#endif
