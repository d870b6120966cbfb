#include "accel/cuda/copy.h"

#include "accel/cuda/pull_batch.h"
#include "util/counters.h"
#include "util/error.h"
#include "util/probe.h"

namespace mpiacc {
namespace cuda {

namespace {

// A kernel copy is known done by the word it writes into host memory; the driver is asked
// about its event (for a fault that would leave the word unwritten) only once it runs
// this long: a copy of at most 32 KiB takes a few microseconds.
constexpr std::chrono::microseconds kKernelCopyPatience{50};
// A memop write's done word is watched this long before the driver is asked about its
// stream (a fault would keep the word unwritten).
constexpr std::chrono::microseconds kMemopPatience{200};

}  // namespace

CopyCompletion::CopyCompletion(std::shared_ptr<DeviceState> device, const CopyRoute &route, void *dst, const void *src,
                               std::size_t len, std::vector<std::shared_ptr<EventRef>> deps,
                               std::vector<std::shared_ptr<void>> keep)
    : device_(std::move(device)),
      stream_index_(route.stream_index),
      stream_(device_->streams[route.stream_index]),
      tracker_(device_->trackers[route.stream_index].get()),
      dst_(dst),
      src_(src),
      len_(len),
      deps_(std::move(deps)),
      keep_(std::move(keep)),
      bounded_(deps_.empty()),
      by_kernel_(route.one_block_kernel),
      at_once_(route.waited_at_once && bounded_),
      host_orders_(route.host_orders),
      memop_(route.memop),
      resident_offered_(route.offer_resident) {}

CopyCompletion::~CopyCompletion() {
    if (deferred_.load(std::memory_order_acquire)) device_->pull_batch->remove(this);
    if (resident_posted_) device_->resident->abandon(resident_command_);
    uncount_engine_copy();
}

int CopyCompletion::begin(std::string *why) {
    if (stream_index_ == kPullStream) plan_pull_fault();
    if (resident_offered_ && !host_orders_ && deps_.empty() && !fault_planned_ && engines_idle()) {
        if (post_resident()) return MPI_SUCCESS;
        int rc = begin_elsewhere(false, why);
        DeviceGuard guard(device_->ordinal, device_->driver.get());
        if (guard.error() == cudaSuccess) device_->resident->launch_if_idle();
        return rc;
    }
    return begin_elsewhere(host_orders_, why);
}

bool CopyCompletion::test() {
    if (finished_) return true;
    if (resident_posted_ && !resident_resolved()) return false;
    if (finished_) return true;
    return test_elsewhere();
}

void CopyCompletion::wait_bounded() {
    // A resident copy ends, or is declined, within the kernel's idle time (or, should
    // the kernel fault, the copier's patience with its stream).
    while (resident_posted_ && !resident_resolved()) cpu_relax();
    if (finished_) return;
    wait_elsewhere();
}

int CopyCompletion::begin_elsewhere(bool host_orders, std::string *why) {
    count_engine_copy();
    if (!host_orders && may_defer()) {
        defer();
        return MPI_SUCCESS;
    }
    if (!host_orders) return start(why);
    int ready = poll_dependencies();
    if (ready < 0) {
        *why = what_;
        return error_;
    }
    return ready ? start(why) : MPI_SUCCESS;
}

bool CopyCompletion::test_elsewhere() {
    if (deferred_.load(std::memory_order_acquire)) {
        flush_batch();
        if (finished_) return true;
    }
    if (!started_) {
        int ready = poll_dependencies();
        if (ready < 0) return finish();
        if (ready == 0) return false;
        std::string why;
        if (start(&why) != MPI_SUCCESS) return finish();
    }
    if (tracker_->known_done(seq_)) return finish();
    // The done word will tell; the driver is asked (a dear query: stream_tracker.h) only
    // for a copy that takes long, which is also how a fault that keeps the word
    // unwritten comes to light.
    const clock::duration patience = done_word_patience();
    if (patience != clock::duration::zero() && clock::now() - started_at_ < patience) return false;
    if (tracker_->recently_pending(seq_)) return false;
    return done_ ? test_event() : test_stream();
}

// With no dependency the copy only waits for earlier copies on our own stream. The event
// has no blocking-sync flag, so the driver spins, and sees the copy end as soon as a tight
// query loop would.
void CopyCompletion::wait_elsewhere() {
    if (!finished_ && deferred_.load(std::memory_order_acquire)) flush_batch();
    if (finished_ || !started_ || !bounded_ || tracker_->known_done(seq_)) return;
    if (by_kernel_ || memop_written_) {
        spin_on_done_word();
        // A polled memop write has no event, and synchronizing the stream would wait
        // for later copies on it too: test() goes on asking, as for a kernel copy.
        if (by_kernel_ || (memop_ && !at_once_) || tracker_->known_done(seq_)) return;
    }
    if (done_)
        wait_event();
    else
        wait_stream();
}

int CopyCompletion::poll_dependencies() {
    while (!deps_.empty()) {
        cudaError_t e = cudaEventQuery(deps_.back()->get());
        if (e == cudaErrorNotReady) return 0;
        if (e != cudaSuccess) {
            fail("cudaEventQuery on the captured dependency: " + cuda_text(quiet(e)));
            return -1;
        }
        deps_.pop_back();
    }
    return 1;
}

int CopyCompletion::start(std::string *why) {
    if (fault_planned_) {
        fail(fault_why_);
        *why = what_;
        return error_;
    }
    DeviceGuard guard(device_->ordinal, device_->driver.get());
    cudaError_t e = guard.error();
    const char *step = "cudaSetDevice";
    // Once a device's driver has refused a batch, its small copies go to a copy engine.
    if (memop_ && !device_->memop_writes.load(std::memory_order_relaxed)) memop_ = false;
    // A memop write is seen done by its word (test() asks the stream past the patience):
    // no event behind it.
    if (e == cudaSuccess && !at_once_ && !memop_) {
        done_ = device_->events->acquire(why);
        if (!done_) {
            fail(*why);
            return error_;
        }
    }
    std::unique_lock<std::mutex> order(tracker_->enqueue_mutex);
    for (std::size_t i = 0; e == cudaSuccess && i < deps_.size(); ++i) {
        step = "cudaStreamWaitEvent";
        e = quiet(cudaStreamWaitEvent(stream_, deps_[i]->get(), 0));
    }
    if (e == cudaSuccess && memop_) {
        if (!write_words()) {
            // Refused (write_words marked the device): this copy goes to a copy
            // engine with an event, as any other, and like a pageable source only
            // once its dependencies have completed (test() starts it then). The
            // waits just enqueued only repeat what the copy will wait for.
            memop_ = false;
            order.unlock();
            return deps_.empty() ? start(why) : MPI_SUCCESS;
        }
        MPIACC_COUNT("cuda.copy.memop");
    } else if (e == cudaSuccess && by_kernel_) {
        step = "cudaLaunchKernel (mpiacc_copy_small)";
        e = launch_one_block();
    } else if (e == cudaSuccess) {
        step = "cudaMemcpyAsync";
        e = enqueue_on_engine();
    }
    if (e == cudaSuccess && done_) {
        step = "cudaEventRecord";
        e = quiet(cudaEventRecord(done_->get(), stream_));
        MPIACC_PROBE("copy.recorded");
    }
    // Numbered only once on the stream: a failed enqueue leaves no gap behind.
    if (e == cudaSuccess) {
        seq_ = event_seq_ = tracker_->next();
        if (done_) tracker_->set_tail(seq_, done_);
    }
    if (e != cudaSuccess) {
        fail(format("%s for a %zu-byte copy on device %d: %s", step, len_, device_->ordinal, cuda_text(e).c_str()));
        *why = what_;
        return error_;
    }
    // Waits are enqueued: the events may go back to their pools.
    deps_.clear();
    started_ = true;
    if (at_once_) MPIACC_COUNT("cuda.copy.waited_at_once");
    if (by_kernel_ || memop_written_) started_at_ = clock::now();
    return MPI_SUCCESS;
}

CopyCompletion::clock::duration CopyCompletion::done_word_patience() const {
    if (by_kernel_) return kKernelCopyPatience;
    if (memop_written_) return kMemopPatience;
    return clock::duration::zero();
}

void CopyCompletion::spin_on_done_word() {
    // Past the patience, test() asks the driver too, which ends the wait on a fault as well.
    const clock::duration patience = done_word_patience();
    while (!tracker_->known_done(seq_)) {
        cpu_relax();
        if (clock::now() - started_at_ >= patience) break;
    }
}

void CopyCompletion::fail(const std::string &what) {
    error_ = MPI_ERR_OTHER;
    what_ = what;
}

bool CopyCompletion::finish() {
    uncount_engine_copy();
    finished_ = true;
    done_.reset();
    deps_.clear();
    keep_.clear();
    return true;
}

}  // namespace cuda
}  // namespace mpiacc
