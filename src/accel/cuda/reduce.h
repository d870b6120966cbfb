// Reductions on CUDA memory (MPI_Reduce_local): the launcher of reduce_kernel.cu's
// kernels, one per element kind, loaded once from the embedded fatbin as the pack
// kernels are.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "accel/reduce_op.h"

namespace mpiacc {
namespace cuda {

class ReduceKernels {
public:
    // inout[i] = in[i] op inout[i] for `count` elements, in order on `stream`, whose
    // device must be current. Returns at once. An MPI error class with *why;
    // MPI_ERR_UNSUPPORTED_OPERATION when the kernels are not built in or did not load.
    int enqueue(const ReduceSpec &spec, const void *in, void *inout, std::int64_t count, cudaStream_t stream,
                std::string *why);

private:
    bool load(std::string *why);

    std::once_flag once_;
    std::string why_none_;
    cudaKernel_t kernels_[kReduceElems] = {};
};

}  // namespace cuda
}  // namespace mpiacc
