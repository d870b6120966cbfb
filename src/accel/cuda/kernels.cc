#include "accel/cuda/kernels.h"

#include "accel/cuda/driver.h"
#include "config.h"
#include "util/error.h"

#if MPIACC_HAVE_CUDA_KERNELS
#include "accel/cuda/copy_kernel_fatbin.h"  // generated from copy_kernel.cu
#endif

namespace mpiacc {
namespace cuda {

void CopyKernels::load() {
    std::call_once(once_, [this] {
#if MPIACC_HAVE_CUDA_KERNELS
        cudaLibrary_t library = nullptr;
        cudaError_t e =
            quiet(cudaLibraryLoadData(&library, mpiacc_copy_kernel_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0));
        const char *name = "mpiacc_copy_small";
        if (e == cudaSuccess) e = quiet(cudaLibraryGetKernel(&small_copy_, library, name));
        if (e == cudaSuccess) {
            name = "mpiacc_resident_copy";
            e = quiet(cudaLibraryGetKernel(&resident_copy_, library, name));
        }
        if (e != cudaSuccess) {
            small_copy_ = resident_copy_ = nullptr;
            why_none_ = format("loading %s: %s", name, cuda_text(e).c_str());
        }
#else
        why_none_ = "not built (configure found no nvcc)";
#endif
    });
}

}  // namespace cuda
}  // namespace mpiacc
