// The receive side of the pipeline (DESIGN.md 2.4): chunks arrive in staging slots (or
// straight in a host buffer) and are copied to the device; in SHARED mode they are
// copied out of the sender's own shared slots. Admission bounds what each sender may
// have in flight here.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/context.h"
#include "netmod/netmod.h"
#include "pool/pinned_pool.h"
#include "pool/shared_memory.h"
#include "protocol/chunk_trace.h"
#include "protocol/state.h"
#include "protocol/transfer.h"
#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {

// SHARED mode (DESIGN 2.4's pipeline, same node): the sender's slots are shared memory
// this rank can map, and its device can copy from (or, into host memory, the CPU). Asked
// before the CTS, so that a transfer never starts in a mode it cannot finish.
bool RecvOp::shared_can_serve(const Envelope &env) const {
    const Context &ctx = context();
    return (env.flags & kEnvelopeSharedStaging) && !(env.flags & kEnvelopeHasIpc) && env.node_id == ctx.node_id &&
           ctx.knobs.shared_staging && (dest_.kind == BufKind::HOST || dest_.device->copies_from_peer_segments()) &&
           !peer_process_unreachable(env.sender_rank, env.shared.pid, env.shared.pid_namespace, ctx.pid_namespace);
}

void RecvOp::start_shared(const Envelope &env) {
    // Chunks are copied out of the sender's slots: no slot of ours is needed.
    MPIACC_COUNT("protocol.recv.shared");
    shared_pid_ = env.shared.pid;
    start_chunks();
}

void RecvOp::start_pipeline() {
    MPIACC_COUNT("protocol.recv.pipeline");
    if (dest_.kind != BufKind::HOST) {
        // Chunks land in this pool's slots; the count decides admission (admit_pipeline).
        pool_ = dest_.device->staging_pool();
        if (pool_ && chunk_size_ > pool_->slot_size()) {
            chunk_size_ = pool_->slot_size();
            nchunks_ = (bytes_ + chunk_size_ - 1) / chunk_size_;
        }
    }
    start_chunks();
}

// Both chunked modes: a non-contiguous host buffer gets its chunks packed, then unpacked
// once (finish_data); the first step waits for admission and posts the CTS.
void RecvOp::start_chunks() {
    if (dest_.kind == BufKind::HOST && !dest_.contiguous_host()) packed_.resize(bytes_);
    state_ = State::AWAIT_SLOT;
    pipeline_step();
}

// A notice arrived for chunk `c`: its bytes go from the sender's slot to the device, or
// to host memory. On any failure the transfer drains (the chunk is still acknowledged,
// so that the sender gets its slot back).
void RecvOp::start_shared_copy(ChunkState &c) {
    const ChunkNotice &n = c.shared->notice;
    std::string why;
    if (n.magic != kEnvelopeMagic || n.index != c.index || n.len != c.len || n.where.offset > n.where.segment_bytes ||
        n.len > n.where.segment_bytes - n.where.offset) {
        drain(MPI_ERR_INTERN, format("protocol error: bad notice for chunk %zu of a shared transfer", c.index));
        return;
    }
    std::uint64_t mapping = 0;
    char *base = static_cast<char *>(map_peer_segment(peer_, shared_pid_, n.where, &mapping, &why));
    if (base && dest_.kind == BufKind::HOST) {
        // The CPU copies, as MPICH's transport would have (CMA), but out of memory mapped
        // here already: no pages pinned per chunk and no rendezvous of MPICH's per chunk.
        char *into = (packed_.empty() ? dest_.contiguous_host() : packed_.data()) + c.offset;
        std::memcpy(into, base + n.where.offset, c.len);
        release_peer_segment(base);
        return;
    }
    int rc = MPI_SUCCESS;
    if (!base) {
        rc = MPI_ERR_OTHER;
    } else if (!dest_.device->pin_host_region(base, n.where.segment_bytes, mapping, &why)) {
        rc = MPI_ERR_NO_MEM;
    } else if (chunk_copy_fault(&why)) {
        rc = MPI_ERR_OTHER;
    } else {
        rc = dest_.device->copy_from_host(c.offset, base + n.where.offset, c.len, &c.copy, &why);
    }
    if (c.copy)
        c.peer_segment = base;
    else if (base)
        release_peer_segment(base);
    if (rc != MPI_SUCCESS) drain(rc, "copying a chunk out of the sender's shared slot failed: " + why);
}

