#include "accel/cuda/reduce.h"

#include <algorithm>

#include "accel/cuda/driver.h"
#include "config.h"
#include "util/error.h"

#if MPIACC_HAVE_CUDA_KERNELS
#include "accel/cuda/reduce_kernel_fatbin.h"  // generated from reduce_kernel.cu
#endif

namespace mpiacc {
namespace cuda {

namespace {

constexpr unsigned kThreadsPerBlock = 256;  // MPIACC_REDUCE_THREADS in reduce_kernel.cu
// Grid-stride loops cover the rest: a grid this large fills any current GPU.
constexpr std::uint64_t kMaxBlocks = 4096;

}  // namespace

bool ReduceKernels::load(std::string *why) {
    std::call_once(once_, [this] {
#if MPIACC_HAVE_CUDA_KERNELS
        cudaLibrary_t library = nullptr;
        cudaError_t e =
            quiet(cudaLibraryLoadData(&library, mpiacc_reduce_kernel_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0));
        std::string name = "the reduction kernels' fatbin";
        for (int k = 0; k < kReduceElems && e == cudaSuccess; ++k) {
            name = std::string("mpiacc_reduce_") + reduce_elem_word(static_cast<ReduceElem>(k));
            e = quiet(cudaLibraryGetKernel(&kernels_[k], library, name.c_str()));
        }
        if (e != cudaSuccess)
            why_none_ = format("reduction kernels: loading %s: %s", name.c_str(), cuda_text(e).c_str());
#else
        why_none_ = "reduction kernels: not built (configure found no nvcc)";
#endif
    });
    if (!why_none_.empty()) {
        *why = why_none_;
        return false;
    }
    return true;
}

int ReduceKernels::enqueue(const ReduceSpec &spec, const void *in, void *inout, std::int64_t count, cudaStream_t stream,
                           std::string *why) {
    if (count <= 0) return MPI_SUCCESS;
    if (!load(why)) return MPI_ERR_UNSUPPORTED_OPERATION;
    const auto n = static_cast<unsigned long long>(count);
    int op = static_cast<int>(spec.op);
    const std::uint64_t blocks = std::min<std::uint64_t>((n + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks);
    void *params[] = {&in, &inout, const_cast<unsigned long long *>(&n), &op};
    const cudaKernel_t kernel = kernels_[static_cast<int>(spec.elem)];
    cudaError_t e = quiet(cudaLaunchKernel(reinterpret_cast<const void *>(kernel), dim3(static_cast<unsigned>(blocks)),
                                           dim3(kThreadsPerBlock), params, 0, stream));
    if (e != cudaSuccess) {
        *why = format("%s on %s: cudaLaunchKernel (mpiacc_reduce_%s): %s", spec.op_name.c_str(), spec.type_name.c_str(),
                      reduce_elem_word(spec.elem), cuda_text(e).c_str());
        return MPI_ERR_OTHER;
    }
    return MPI_SUCCESS;
}

}  // namespace cuda
}  // namespace mpiacc
