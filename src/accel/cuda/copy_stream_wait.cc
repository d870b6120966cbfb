// Copies with no event behind them, known done by their stream: a copy a blocking call
// waits for at once with nothing else of ours in flight (CopyUse::WAITED_AT_ONCE), whose
// event record would cost a fair part of a small copy (docs/performance.md, 'Waiting on
// the stream for blocking copies'), and memop writes past their done word's patience.
// Synchronizing the stream then waits for the copy alone. IPC pulls keep their event:
// waited by the stream they ended later (same section).
#include "accel/cuda/copy.h"

#include "util/error.h"

namespace mpiacc {
namespace cuda {

bool CopyCompletion::test_stream() {
    // Waited for at once (no event behind it), yet polled: by the stream, whose later
    // work can only make the answer late, never early.
    cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaErrorNotReady) return false;
    if (e != cudaSuccess)
        fail("cudaStreamQuery after cudaMemcpyAsync: " + cuda_text(quiet(e)));
    else
        tracker_->note_done(seq_);
    return finish();
}

void CopyCompletion::wait_stream() {
    // Nothing of ours was in flight when the copy went on the stream, and it waits for
    // nothing else: synchronizing the stream waits for the copy alone.
    cudaError_t e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) {
        fail("cudaStreamSynchronize after cudaMemcpyAsync: " + cuda_text(quiet(e)));
        finish();
        return;
    }
    tracker_->note_done(seq_);
}

}  // namespace cuda
}  // namespace mpiacc
