// The IPC pull (DESIGN.md 2.4): the sender's device memory is mapped here and copied
// into the receive buffer, or into pinned slots and out of them for host memory; the FIN
// (a word in the sender's shared memory, or a message) releases the sender's buffer.
#include <algorithm>
#include <cstring>

#include "core/context.h"
#include "pool/pinned_pool.h"
#include "protocol/transfer.h"
#include "util/counters.h"
#include "util/error.h"
#include "util/probe.h"

namespace mpiacc {

// The sender's component when a pull could serve this receive: the envelope offers one
// from this node, IPC is on, and the receive is device memory of the sender's kind, or
// host memory in a process that already works with that device (a host-only rank gets no
// context, hundreds of MiB, from a message). Null otherwise, and for a derived datatype
// on a device buffer, which declines the pull so that the sender stages.
Accel *RecvOp::pull_source(const Envelope &env) const {
    const Context &ctx = context();
    const auto sender_kind = static_cast<BufKind>(env.buf_kind);
    if (!(env.flags & kEnvelopeHasIpc) || env.node_id != ctx.node_id || !ctx.knobs.ipc || !accel_caps(sender_kind).ipc)
        return nullptr;
    // A non-contiguous type on a device is unpacked from host memory: the sender stages.
    if (dest_.device && !dest_.device->holds_plain_bytes()) return nullptr;
    Accel *accel = accel_for(sender_kind);
    if (!accel || !accel->available()) return nullptr;
    if (dest_.kind == sender_kind || (dest_.kind == BufKind::HOST && accel->device_in_use())) return accel;
    return nullptr;
}

// A blocking receive into host memory waits for this message alone. A small one comes
// sooner by the sender's own device-to-host copy and an eager payload than pulled across
// the devices (docs/performance.md, "Declining small pulls"), so it declines a sender
// that then stages its next small sends here, and says why in the CTS: nonblocking
// receives keep pulling (a window of pulls overlaps, where staged sends each wait for
// their copy at the call).
bool RecvOp::declines_small_pull(const Envelope &env) const {
    return dest_.kind == BufKind::HOST && blocking_ && (env.flags & kEnvelopeStagesAfterDecline) &&
           env.size <= context().knobs.device_eager_max;
}

bool RecvOp::pull_can_serve(const Envelope & /*env*/) const { return pull_source_ && !declined_small_; }

// Into host memory, a pull is one device-to-host copy. Straight into (usually pageable)
// memory it only pays from kPullIntoHostMin (docs/performance.md, "Pulls into host
// memory"). Below that, or into a non-contiguous type, it goes through pinned slots and
// a copy out of each: one copy on the device and one on the host, as staging by hand,
// without the pipeline's CTS round trip first. False when the sender's region cannot be
// mapped here (nothing was pulled).
bool RecvOp::start_pull(const Envelope &env) {
    constexpr std::size_t kPullIntoHostMin = 2u << 20;
    pull_through_slots_ = dest_.kind == BufKind::HOST && !(dest_.contiguous_host() && bytes_ >= kPullIntoHostMin);
    MPIACC_COUNT("protocol.recv.ipc");
    std::string why;
    MPIACC_PROBE("recv.import");
    const int device = dest_.device ? dest_.device->device_ordinal() : -1;
    int rc = pull_source_->ipc_import(env.ipc, bytes_, device, &ipc_source_, &why);
    MPIACC_PROBE("recv.imported");
    if (rc != MPI_SUCCESS) return false;
    state_ = State::IPC_PULL;
    issue_pulls();
    // Nothing to wait for (no bytes, or the first copy failed to enqueue): on at once.
    if (ipc_copies_.empty() && chunks_.empty()) ipc_step();
    return true;
}

// Enqueues the pull; ipc_step (in later progress calls) sees it end and sends the FIN. A
// failure to enqueue is kept in ipc_error_ for ipc_step to report once the copies already
// issued have ended.
void RecvOp::issue_pulls() {
    if (pull_through_slots_) {
        // Chunks small enough that copying one out of its slot overlaps the pulls of
        // the next ones.
        constexpr std::size_t kSlotPullChunk = 256u << 10;
        pool_ = ipc_source_->staging_pool();
        chunk_size_ = std::min({chunk_size_, kSlotPullChunk, pool_->slot_size()});
        nchunks_ = (bytes_ + chunk_size_ - 1) / chunk_size_;
        next_chunk_ = chunks_done_ = 0;
        slot_pulls_step();
        return;
    }
    // One copy: splitting a pull lost bandwidth (docs/performance.md, "Splitting IPC
    // pulls (removed)").
    if (bytes_ == 0) return;
    std::unique_ptr<Completion> done;
    std::string why;
    int rc = dest_.kind == BufKind::HOST ? ipc_source_->copy_to_host(0, dest_.contiguous_host(), bytes_, &done, &why)
                                         : ipc_source_->copy_to_device(0, *dest_.device, 0, bytes_, &done, &why);
    if (rc != MPI_SUCCESS) {
        ipc_error_ = rc;
        ipc_why_ = why;
        return;
    }
    ipc_copies_.push_back(std::move(done));
}

// Lands the slot pulls that ended (in the user's buffer), and issues more while slots
// and depth allow. True once every chunk has ended, or, after a failure, every chunk
// already issued.
bool RecvOp::slot_pulls_step() {
    for (auto it = chunks_.begin(); it != chunks_.end();) {
        if (!it->copy->test()) {
            ++it;
            continue;
        }
        if (it->copy->error() != MPI_SUCCESS) {
            if (ipc_error_ == MPI_SUCCESS) {
                ipc_error_ = it->copy->error();
                ipc_why_ = with_detail("copying a chunk of the sender's device memory into a pinned slot failed",
                                       it->copy->what());
            }
        } else if (ipc_error_ == MPI_SUCCESS) {
            if (char *contig = dest_.contiguous_host())
                std::memcpy(contig + it->offset, it->staging, it->len);
            else
                unpack_range(it->staging, it->len, dest_.host, dest_.count, dest_.type.get(), it->offset);
        }
        it->pool->release(it->staging);
        ++chunks_done_;
        it = chunks_.erase(it);
    }
    while (ipc_error_ == MPI_SUCCESS && chunks_.size() < depth_ && next_chunk_ < nchunks_) {
        void *slot = pool_->acquire();
        if (!slot) {
            if (pool_->allocations() == 0 && !pool_->last_error().empty()) {
                ipc_error_ = MPI_ERR_NO_MEM;
                ipc_why_ = "no pinned staging memory: " + pool_->last_error();
            }
            MPIACC_COUNT("pool.wait");
            break;  // back-pressure: wait for a slot
        }
        ChunkState c = ChunkState::at(next_chunk_, chunk_size_, bytes_);
        c.staging = slot;
        c.pool = pool_;
        std::string why;
        int rc =
            chunk_copy_fault(&why) ? MPI_ERR_OTHER : ipc_source_->copy_to_host(c.offset, slot, c.len, &c.copy, &why);
        if (rc != MPI_SUCCESS) {
            pool_->release(slot);
            ipc_error_ = rc;
            ipc_why_ = why;
            break;
        }
        c.stage = ChunkState::Stage::COPYING;
        chunks_.push_back(std::move(c));
        ++next_chunk_;
    }
    return chunks_.empty() && (ipc_error_ != MPI_SUCCESS || chunks_done_ == nchunks_);
}

void RecvOp::ipc_step() {
    // Every pull issued must end, failed or not, before the FIN: it releases the sender's
    // buffer, and a pull still running would read it after the sender's call returned.
    if (pull_through_slots_) {
        if (!slot_pulls_step()) return;
    }
    for (auto &c : ipc_copies_) {
        if (!c->test()) return;
        if (c->error() != MPI_SUCCESS && ipc_error_ == MPI_SUCCESS) {
            ipc_error_ = c->error();
            ipc_why_ = c->what();
        }
    }
    if (ipc_error_ != MPI_SUCCESS) {
        ipc_copies_.clear();
        ipc_source_.reset();
        fail(ipc_error_, with_detail("IPC pull from the sender's device memory failed", ipc_why_));
        tell_sender_done(static_cast<std::uint16_t>(ipc_error_));
        state_ = State::FIN;
        return;
    }
    set_status(&status, status.MPI_SOURCE, status.MPI_TAG, bytes_,
               truncated_
                   ? make_error_code(MPI_ERR_TRUNCATE, call,
                                     format("message of %llu bytes is longer than the receive buffer (%zu bytes)",
                                            static_cast<unsigned long long>(envelope_.size), dest_.bytes))
                   : MPI_SUCCESS,
               false);
    error = status.MPI_ERROR;
    MPIACC_PROBE("recv.fin");
    tell_sender_done(0);
    MPIACC_PROBE("recv.fin_posted");
    state_ = State::FIN;
    // Released after the FIN, which the sender waits on: the copies have ended. A
    // blocking call's op goes whole, later (retire_later).
    if (!waited_by_call) {
        ipc_copies_.clear();
        ipc_source_.reset();
    }
    MPIACC_PROBE("recv.released");
}

}  // namespace mpiacc
