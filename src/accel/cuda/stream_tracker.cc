#include "accel/cuda/stream_tracker.h"

namespace mpiacc {
namespace cuda {

void StreamTracker::probe_tail(std::uint64_t seq) {
    std::shared_ptr<EventRef> tail;
    std::uint64_t tail_seq;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (tail_seq_ <= seq + 1 || known_done(tail_seq_)) return;
        tail = tail_;
        tail_seq = tail_seq_;
    }
    if (!tail) return;
    cudaError_t e = cudaEventQuery(tail->get());
    if (e == cudaSuccess)
        note_done(tail_seq);
    else if (e != cudaErrorNotReady)
        quiet(e);  // the copy's own query reports it
}

}  // namespace cuda
}  // namespace mpiacc