// Tells the sender that chunk `c`'s slot is free again.
bool RecvOp::acknowledge_chunk(ChunkState &c) {
    ControlMessage &m = c.shared->done;
    std::memset(&m, 0, sizeof m);
    m.magic = kEnvelopeMagic;
    m.type = static_cast<std::uint16_t>(ControlType::CHUNK_DONE);
    m.transfer_id = envelope_.transfer_id;
    m.bytes = c.index;
    if (netmod().send_control(&m, sizeof m, peer_, &c.request) != MPI_SUCCESS) {
        fail(MPI_ERR_OTHER, "sending a CHUNK_DONE control message failed");
        return false;
    }
    c.stage = ChunkState::Stage::ACKING;
    return true;
}

// A receiver bounds the chunk messages it has in MPICH per sender: MPIACC_PIPELINE_TRANSFERS
// transfers' worth, each up to its depth in flight. A transfer of several chunks takes a
// whole transfer's share, one of a single chunk one chunk's; the others wait before their
// CTS, holding nothing. Unbounded, a window of large transfers interleaved hundreds of
// chunk messages in MPICH, each progress round walked all of them, and it ran slower
// (docs/performance.md, "Pipeline admission"). pipeline_admits (transfer.h) decides.
bool RecvOp::admit_pipeline() {
    if (admitted_.chunks != 0) return true;
    Context &ctx = context();
    const PipelineShare share = pipeline_share(nchunks_, depth_);
    const bool several = share.several();
    ProtocolState::PipelineAdmission &from = protocol_state().pipeline_admission[peer_];
    if (!pipeline_admits(ctx.knobs, from.chunks, from.several_waiting, share)) {
        if (!queued_) MPIACC_COUNT("protocol.pipeline.queued");
        queued_ = true;
        if (several && !waiting_counted_) {
            ++from.several_waiting;
            waiting_counted_ = true;
        }
        return false;
    }
    if (waiting_counted_) {
        --from.several_waiting;
        waiting_counted_ = false;
    }
    from.chunks += share.chunks;
    admitted_ = share;
    return true;
}

// Every way out of a receive (done, failed, drained, destroyed) comes here once it has
// its envelope: what it took from, or asked of, the admission budget is given back.
void RecvOp::withdraw() {
    release_ring();  // no slot of it is named to the sender for a chunk still to come
    if (registered_) {
        protocol_state().receivers.erase({peer_, envelope_.transfer_id});
        registered_ = false;
    }
    leave_pipeline();
}

void RecvOp::leave_pipeline() {
    if (admitted_.chunks == 0 && !waiting_counted_) return;
    ProtocolState::PipelineAdmission &from = protocol_state().pipeline_admission[peer_];
    from.chunks -= admitted_.chunks;
    if (waiting_counted_) --from.several_waiting;
    admitted_ = PipelineShare();
    waiting_counted_ = false;
}

