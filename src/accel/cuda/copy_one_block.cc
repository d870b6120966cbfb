// Small device-to-device copies within one GPU by mpiacc_copy_small, one block of
// kKernelCopyThreads that stores the copy's sequence number into the stream's done word
// once its data is visible (copy_kernel.cu): the host sees the end without asking the
// driver, sooner than a copy engine's event tells (docs/performance.md, 'One-block copy
// kernel').
#include "accel/cuda/copy.h"

#include "util/counters.h"

namespace mpiacc {
namespace cuda {

cudaError_t CopyCompletion::launch_one_block() {
    auto *dst = static_cast<uint4 *>(dst_);
    auto *src = static_cast<const uint4 *>(src_);
    unsigned long long len = len_;
    auto *word = reinterpret_cast<unsigned long long *>(&device_->done_words_dev[stream_index_]);
    unsigned long long seq = tracker_->peek_next();
    void *args[] = {&dst, &src, &len, &word, &seq};
    cudaError_t e = quiet(cudaLaunchKernel(reinterpret_cast<const void *>(device_->copy_kernel), dim3(1),
                                           dim3(kKernelCopyThreads), args, 0, stream_));
    if (e == cudaSuccess) MPIACC_COUNT("cuda.copy.kernel");
    return e;
}

}  // namespace cuda
}  // namespace mpiacc
