// The receive side of the pipeline (DESIGN.md 2.4): chunks arrive in staging slots (or
// straight in a host buffer) and are copied to the device; in SHARED mode they are
// copied out of the sender's own shared slots. Admission bounds what each sender may
// have in flight here.
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
    const bool shared = mode_ == TransferMode::SHARED;
    for (auto it = chunks_.begin(); it != chunks_.end();) {
        ChunkState &c = *it;
        bool done = false;
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
                trace_chunk(ChunkEvent::RECV_DONE, envelope_.transfer_id, c.index);
                std::string why;
                int rc = MPI_SUCCESS;
                if (c.staging && !draining_)
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
        if (done) {
            if (c.staging) c.pool->release(c.staging);
            MPIACC_COUNT("protocol.recv.chunks");
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
                              : netmod().expect_placement(into, into_len, peer_, tag, &c.request);
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

}  // namespace mpiacc