void RecvOp::pipeline_step() {
    Context &ctx = context();
    const int tag = data_tag(envelope_.transfer_id, ctx.tag_ub);
    if (state_ == State::AWAIT_SLOT && !admit_pipeline()) return;
    if (state_ == State::AWAIT_SLOT && !reach_asked_ && mode_ == TransferMode::PIPELINE && nchunks_ > 0) {
        // Whether the chunks come one-sided decides where they land: asked once, and
        // the first transfer with a peer waits here while the two meet.
        const PeerReach reach = netmod().reach(peer_);
        if (reach == PeerReach::PENDING) return;
        reach_asked_ = true;
        if (reach == PeerReach::ONE_SIDED) prepare_one_sided();
    }
    if (state_ == State::AWAIT_SLOT && pool_) {
        // Hold one staging slot before the CTS goes out: a transfer whose data may flow
        // always has somewhere to land, so pools cannot deadlock each other (DESIGN 2.7).
        if (nchunks_ > 0 && !reserved_slot_) {
            reserved_slot_ = pool_->acquire();
            if (!reserved_slot_) {
                if (pool_->allocations() == 0 && !pool_->last_error().empty()) {
                    // The sender is waiting for a CTS: answer it with nothing to send, so
                    // it completes, then fail locally.
                    std::string why = pool_->last_error();
                    bytes_ = 0;
                    send_control(ControlType::CTS, static_cast<std::uint16_t>(mode_));
                    fail(MPI_ERR_NO_MEM, "no pinned staging memory: " + why);
                    return;
                }
                MPIACC_COUNT("pool.wait");
                return;
            }
        }
    }
    if (state_ == State::AWAIT_SLOT && one_sided_ && ring_.empty() && !name_slots()) return;
    if (one_sided_ && state_ == State::DATA && one_sided_failed()) return;
    const bool shared = mode_ == TransferMode::SHARED;
    for (auto it = chunks_.begin(); it != chunks_.end();) {
        ChunkState &c = *it;
        bool done = c.stage == ChunkState::Stage::FINISHED;
        if (shared && c.stage == ChunkState::Stage::NETWORK && netmod().test(&c.request)) {
            trace_chunk(ChunkEvent::RECV_DONE, envelope_.transfer_id, c.index);
            if (!draining_) start_shared_copy(c);
            if (c.copy) {
                c.stage = ChunkState::Stage::LANDING;
            } else if (!acknowledge_chunk(c)) {
                return;
            }
        }
        if (shared && c.stage == ChunkState::Stage::LANDING && c.copy->test()) {
            if (c.copy->error() != MPI_SUCCESS)
                drain(c.copy->error(), "copying a chunk out of the sender's shared slot failed");
            trace_chunk(ChunkEvent::RECV_COPY_DONE, envelope_.transfer_id, c.index);
            c.copy.reset();
            release_peer_segment(c.peer_segment);
            c.peer_segment = nullptr;
            if (!acknowledge_chunk(c)) return;
        }
        if (shared && c.stage == ChunkState::Stage::ACKING) done = netmod().test(&c.request);
        if (!shared && c.stage == ChunkState::Stage::NETWORK) {
            if (netmod().test(&c.request)) {
                // A failed transport ends every placement: ended is not landed.
                if (one_sided_ && one_sided_failed()) return;
                trace_chunk(ChunkEvent::RECV_DONE, envelope_.transfer_id, c.index);
                std::string why;
                int rc = MPI_SUCCESS;
                if (c.staging && !draining_ && dest_.kind == BufKind::HOST)
                    std::memcpy((packed_.empty() ? dest_.contiguous_host() : packed_.data()) + c.offset, c.staging,
                                c.len);  // one-sided into a host buffer: through a registered slot
                else if (c.staging && !draining_)
                    rc = chunk_copy_fault(&why)
                             ? MPI_ERR_OTHER
                             : dest_.device->copy_from_host(c.offset, c.staging, c.len, &c.copy, &why);
                if (rc != MPI_SUCCESS) drain(rc, "copying a chunk into device memory failed: " + why);
                if (c.copy)
                    c.stage = ChunkState::Stage::LANDING;
                else
                    done = true;
            }
        }
        if (!shared && c.stage == ChunkState::Stage::LANDING && c.copy->test()) {
            if (c.copy->error() != MPI_SUCCESS) drain(c.copy->error(), "copying a chunk into device memory failed");
            trace_chunk(ChunkEvent::RECV_COPY_DONE, envelope_.transfer_id, c.index);
            done = true;
        }
        if (done && one_sided_ && it != chunks_.begin()) {
            // Slots come back in chunk order: chunk k + n goes where chunk k was.
            c.stage = ChunkState::Stage::FINISHED;
            ++it;
        } else if (done) {
            MPIACC_COUNT("protocol.recv.chunks");
            if (c.staging && one_sided_ && c.index + ring_.size() < nchunks_)
                ring_[c.index % ring_.size()] = c.staging;
            else if (c.staging)
                c.pool->release(c.staging);
            ++chunks_done_;
            it = chunks_.erase(it);
        } else {
            ++it;
        }
    }
    while (chunks_.size() < depth_ && next_chunk_ < nchunks_) {
        ChunkState c = ChunkState::at(next_chunk_, chunk_size_, bytes_);
        void *into;
        std::size_t into_len = c.len;
        if (shared) {
            c.shared.reset(new SharedChunkMessages());
            into = &c.shared->notice;
            into_len = sizeof(ChunkNotice);
        } else if (one_sided_) {
            const std::size_t r = c.index % ring_.size();
            if (!ring_[r]) break;  // its chunk k - n has not landed yet
            c.staging = ring_[r];
            c.pool = pool_;
            ring_[r] = nullptr;
            into = c.staging;
        } else if (dest_.kind == BufKind::HOST) {
            into = (packed_.empty() ? dest_.contiguous_host() : packed_.data()) + c.offset;
        } else {
            void *slot = reserved_slot_ ? reserved_slot_ : pool_->acquire();
            reserved_slot_ = nullptr;
            if (!slot) {
                MPIACC_COUNT("pool.wait");
                break;
            }
            c.staging = slot;
            c.pool = pool_;
            into = slot;
        }
        // A notice arrives as a message; a chunk is placed into its slot (or straight into
        // the host buffer).
        const int rc = shared ? netmod().recv_bytes(into, into_len, peer_, tag, &c.request)
                              : netmod().expect_placement(into, into_len, peer_, tag, one_sided_, &c.request);
        if (rc != MPI_SUCCESS) {
            if (c.staging) pool_->release(c.staging);
            fail(MPI_ERR_OTHER, "posting a chunk receive failed");
            return;
        }
        c.stage = ChunkState::Stage::NETWORK;
        trace_chunk(ChunkEvent::RECV_POST, envelope_.transfer_id, c.index);
        chunks_.push_back(std::move(c));
        ++next_chunk_;
    }
    if (state_ == State::AWAIT_SLOT) {
        // Chunk receives are posted before the CTS, so the first chunk finds its receive.
        state_ = State::DATA;
        trace_chunk(ChunkEvent::CTS_SENT, envelope_.transfer_id, nchunks_);
        send_control(ControlType::CTS, static_cast<std::uint16_t>(mode_));
    }
    if (!unsent_.empty()) retire_stopped_chunks(&unsent_);
    if (chunks_done_ == nchunks_ && unsent_.empty()) {
        if (draining_)
            finish_drain();
        else
            finish_data();
    }
}

