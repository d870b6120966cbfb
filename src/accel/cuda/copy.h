// One asynchronous copy on an internal stream, ordered after its dependencies, and how
// its caller learns that it ended. The buffer chooses the mechanism once
// (CudaBuffer::route_copy, as a CopyRoute); each mechanism's code is in a file of its own:
//   copy_engine.cc       a copy engine (cudaMemcpyAsync) and an event recorded behind it
//   copy_stream_wait.cc  no event: the stream itself is asked or synchronized, for a copy
//                        a blocking call waits for at once and for memop writes
//   copy_memop.cc        small host payloads written by stream memory operations
//   copy_one_block.cc    small copies within one GPU by the one-block kernel
//   copy_resident.cc     small copies posted to the resident copy kernel
//   pull_batch.cc        IPC pulls enqueued together by one cudaMemcpyBatchAsync
// Kernel copies and memop writes store the copy's sequence number into the stream's done
// word in pinned memory, so that the host sees their end without asking the driver.
//
// With pinned (or device) memory on both sides the copy is enqueued at once behind
// cudaStreamWaitEvent. cudaMemcpyAsync with pageable host memory blocks the caller until
// the stream reaches the copy, i.e. until the user's kernel is done: so such a copy is
// enqueued only once test() has seen its dependencies complete, and then blocks only for
// the copy itself.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "accel/accel.h"
#include "accel/cuda/device_state.h"
#include "accel/cuda/events.h"

namespace mpiacc {
namespace cuda {

// The largest host payload written into device memory by stream memory operations. Each
// write is fenced, so a few words beat a copy engine and more lose to it
// (docs/performance.md, 'Small host payloads as memory writes').
constexpr std::size_t kMemopMaxBytes = 16;

// The largest copy mpiacc_copy_small moves in its one block (copy_kernel.cu: 256 threads,
// 8 vectors of 16 bytes each), and its block size.
constexpr std::size_t kKernelCopyLimit = 256 * 8 * 16;
constexpr unsigned kKernelCopyThreads = 256;

// How one copy runs.
struct CopyRoute {
    std::size_t stream_index = 0;   // one stream of the buffer's pair, or kPullStream for an IPC pull
    bool one_block_kernel = false;  // by mpiacc_copy_small (copy_one_block.cc)
    bool memop = false;             // by stream memory writes of the host words (copy_memop.cc)
    // CopyUse::WAITED_AT_ONCE with no dependency, not a pull: no event behind it
    // (copy_stream_wait.cc).
    bool waited_at_once = false;
    bool offer_resident = false;  // to the resident copier first, while its kernel runs (copy_resident.cc)
    // The host side is pageable: enqueued only once test() sees the dependencies done.
    bool host_orders = false;
};

class CopyCompletion final : public Completion {
public:
    CopyCompletion(std::shared_ptr<DeviceState> device, const CopyRoute &route, void *dst, const void *src,
                   std::size_t len, std::vector<std::shared_ptr<EventRef>> deps,
                   std::vector<std::shared_ptr<void>> keep);
    ~CopyCompletion() override;

    // Enqueue now, or (host_orders) once the dependencies have completed, or (a pull in
    // an open CopyBatch) with the other pulls of the batch; a copy offered to the
    // resident copier goes there if its kernel runs, and otherwise launches it for the
    // copies after this one. Fails only on an error to report at once.
    int begin(std::string *why);

    bool test() override;
    int error() const override { return error_; }
    std::string what() const override { return what_; }
    void wait_bounded() override;

private:
    friend class PullBatch;
    using clock = std::chrono::steady_clock;

    // copy.cc: the state machine every mechanism shares.
    int begin_elsewhere(bool host_orders, std::string *why);
    bool test_elsewhere();
    void wait_elsewhere();
    // 1: all reached, 0: some pending, -1: one failed (error_ set).
    int poll_dependencies();
    // Enqueues the copy by its mechanism behind its dependencies, with its event.
    int start(std::string *why);
    // Kernel copies and memop writes: how long the done word is watched before the
    // driver is asked (zero for other copies), and the spin on it.
    clock::duration done_word_patience() const;
    void spin_on_done_word();
    void count_engine_copy();
    void uncount_engine_copy();
    void fail(const std::string &what);
    bool finish();

    // copy_engine.cc
    cudaError_t enqueue_on_engine();
    bool test_event();
    void wait_event();
    // copy_stream_wait.cc
    bool test_stream();
    void wait_stream();
    // copy_memop.cc: false when the driver refused the write (the device then stops trying).
    bool write_words();
    static bool memop_fault_planned(const DeviceState &device);
    // copy_one_block.cc
    cudaError_t launch_one_block();
    // copy_resident.cc
    bool engines_idle() const;
    bool post_resident();
    bool resident_resolved();
    // pull_batch.cc
    bool may_defer() const;
    void defer();
    void flush_batch();
    void plan_pull_fault();

    std::shared_ptr<DeviceState> device_;
    std::size_t stream_index_;
    cudaStream_t stream_;
    StreamTracker *tracker_;       // owned by device_
    std::uint64_t seq_ = 0;        // this copy's place on the stream
    std::uint64_t event_seq_ = 0;  // the copy done_ is recorded behind: seq_, or its batch's last
    void *dst_;
    const void *src_;
    std::size_t len_;
    std::vector<std::shared_ptr<EventRef>> deps_;
    std::vector<std::shared_ptr<void>> keep_;  // e.g. the IPC mapping read from
    std::shared_ptr<EventRef> done_;
    const bool bounded_;  // no user or peer dependency: ends within its own running time
    const bool by_kernel_;
    const bool at_once_;              // CopyUse::WAITED_AT_ONCE, bounded: no event behind it
    const bool host_orders_;          // CopyRoute::host_orders
    bool memop_;                      // host words written by stream memory operations
    bool memop_written_ = false;      // the memop write was enqueued: its done word tells
    clock::time_point started_at_{};  // kernel copies and memop writes: when it was enqueued
    bool started_ = false;
    bool finished_ = false;
    std::atomic<bool> deferred_{false};  // held by device_->pull_batch, not yet enqueued
    bool resident_offered_ = false;      // CopyRoute::offer_resident
    bool counted_engine_ = false;        // in device_->engine_copies
    bool resident_posted_ = false;       // on the resident copier's ring, not yet resolved
    std::uint64_t resident_command_ = 0;
    bool fault_planned_ = false;  // MPIACC_FAULT_PULL chose this pull
    std::string fault_why_;
    int error_ = MPI_SUCCESS;
    std::string what_;
};

}  // namespace cuda
}  // namespace mpiacc
