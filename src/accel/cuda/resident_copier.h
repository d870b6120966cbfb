// Small copies by a kernel that stays on the GPU (mpiacc_resident_copy in copy_kernel.cu),
// fed through a ring in pinned host memory (resident_ring.h): IPC pulls into the GPU's
// memory, and copies between its memory and pinned staging memory (cuda_buffer.cc,
// CudaBuffer::route_copy).
//
// A copy engine's copy of a few bytes spends nearly all its time getting the work onto
// the GPU and its end back; a running kernel that polls the ring takes a posted copy in
// one host-memory round trip and says it is done in another (docs/performance.md,
// 'Resident copy kernel'). The kernel leaves after an idle time without a copy, so that
// it holds one warp of one SM only while small copies come, and an application's
// cudaDeviceSynchronize or cudaFree waits at most that long for it.
//
// A copy goes to the ring only while the kernel is known to run (it said so after its
// launch) and no other copy is on it: the kernel serves the latency of a lone pull, and
// copy engines, which batch them, the rest of a window. Otherwise the caller copies
// another way and asks for a launch, for the copies after it. The kernel alone decides
// when to leave and takes no copy after that, so each posted copy ends one of two ways:
// done, or declined (the kernel left first), and then the caller copies it another way.
#ifndef MPIACC_ACCEL_CUDA_RESIDENT_COPIER_H
#define MPIACC_ACCEL_CUDA_RESIDENT_COPIER_H

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accel/cuda/resident_ring.h"

namespace mpiacc {

// Microseconds the kernel waits for a copy before it leaves: longer than the gap between
// the small copies of a burst, short enough that a synchronizing application hardly
// notices it.
constexpr long kResidentIdleMicroseconds = 25;

struct ResidentCopierSettings {
    long idle_us = kResidentIdleMicroseconds;
    // MPIACC_FAULT_RESIDENT: the commands it names (counted per device) are posted so that
    // the kernel cannot read them, and the kernel is asked to leave: they are declined.
    std::string fault_spec;
    int world_rank = 0;
};

class ResidentCopier {
public:
    using Settings = ResidentCopierSettings;

    // Where the kernel runs: the GPU (create()), or a test's stand-in that plays the
    // kernel's part of the protocol on the same ring.
    class Device {
    public:
        virtual ~Device() = default;
        // Launches the kernel, taking commands from `next` on (see copy_kernel.cu).
        virtual bool launch(std::uint64_t next, std::uint64_t idle_ns, std::uint64_t life_ns, std::uint64_t gen) = 0;
        // Whether every kernel launched has ended, and how.
        enum class Ended { NO, YES, FAULTED };
        virtual Ended ended() = 0;
        // Waits until every kernel launched has ended.
        virtual void synchronize() = 0;
    };

    // With the device current: the ring in pinned memory mapped into the device, and a
    // stream of the greatest priority. Null (and *why) when either cannot be had.
    static std::unique_ptr<ResidentCopier> create(int ordinal, cudaKernel_t kernel, const Settings &settings,
                                                  std::string *why);
    // `ring` (zeroed, outliving the copier) as `device`'s kernel sees it.
    ResidentCopier(mpiacc_resident_ring *ring, std::unique_ptr<Device> device, Settings settings = Settings());
    // With the device current: tells a running kernel to leave and waits for it.
    ~ResidentCopier();
    ResidentCopier(const ResidentCopier &) = delete;
    ResidentCopier &operator=(const ResidentCopier &) = delete;

    // Posts a copy of `len` bytes if the kernel runs and has nothing else; `keep` (e.g. the
    // IPC mapping read from) is held until the copy is resolved, even if its caller goes.
    // False: copy it another way, then call launch_if_idle(). Settings::fault_spec names
    // commands that are declined on purpose.
    bool post(void *dst, const void *src, std::size_t len, const std::vector<std::shared_ptr<void>> &keep,
              std::uint64_t *command);
    // With the device current: launches the kernel unless one is launched and has not left.
    void launch_if_idle();
    // New settings, for the launches and posts after this call.
    void configure(const Settings &settings);

    enum class State { PENDING, DONE, DECLINED };
    // DONE and DECLINED are said once; the slot is free after either.
    State poll(std::uint64_t command);
    // The caller goes before its copy was resolved: the slot and what it keeps are let go
    // once it is.
    void abandon(std::uint64_t command);

private:
    struct Record {
        bool busy = false;
        bool declined = false;
        bool abandoned = false;
        std::uint64_t command = 0;
        std::chrono::steady_clock::time_point posted_at;
        std::vector<std::shared_ptr<void>> keep;
    };

    std::uint64_t done_word(std::uint64_t command) const {
        return __atomic_load_n(&ring_->done[command % MPIACC_RESIDENT_SLOTS].word[0], __ATOMIC_ACQUIRE);
    }
    // Under mutex_: whether the kernel of the current generation has left; if it has, every
    // busy record at or past the command it stopped at is declined, and records that were
    // abandoned and are now resolved are freed.
    void refresh();
    // Under mutex_: whether the launched kernel has stopped without a word (a fault): its
    // device says so. Then every busy record is declined, and no kernel is launched again.
    void check_device();
    void release(Record &r);

    std::mutex mutex_;
    Settings settings_;               // under mutex_
    mpiacc_resident_ring *ring_;      // as the host addresses it
    std::unique_ptr<Device> device_;  // owns the ring where create() made it
    std::uint64_t posted_ = 0;        // commands numbered so far
    std::uint64_t gen_ = 0;           // the latest launch's generation
    bool launched_ = false;           // gen_'s kernel may run: its exit not yet seen
    bool broken_ = false;             // a launch failed: no more
    std::size_t abandoned_ = 0;
    std::size_t in_flight_ = 0;  // busy records
    Record records_[MPIACC_RESIDENT_SLOTS];
};

}  // namespace mpiacc

#endif