// The peer places one-sided: chunks land in registered slots of a pool, a host buffer's
// too (then copied out), and chunk k in the same slot as chunk k - n. False when none
// is possible (the transfer then goes two-sided).
bool RecvOp::prepare_one_sided() {
    if (dest_.kind == BufKind::HOST) pool_ = host_chunk_pool();
    if (!pool_) return false;
    if (chunk_size_ > pool_->slot_size()) {
        chunk_size_ = pool_->slot_size();
        nchunks_ = (bytes_ + chunk_size_ - 1) / chunk_size_;
    }
    one_sided_ = true;
    return true;
}

// Takes up to depth_ slots (the first, reserved_slot_, is held already; more only where
// free, so that transfers never wait on each other's halves) and registers them. False
// while the op must wait or once it failed; a refused registration turns the transfer
// two-sided.
bool RecvOp::name_slots() {
    if (!reserved_slot_) return false;  // waits for a slot (pool.wait counted above)
    ring_.push_back(reserved_slot_);
    reserved_slot_ = nullptr;
    const std::size_t want = std::min<std::size_t>({depth_, nchunks_, kMaxCtsSlots});
    while (ring_.size() < want) {
        void *slot = pool_->acquire();
        if (!slot) break;
        ring_.push_back(slot);
    }
    for (void *slot : ring_) {
        RemoteSlot r;
        std::string why;
        if (!slot_key(pool_, slot, &r, &why)) {
            if (context().knobs.verbose >= 1)
                std::fprintf(stderr, "[mpiacc %d] registering a staging slot failed (%s): chunks go two-sided\n",
                             context().world_rank, why.c_str());
            reserved_slot_ = ring_.front();
            ring_.erase(ring_.begin());
            release_ring();
            ring_slots_.clear();
            one_sided_ = false;
            if (dest_.kind == BufKind::HOST) {
                pool_->release(reserved_slot_);
                reserved_slot_ = nullptr;
                pool_ = nullptr;
            }
            return true;
        }
        ring_slots_.push_back(r);
    }
    depth_ = ring_.size();
    MPIACC_COUNT("protocol.recv.one_sided");
    return true;
}

void RecvOp::release_ring() {
    for (void *&slot : ring_)
        if (slot) pool_->release(slot);
    ring_.clear();
}

// The transport to the sender failed under this transfer: nothing more lands, so the
// receive fails now (the sender's ABORT may still come, and finds it gone).
bool RecvOp::one_sided_failed() {
    std::string why;
    if (netmod().peer_failure(peer_, &why) == MPI_SUCCESS) return false;
    fail(MPI_ERR_OTHER, "a pipeline chunk did not arrive: " + why);
    return true;
}

}  // namespace mpiacc
