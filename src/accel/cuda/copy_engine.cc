// Copies by a copy engine (cudaMemcpyAsync), known done by the event recorded behind them.
#include "accel/cuda/copy.h"

#include "util/probe.h"

namespace mpiacc {
namespace cuda {

cudaError_t CopyCompletion::enqueue_on_engine() {
    MPIACC_PROBE("copy.enqueue");
    cudaError_t e = quiet(cudaMemcpyAsync(dst_, src_, len_, cudaMemcpyDefault, stream_));
    MPIACC_PROBE("copy.enqueued");
    return e;
}

bool CopyCompletion::test_event() {
    cudaError_t e = cudaEventQuery(done_->get());
    if (e == cudaErrorNotReady) {
        tracker_->note_pending(seq_);
        return false;
    }
    if (e != cudaSuccess) {
        fail("cudaEventQuery after cudaMemcpyAsync: " + cuda_text(quiet(e)));
    } else {
        tracker_->note_done(event_seq_);
        tracker_->probe_tail(event_seq_);
    }
    return finish();
}

void CopyCompletion::wait_event() {
    cudaError_t e = cudaEventSynchronize(done_->get());
    if (e != cudaSuccess) {
        fail("cudaEventSynchronize after cudaMemcpyAsync: " + cuda_text(quiet(e)));
        finish();
        return;
    }
    tracker_->note_done(event_seq_);
}

}  // namespace cuda
}  // namespace mpiacc
