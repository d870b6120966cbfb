// A receive that got the plain payload rather than an envelope (DESIGN.md 2.2): into
// host memory it is unpacked; into device memory it is copied from the bounce buffer it
// landed in, straight by DMA when that buffer is pinned, else through staging slots.
#include <cstring>

#include "core/context.h"
#include "pool/pinned_pool.h"
#include "protocol/transfer.h"
#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {

void RecvOp::deliver_payload(const void *data, std::size_t len) {
    std::size_t n = len;
    int err = status.MPI_ERROR;
    if (is_truncation(err) || (err == MPI_SUCCESS && len > dest_.bytes)) {
        // Nothing of it reaches the buffer (truncated_receive). MPICH truncated it itself
        // when it did not fit our buffer (sized for the user's receive): size unknown.
        err = truncated_receive(&status, call, is_truncation(err) ? 0 : len, dest_.bytes);
        n = 0;
    } else if (err != MPI_SUCCESS) {
        n = 0;
        // MPICH's own status is already exact for a payload that fit; rewriting it costs
        // two PMPI calls on the message-rate path.
        set_status(&status, status.MPI_SOURCE, status.MPI_TAG, n, err, false);
    }
    error = err;
    if (dest_.kind == BufKind::HOST) {
        if (!data_in_user_buffer_ && n > 0) unpack_range(data, n, dest_.host, dest_.count, dest_.type.get(), 0);
        state_ = State::DONE;
        return;
    }
    if (n == 0) {
        state_ = State::DONE;
        return;
    }
    // A host payload this size comes faster by RTS/CTS (kHostRndvHintMin).
    const Knobs &k = context().knobs;
    if (host_rndv_hint_size(k, len)) note_host_payload_route(world_rank_of(comm, status.MPI_SOURCE), kHostRndvHintMin);
    // A small one may be a device send staged because this rank declined its pull.
    if (len <= k.device_eager_max) note_small_device_payload(comm, status.MPI_SOURCE);
    // The bounce buffer stays alive until the host-to-device copies have finished. A
    // large payload goes straight from it by DMA once the buffer is page-locked (on its
    // first payload; the cache keeps it so): through slots it would pay a second CPU
    // copy. Receives that only ever get envelopes never pay for a registration. A small
    // payload goes straight from its small pinnable bounce too, for the same reason
    // (docs/performance.md, "Pinned bounces for small host payloads").
    bool pinned_source = device_bounce_ && data == device_bounce_;
    // (Under kPinnedBounceMin only a pinnable bounce, which post() asks for kinds that
    // register host memory, is whole pages.)
    const bool worth_pinning = n >= kPinnedBounceMin || (bounce_.whole_pages() && bounce_.size() < kPinnedBounceMin);
    if (!pinned_source && data == bounce_.data() && worth_pinning) {
        pinned_source = bounce_.pin(accel_for(dest_.kind));
        if (!pinned_source) dest_.device->note_pageable_payload(n);
    }
    pool_ = dest_.device->staging_pool();
    if (!pinned_source && pool_ && !(pool_->allocations() == 0 && !pool_->last_error().empty())) {
        // Through pinned slots: a copy from the pageable bounce buffer is synchronous and
        // runs at pageable speed; a memcpy into a slot plus an asynchronous copy is much
        // faster (docs/performance.md, "Bounce buffers").
        payload_ = static_cast<const char *>(data);
        bytes_ = n;
        chunk_size_ = pool_->slot_size();
        depth_ = static_cast<std::size_t>(transfer_depth(context().knobs));
        nchunks_ = (n + chunk_size_ - 1) / chunk_size_;
        MPIACC_COUNT("protocol.recv.payload_through_slots");
        state_ = State::PAYLOAD_STAGE;
        payload_stage_step();
        return;
    }
    if (pinned_source) MPIACC_COUNT("protocol.recv.payload_from_pinned");
    std::string why;
    int rc = dest_.device->copy_from_host(0, data, n, &payload_copy_, &why, copy_use());
    if (rc != MPI_SUCCESS) {
        fail(rc, "copying the received message into device memory failed: " + why);
        return;
    }
    state_ = State::PAYLOAD_COPY;
}

void RecvOp::payload_stage_step() {
    for (auto it = chunks_.begin(); it != chunks_.end();) {
        if (!it->copy->test()) {
            ++it;
            continue;
        }
        if (it->copy->error() != MPI_SUCCESS) {
            fail(it->copy->error(), "copying the received message into device memory failed");
            return;
        }
        it->pool->release(it->staging);
        ++chunks_done_;
        it = chunks_.erase(it);
    }
    while (chunks_.size() < depth_ && next_chunk_ < nchunks_) {
        void *slot = pool_->acquire();
        if (!slot) {
            MPIACC_COUNT("pool.wait");  // back-pressure: the next round tries again
            break;
        }
        ChunkState c = ChunkState::at(next_chunk_, chunk_size_, bytes_);
        c.staging = slot;
        c.pool = pool_;
        std::memcpy(slot, payload_ + c.offset, c.len);
        std::string why;
        // A payload of one slot is the commonest small device receive.
        int rc = dest_.device->copy_from_host(c.offset, slot, c.len, &c.copy, &why,
                                              nchunks_ == 1 ? copy_use() : CopyUse::POLLED);
        if (rc != MPI_SUCCESS) {
            pool_->release(slot);
            fail(rc, "copying the received message into device memory failed: " + why);
            return;
        }
        c.stage = ChunkState::Stage::LANDING;
        chunks_.push_back(std::move(c));
        ++next_chunk_;
    }
    if (chunks_done_ == nchunks_) state_ = State::DONE;
}

}  // namespace mpiacc
