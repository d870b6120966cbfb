// Small host payloads into device memory as stream memory writes of their words
// (cuStreamBatchMemOp), with the stream's done word written behind them: no copy engine
// to launch, and the end seen in host memory. Up to kMemopMaxBytes, in whole 4-byte
// words at 4-byte device addresses (CudaBuffer::route_copy).
#include <cstring>

#include "accel/cuda/copy.h"
#include "util/counters.h"
#include "util/fault.h"
#include "util/probe.h"

namespace mpiacc {
namespace cuda {

// MPIACC_FAULT_MEMOP: whether this memop write, counted in this process, is to be refused.
bool CopyCompletion::memop_fault_planned(const DeviceState &device) {
    if (device.fault_memop.empty()) return false;
    static std::atomic<long> writes{0};
    return fault_planned(device.fault_memop, device.world_rank, ++writes);
}

// The payload's words, read from host memory now, and the stream's done word behind
// them, in one cuStreamBatchMemOp. Each write is fenced (the only kind the v2 API has),
// so the done word is seen after the payload's. False when the driver refuses it, and the
// device's later copies do not try again.
bool CopyCompletion::write_words() {
    CUstreamBatchMemOpParams ops[kMemopMaxBytes / 4 + 1];
    std::memset(ops, 0, sizeof ops);
    unsigned n = 0;
    const auto dst = reinterpret_cast<CUdeviceptr>(dst_);
    const auto *src = static_cast<const unsigned char *>(src_);
    for (std::size_t at = 0; at < len_; ++n) {
        ops[n].writeValue.address = dst + at;
        ops[n].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
        if ((dst + at) % 8 == 0 && len_ - at >= 8) {
            ops[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
            std::memcpy(&ops[n].writeValue.value64, src + at, 8);
            at += 8;
        } else {
            ops[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
            std::memcpy(&ops[n].writeValue.value, src + at, 4);
            at += 4;
        }
    }
    ops[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[n].writeValue.address = reinterpret_cast<CUdeviceptr>(&device_->done_words_dev[stream_index_]);
    ops[n].writeValue.value64 = tracker_->peek_next();
    ops[n].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    ++n;
    MPIACC_PROBE("copy.enqueue");
    const CUresult r = memop_fault_planned(*device_)
                           ? CUDA_ERROR_NOT_SUPPORTED
                           : device_->driver->stream_batch_mem_op(reinterpret_cast<CUstream>(stream_), n, ops, 0);
    MPIACC_PROBE("copy.enqueued");
    if (r != CUDA_SUCCESS) {
        MPIACC_COUNT("cuda.copy.memop_refused");
        device_->memop_writes.store(false, std::memory_order_relaxed);
        return false;
    }
    memop_written_ = true;
    return true;
}

}  // namespace cuda
}  // namespace mpiacc
