// The IPC pulls of one device deferred in open CopyBatches (accel.h), enqueued on its pull
// stream by one cudaMemcpyBatchAsync with one event behind them: one call for a window's
// pulls costs far less CPU than one call each, and the copies run faster together
// (docs/performance.md, 'Batched IPC pulls'). The pulls then complete together, which a
// window waits for anyway.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "accel/accel.h"

namespace mpiacc {
namespace cuda {

class CopyCompletion;
struct DeviceState;

class PullBatch final : public CopyBatch::Holder {
public:
    explicit PullBatch(DeviceState *device) : device_(device) {}

    void add(CopyCompletion *copy);
    void remove(CopyCompletion *copy);
    void flush() override;

private:
    // Past this many pulls the CPU cost a copy hardly falls, and the first pull's receive
    // waits for the whole batch.
    static constexpr std::size_t kMaxPulls = 32;

    // Whether one batch call took the copies; false leaves them to one call each.
    bool enqueue_together(const std::vector<CopyCompletion *> &run, cudaStream_t stream);
    // The copy ends, failed, without having been enqueued.
    static void abandon(CopyCompletion *copy, const std::string &what);
    void fail_all(const std::vector<CopyCompletion *> &run, const std::string &what);

    DeviceState *device_;  // owns this batch
    std::mutex mutex_;
    std::vector<CopyCompletion *> members_;  // in issue order
    bool batch_call_works_ = true;           // until the driver says it has no batch call
    std::vector<void *> dsts_, srcs_;        // scratch for the batch call
    std::vector<std::size_t> sizes_;
};

}  // namespace cuda
}  // namespace mpiacc
