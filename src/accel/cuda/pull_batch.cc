#include "accel/cuda/pull_batch.h"

#include <algorithm>

#include "accel/cuda/copy.h"
#include "util/counters.h"
#include "util/error.h"
#include "util/fault.h"

namespace mpiacc {
namespace cuda {

// An IPC pull that waits for nothing but its own stream, issued while a CopyBatch is
// open: it goes with the batch's other pulls.
bool CopyCompletion::may_defer() const {
    return stream_index_ == kPullStream && deps_.empty() && !by_kernel_ && !at_once_ && device_->pull_batch &&
           CopyBatch::open();
}

void CopyCompletion::defer() {
    deferred_.store(true, std::memory_order_release);
    MPIACC_COUNT("cuda.copy.deferred");
    CopyBatch::hold(device_->pull_batch);
    device_->pull_batch->add(this);
}

void CopyCompletion::flush_batch() { device_->pull_batch->flush(); }

// MPIACC_FAULT_PULL: whether this pull, counted in this process, is to fail.
void CopyCompletion::plan_pull_fault() {
    if (device_->fault_pull.empty()) return;
    static std::atomic<long> pulls{0};
    const long n = ++pulls;
    if (!fault_planned(device_->fault_pull, device_->world_rank, n)) return;
    fault_planned_ = true;
    fault_why_ =
        format("IPC pull %ld of rank %d failed to enqueue on purpose (MPIACC_FAULT_PULL)", n, device_->world_rank);
}

void PullBatch::add(CopyCompletion *copy) {
    bool full;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        members_.push_back(copy);
        full = members_.size() >= kMaxPulls;
    }
    if (full) flush();
}

void PullBatch::remove(CopyCompletion *copy) {
    std::lock_guard<std::mutex> lock(mutex_);
    members_.erase(std::remove(members_.begin(), members_.end(), copy), members_.end());
}

void PullBatch::abandon(CopyCompletion *copy, const std::string &what) {
    copy->fail(what);
    copy->finish();
}

void PullBatch::fail_all(const std::vector<CopyCompletion *> &run, const std::string &what) {
    for (CopyCompletion *c : run) abandon(c, what);
}

bool PullBatch::enqueue_together(const std::vector<CopyCompletion *> &run, cudaStream_t stream) {
#if CUDART_VERSION >= 12080
    if (run.size() < 2 || !batch_call_works_) return false;
    dsts_.clear();
    srcs_.clear();
    sizes_.clear();
    for (const CopyCompletion *c : run) {
        dsts_.push_back(c->dst_);
        srcs_.push_back(const_cast<void *>(c->src_));
        sizes_.push_back(c->len_);
    }
    // Read in stream order, as cudaMemcpyAsync would: after the stream's earlier work.
    cudaMemcpyAttributes attrs{};
    attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    std::size_t attrs_index = 0;
#if CUDART_VERSION >= 13000
    cudaError_t e = quiet(
        cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), run.size(), &attrs, &attrs_index, 1, stream));
#else
    std::size_t fail_index = 0;
    cudaError_t e = quiet(cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), run.size(), &attrs,
                                               &attrs_index, 1, &fail_index, stream));
#endif
    if (e == cudaSuccess) {
        MPIACC_COUNT("cuda.copy.batch");
        return true;
    }
    // An older driver: one call per copy from now on. Any other refusal: one call per
    // copy this time, which names the copy at fault (a copy the batch call had enqueued
    // would only be made twice, which changes no byte).
    if (e == cudaErrorNotSupported || e == cudaErrorCallRequiresNewerDriver) batch_call_works_ = false;
    return false;
#else
    (void)run;
    (void)stream;
    return false;
#endif
}

void PullBatch::flush() {
    std::vector<CopyCompletion *> run;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        run.swap(members_);
    }
    if (run.empty()) return;
    for (CopyCompletion *c : run) c->deferred_.store(false, std::memory_order_release);
    DeviceGuard guard(device_->ordinal, device_->driver.get());
    if (guard.error() != cudaSuccess) {
        fail_all(run, format("cudaSetDevice(%d) for %zu IPC pulls: %s", device_->ordinal, run.size(),
                             cuda_text(guard.error()).c_str()));
        return;
    }
    std::string why;
    std::shared_ptr<EventRef> done = device_->events->acquire(&why);
    if (!done) {
        fail_all(run, why);
        return;
    }
    StreamTracker *tracker = device_->trackers[kPullStream].get();
    cudaStream_t stream = device_->streams[kPullStream];
    std::lock_guard<std::mutex> order(tracker->enqueue_mutex);
    std::vector<CopyCompletion *> enqueued;
    // A planned fault (MPIACC_FAULT_PULL) takes the path of a refused batch call: one call
    // per copy, the faulted one failing alone.
    const bool fault = std::any_of(run.begin(), run.end(), [](const CopyCompletion *c) { return c->fault_planned_; });
    if (!fault && enqueue_together(run, stream)) {
        enqueued = run;
    } else {
        for (CopyCompletion *c : run) {
            if (c->fault_planned_) {
                abandon(c, c->fault_why_);
                continue;
            }
            cudaError_t e = quiet(cudaMemcpyAsync(c->dst_, c->src_, c->len_, cudaMemcpyDefault, stream));
            if (e == cudaSuccess) {
                enqueued.push_back(c);
                continue;
            }
            abandon(c, format("cudaMemcpyAsync for a %zu-byte copy on device %d: %s", c->len_, device_->ordinal,
                              cuda_text(e).c_str()));
        }
    }
    if (enqueued.empty()) return;
    cudaError_t e = quiet(cudaEventRecord(done->get(), stream));
    if (e != cudaSuccess) {
        fail_all(enqueued, format("cudaEventRecord for a %zu-byte copy on device %d: %s", enqueued.back()->len_,
                                  device_->ordinal, cuda_text(e).c_str()));
        return;
    }
    for (CopyCompletion *c : enqueued) c->seq_ = tracker->next();
    const std::uint64_t last = enqueued.back()->seq_;
    tracker->set_tail(last, done);
    for (CopyCompletion *c : enqueued) {
        c->event_seq_ = last;
        c->done_ = done;
        c->deps_.clear();
        c->started_ = true;
    }
}

}  // namespace cuda
}  // namespace mpiacc
