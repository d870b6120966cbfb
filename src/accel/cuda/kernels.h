// The copy kernels of copy_kernel.cu, embedded in the library as a fatbin and loaded on
// first use with cudaLibraryLoadData: nothing registers with the driver when the library
// loads, so a process without a driver still loads libmpiacc.
#pragma once

#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

namespace mpiacc {
namespace cuda {

class CopyKernels {
public:
    // Loads both kernels once, for every device (a cudaLibrary_t is not tied to a
    // context). Never unloaded: a copy abandoned at MPI_Finalize may still run one, and
    // the driver frees its modules with the contexts.
    void load();
    // mpiacc_copy_small and mpiacc_resident_copy; null before load(), or if they are not
    // built in or did not load.
    cudaKernel_t small_copy() const { return small_copy_; }
    cudaKernel_t resident_copy() const { return resident_copy_; }
    // Why there are none ("" when they loaded).
    const std::string &why_none() const { return why_none_; }

private:
    std::once_flag once_;
    cudaKernel_t small_copy_ = nullptr;
    cudaKernel_t resident_copy_ = nullptr;
    std::string why_none_;
};

}  // namespace cuda
}  // namespace mpiacc
