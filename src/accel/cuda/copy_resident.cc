// Small copies posted to the device's resident copier (resident_copier.h): tried first
// while its kernel runs and no copy that it could have taken is on a copy engine; a copy
// it declines goes to a copy engine or a kernel launch, as if never offered.
#include "accel/cuda/copy.h"

#include "util/counters.h"

namespace mpiacc {
namespace cuda {

// Posted to the resident copier: true once the copy is done (finished) or declined
// (then it goes to a copy engine or a kernel launch, as if never offered).
bool CopyCompletion::resident_resolved() {
    switch (device_->resident->poll(resident_command_)) {
        case ResidentCopier::State::PENDING: return false;
        case ResidentCopier::State::DONE:
            resident_posted_ = false;
            finish();
            return true;
        case ResidentCopier::State::DECLINED: break;
    }
    resident_posted_ = false;
    started_ = false;
    count_engine_copy();
    std::string why;
    if (start(&why) != MPI_SUCCESS) finish();
    return true;
}

void CopyCompletion::count_engine_copy() {
    if ((stream_index_ != kPullStream && !resident_offered_) || counted_engine_) return;
    counted_engine_ = true;
    device_->engine_copies.fetch_add(1, std::memory_order_relaxed);
}

void CopyCompletion::uncount_engine_copy() {
    if (!counted_engine_) return;
    counted_engine_ = false;
    device_->engine_copies.fetch_sub(1, std::memory_order_relaxed);
}

// No other pull, or copy the resident copier could have taken, of this device is on a
// copy engine (or waiting in pull_batch) with its end not yet seen: then this one goes
// alone, and the resident copier is fastest. A copy of a window that finds others in
// flight goes with them to the copy engines, which overlap them: windows of small pulls
// ran slower where the copier took each pull that found it free (docs/performance.md,
// 'Resident copy kernel').
bool CopyCompletion::engines_idle() const { return device_->engine_copies.load(std::memory_order_relaxed) == 0; }

bool CopyCompletion::post_resident() {
    std::uint64_t command;
    if (!device_->resident->post(dst_, src_, len_, keep_, &command)) return false;
    resident_command_ = command;
    resident_posted_ = true;
    started_ = true;
    MPIACC_COUNT("cuda.copy.resident");
    if (stream_index_ == kPullStream) MPIACC_COUNT("cuda.copy.resident_pull");
    return true;
}

}  // namespace cuda
}  // namespace mpiacc
