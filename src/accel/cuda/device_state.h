// What the CUDA component keeps per device, made on first use: streams and what is known
// of their copies, event pools, the pinned staging pool, the small-copy kernels' state,
// and the pull batch. Buffers share it, so it outlives shutdown() until the last buffer
// and copy are gone.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accel/accel.h"
#include "accel/cuda/driver.h"
#include "accel/cuda/events.h"
#include "accel/cuda/pinned_memory.h"
#include "accel/cuda/resident_copier.h"
#include "accel/cuda/stream_tracker.h"
#include "pool/pinned_pool.h"

namespace mpiacc {
namespace cuda {

class CopyKernels;
class PullBatch;

// Stream pairs per device. A buffer takes one pair for its copies (double buffering,
// BRIEF S4); four pairs let four concurrent transfers per device overlap without any of
// them queueing behind another's copies.
constexpr unsigned kStreamPairs = 4;
// After the pairs, one more stream per device takes every IPC pull. Pulls then run one
// after another in the order they were issued, as the raw IPC anchor's do: interleaved on
// the pairs, a window of large pulls fell behind it (docs/performance.md, 'Batched IPC
// pulls').
constexpr unsigned kPullStream = 2 * kStreamPairs;

struct DeviceState {
    int ordinal = -1;
    std::shared_ptr<const DriverApi> driver;
    std::unique_ptr<PinnedPool> staging;
    std::shared_ptr<EventPool> events;                     // plain
    std::shared_ptr<EventPool> ipc_events;                 // interprocess
    std::vector<cudaStream_t> streams;                     // kStreamPairs pairs, then the pull stream; non-blocking
    std::vector<std::unique_ptr<StreamTracker>> trackers;  // one per stream
    std::atomic<unsigned> next_pair{0};
    // Small copies by kernel (copy_kernel.cu): null when the kernels are not built in or
    // did not load; then every copy goes to a copy engine.
    cudaKernel_t copy_kernel = nullptr;
    // Payloads of at most kMemopMaxBytes from host memory go into device memory as stream
    // memory writes of their words, with the done word written behind them, in one
    // cuStreamBatchMemOp (needs 64-bit stream memory operations).
    std::atomic<bool> memop_writes{false};
    // IPC pulls deferred in an open CopyBatch, enqueued together on the pull stream; null
    // where cudaMemcpyBatchAsync is missing (runtime or driver before 12.8).
    std::shared_ptr<PullBatch> pull_batch;
    // The device's place on the PCI bus (pci_location()): how a peer process tells
    // whether memory it maps lives on the GPU it runs on.
    std::int32_t pci_location = -1;
    std::uint64_t *done_words = nullptr;      // pinned, mapped: one per stream (StreamTracker)
    std::uint64_t *done_words_dev = nullptr;  // the same words as the device addresses them
    // Small copies this device's kernel can make (resident_copier.h): IPC pulls into its
    // memory, and copies between its memory (or a peer's it reads) and pinned staging
    // memory. Null where the kernels are not built in or MPIACC_CUDA_KERNEL_COPY_MAX=0.
    std::unique_ptr<ResidentCopier> resident;
    // Registered host memory is at its host address on this device too
    // (cudaDevAttrCanUseHostPointerForRegisteredMem): then `resident` may take copies to
    // and from the pinned memory that PinnedRanges knows (all of it mapped).
    bool host_at_own_address = false;
    // Contexts on this device are shared through MPS (cudaDevAttrMpsEnabled).
    bool mps = false;
    // Another process works on this GPU (a peer's IPC region lives in its memory) and the
    // device is not shared through MPS: the GPU time-slices between the processes'
    // contexts, and the resident copier's spinning warp takes the other rank's slices
    // (docs/performance.md, 'Resident copy kernel'). Set once, for good: small copies then
    // go to the copy engines.
    std::atomic<bool> time_sliced{false};
    // Copies enqueued (or waiting in pull_batch) on copy engines whose owners have not yet
    // seen them end, of those that could have gone to `resident` (IPC pulls, and copies
    // offered to it): while there are any, none goes to `resident`.
    std::atomic<long> engine_copies{0};
    // MPIACC_FAULT_PULL and MPIACC_FAULT_MEMOP (AccelSettings), and this process's world
    // rank, for the copies that fail on purpose; configure() keeps them current.
    std::string fault_pull, fault_memop;
    int world_rank = 0;
    // Copies between pageable host memory and a datatype's device scratch, issued only
    // once what they read is ready, so that they never wait behind a user's work
    // (typed_copy.cc). Made on first use.
    std::mutex ready_mutex;
    cudaStream_t ready_stream = nullptr;

    DeviceState() = default;
    DeviceState(const DeviceState &) = delete;
    DeviceState &operator=(const DeviceState &) = delete;
    ~DeviceState();

    // New settings for what is read while copies run (fault specs, rank, resident copier).
    void configure(const AccelSettings &settings);
};

// What a device's state is made from, beside its ordinal.
struct DeviceSetup {
    std::shared_ptr<const DriverApi> driver;
    std::shared_ptr<PinnedRanges> pinned;
    CopyKernels *kernels = nullptr;
    const AccelSettings *settings = nullptr;
};

// Makes device `ordinal`'s state: its streams, kernels and staging. Null with *why when a
// stream cannot be made.
std::shared_ptr<DeviceState> make_device_state(int ordinal, const DeviceSetup &setup, std::string *why);

}  // namespace cuda
}  // namespace mpiacc
