#include <algorithm>
#include <cstdio>
#include <cstring>

#include "protocol/chunk_trace.h"
#include "core/context.h"
#include "util/counters.h"
#include "util/error.h"
#include "util/probe.h"
#include "core/progress.h"
#include "netmod/netmod.h"
#include "pool/pinned_pool.h"
#include "protocol/fin_words.h"
#include "protocol/transfer.h"
#include "protocol/state.h"

namespace mpiacc {

namespace {

// Payloads of at least this many bytes for device memory get their bounce buffer
// page-locked; smaller ones only where the bounce is small and CUDA's (BounceBuffer:
// kept per size and page-locked once), not for one registration per receive.
constexpr std::size_t kPinnedBounceMin = 64u << 10;

// True when [start, start+len) overlaps a pending in-place receive: two envelopes could
// land in the same bytes before either is read (OSU-style windows reuse one buffer).
bool overlaps_in_place_receive(const void *start, std::size_t len) {
    auto lo = reinterpret_cast<std::uintptr_t>(start);
    return protocol_state().in_place_ranges.overlaps(lo, lo + len);
}

}  // namespace

int RecvOp::post(MessageBuffer &&dest, int source, int tag, MPI_Comm comm, const char *call, Posting posting,
                 std::unique_ptr<RecvOp> *out, MPI_Request *matching) {
    Context &ctx = context();
    std::unique_ptr<RecvOp> op(new RecvOp());
    op->dest_ = std::move(dest);
    op->comm = comm;
    op->call = call;
    int rc;
    op->matching_is_user_handle_ = posting != Posting::BOUNCE;
    if (posting == Posting::IN_PLACE && overlaps_in_place_receive(op->dest_.contiguous_host(), op->dest_.bytes))
        posting = Posting::WATCHED_BOUNCE;
    if (posting == Posting::IN_PLACE) {
        if (char *start = op->dest_.contiguous_host()) op->in_place_head_.keep(start);
        rc = PMPI_Irecv(op->dest_.host, op->dest_.count, op->dest_.type.get(), source, tag, comm,
                        &op->matching_request_);
        op->data_in_user_buffer_ = true;
        if (char *start = op->dest_.contiguous_host()) {
            auto lo = reinterpret_cast<std::uintptr_t>(start);
            op->in_place_range_ = protocol_state().in_place_ranges.add(lo, lo + op->dest_.bytes);
        }
    } else {
        std::size_t n = std::max(std::min(op->dest_.bytes, largest_payload(ctx.knobs)), kEnvelopeBytes);
        if (op->dest_.device && n >= kPinnedBounceMin)
            op->device_bounce_ = static_cast<char *>(op->dest_.device->acquire_receive_bounce(n));
        if (!op->device_bounce_) op->bounce_ = BounceBuffer(n, accel_caps(op->dest_.kind).registers_host);
        if (posting == Posting::BLOCKING_BOUNCE) {
            // A message already here is matched without an Irecv, a request and rounds of
            // PMPI_Test: for an 8 B host payload into device memory, 0.34 us from the
            // captured receive to the match against 0.74 (probe build, H200 machine).
            MPI_Status st;
            st.MPI_ERROR = MPI_SUCCESS;
            rc = PMPI_Recv(op->posted_bounce(), static_cast<int>(n), MPI_BYTE, source, tag, comm, &st);
            if (rc != MPI_SUCCESS) {
                int error_class = rc;
                PMPI_Error_class(rc, &error_class);
                if (error_class != MPI_ERR_TRUNCATE) return rc;
                st.MPI_ERROR = rc;  // as for a receive tested in progress(): the op's error
            }
            MPIACC_PROBE("recv.matched");
            op->blocking_ = true;
            op->matched_from(st);
            rc = MPI_SUCCESS;
        } else {
            rc = PMPI_Irecv(op->posted_bounce(), static_cast<int>(n), MPI_BYTE, source, tag, comm,
                            &op->matching_request_);
        }
    }
    if (rc != MPI_SUCCESS) return rc;
    if (matching) *matching = op->matching_request_;
    *out = std::move(op);
    return MPI_SUCCESS;
}

int RecvOp::from_matched(MessageBuffer &&dest, const void *data, std::size_t len, const MPI_Status &st, MPI_Comm comm,
                         const char *call, std::unique_ptr<RecvOp> *out, bool blocking) {
    std::unique_ptr<RecvOp> op(new RecvOp());
    op->dest_ = std::move(dest);
    op->comm = comm;
    op->call = call;
    op->blocking_ = blocking;
    op->bounce_ = BounceBuffer(len);
    if (len) std::memcpy(op->bounce_.data(), data, len);
    op->on_matched(st, op->bounce_.data(), len);
    *out = std::move(op);
    return MPI_SUCCESS;
}

int RecvOp::from_completed_user_receive(MessageBuffer &&dest, const InPlaceHead &head_before, const MPI_Status &st,
                                        MPI_Comm comm, const char *call, std::unique_ptr<RecvOp> *out) {
    std::unique_ptr<RecvOp> op(new RecvOp());
    op->dest_ = std::move(dest);
    op->comm = comm;
    op->call = call;
    op->blocking_ = true;
    std::size_t len = received_bytes(st);
    std::vector<char> head(len);
    if (pack_range(op->dest_.host, op->dest_.count, op->dest_.type.get(), 0, head.data(), len) != MPI_SUCCESS)
        head.assign(len, 0);
    if (char *start = op->dest_.contiguous_host()) head_before.put_back(start);
    op->data_in_user_buffer_ = true;  // the data is already in the user's buffer
    op->on_matched(st, head.data(), len);
    *out = std::move(op);
    return MPI_SUCCESS;
}

int RecvOp::from_host_receive(MessageBuffer &&dest, const void *envelope, const MPI_Status &st, MPI_Comm comm,
                              const char *call, MPI_Request held, std::unique_ptr<RecvOp> *out) {
    std::unique_ptr<RecvOp> op(new RecvOp());
    op->dest_ = std::move(dest);
    op->comm = comm;
    op->call = call;
    // Past MATCHING, the destructor frees (never cancels) the request it holds.
    op->matching_request_ = held;
    op->matching_is_user_handle_ = held != MPI_REQUEST_NULL;
    op->on_matched(st, envelope, kEnvelopeBytes);
    *out = std::move(op);
    return MPI_SUCCESS;
}

RecvOp::~RecvOp() {
    protocol_state().in_place_ranges.remove(in_place_range_);
    withdraw();
    retire_chunks_now(&chunks_, ChunkFlow::RECEIVING);
    retire_chunks_now(&unsent_, ChunkFlow::RECEIVING);
    for (MPI_Request *r : {&matching_request_, &control_request_, &data_request_}) {
        if (*r == MPI_REQUEST_NULL) continue;
        if (r == &matching_request_ && state_ == State::MATCHING) PMPI_Cancel(r);
        PMPI_Request_free(r);
    }
    release_pooled();
}

void RecvOp::release_pooled() {
    // Only once nothing of MPICH's can still write into the bounce buffer (the destructor
    // calls it after freeing its requests).
    if (matching_request_ != MPI_REQUEST_NULL || data_request_ != MPI_REQUEST_NULL) return;
    if (reserved_slot_) pool_->release(reserved_slot_);
    reserved_slot_ = nullptr;
    if (device_bounce_) dest_.device->release_receive_bounce(device_bounce_);
    device_bounce_ = nullptr;
    bounce_ = BounceBuffer();
}

int RecvOp::cancel() {
    if (state_ == State::MATCHING && matching_request_ != MPI_REQUEST_NULL) return PMPI_Cancel(&matching_request_);
    return MPI_SUCCESS;
}

void RecvOp::fail(int error_class, const std::string &what) {
    error = make_error_code(error_class, call, what);
    withdraw();
    // What is still in flight keeps the op incomplete until it ends (progress): a chunk
    // receive or a direct receive MPICH had matched would write after the call returned.
    stop_chunks(&chunks_, ChunkFlow::RECEIVING);
    retire_stopped_chunks(&chunks_);
    retire_stopped_chunks(&unsent_);
    if (data_request_ != MPI_REQUEST_NULL) PMPI_Cancel(&data_request_);
    status.MPI_ERROR = error;
    PMPI_Status_set_elements_x(&status, MPI_BYTE, 0);
    state_ = State::DONE;
}

void RecvOp::drain(int error_class, const std::string &what) {
    if (draining_) return;
    error = make_error_code(error_class, call, what);
    draining_ = true;
}

void RecvOp::finish_drain() {
    MPIACC_COUNT("protocol.recv.drained");
    set_status(&status, status.MPI_SOURCE, status.MPI_TAG, 0, error, false);
    withdraw();
    state_ = State::DONE;
}

void RecvOp::on_abort(const ControlMessage &msg) {
    const int error_class = msg.status ? msg.status : MPI_ERR_OTHER;
    std::string what = format("the sender (rank %d of the world) could not produce the data after the CTS", peer_);
    if (state_ != State::DATA || (mode_ != TransferMode::PIPELINE && mode_ != TransferMode::SHARED) ||
        data_request_ != MPI_REQUEST_NULL) {
        fail(error_class, what);
        return;
    }
    // The sender posted msg.bytes chunk sends before it stopped: those are received and
    // dropped, so that they complete on its side; receives for later ones are cancelled.
    const std::size_t posted = std::max<std::size_t>(static_cast<std::size_t>(msg.bytes), chunks_done_);
    if (posted < nchunks_) {
        for (auto it = chunks_.begin(); it != chunks_.end();) {
            if (it->index >= posted) {
                unsent_.push_back(std::move(*it));
                it = chunks_.erase(it);
            } else {
                ++it;
            }
        }
        stop_chunks(&unsent_, ChunkFlow::RECEIVING);
        nchunks_ = posted;
        next_chunk_ = std::min(next_chunk_, posted);
    }
    drain(error_class, what);
    pipeline_step();
}

void RecvOp::progress() {
    if (state_ == State::MATCHING) {
        int flag = 0, rc;
        MPI_Status st;
        st.MPI_ERROR = MPI_SUCCESS;
        if (matching_is_user_handle_) {
            rc = PMPI_Request_get_status(matching_request_, &flag, &st);
        } else {
            rc = PMPI_Test(&matching_request_, &flag, &st);
        }
        if (!flag) return;
        MPIACC_PROBE("recv.matched");
        if (rc != MPI_SUCCESS) st.MPI_ERROR = rc;
        matched_from(st);
    }
    // A device copy the matching issued just now (above, or in a BLOCKING_BOUNCE post) is
    // not asked about in the same call: an 8-byte pull ends ~5 us after cudaMemcpyAsync
    // returns (H200 machine), so a query (0.26-0.55 us) could only say "not yet" and
    // delay the blocking receive's wait in the driver, which comes next.
    const bool copy_just_issued =
        just_matched_ && (state_ == State::PAYLOAD_COPY || state_ == State::PAYLOAD_STAGE || state_ == State::IPC_PULL);
    just_matched_ = false;
    if (!copy_just_issued) {
        switch (state_) {
            case State::PAYLOAD_COPY:
                if (payload_copy_->test()) {
                    if (payload_copy_->error() != MPI_SUCCESS) {
                        fail(payload_copy_->error(), "copying the received message into device memory failed");
                        break;
                    }
                    state_ = State::DONE;
                }
                break;
            case State::PAYLOAD_STAGE: payload_stage_step(); break;
            case State::AWAIT_SLOT:
            case State::DATA:
                if (data_request_ != MPI_REQUEST_NULL) {
                    if (netmod().test(&data_request_)) finish_data();
                } else {
                    pipeline_step();
                }
                break;
            case State::IPC_PULL: ipc_step(); break;
            case State::DONE:  // failed with chunks or a direct receive still in flight
                retire_stopped_chunks(&chunks_);
                retire_stopped_chunks(&unsent_);
                netmod().test(&data_request_);
                break;
            default: break;
        }
    }
    netmod().test(&control_request_);
    if ((state_ == State::DONE || state_ == State::FIN) && control_request_ == MPI_REQUEST_NULL && chunks_.empty() &&
        unsent_.empty() && data_request_ == MPI_REQUEST_NULL) {
        state_ = State::DONE;
        complete = true;
    }
}

// A blocking call that drives this receive alone waits for its one copy of a payload
// into device memory in the driver as soon as it is issued (run_to_completion).
CopyUse RecvOp::copy_use() const {
    const bool blocking_call = waited_by_call || blocking_;
    return blocking_call && copy_waited_at_once(counted_pending ? 1 : 0) ? CopyUse::WAITED_AT_ONCE : CopyUse::POLLED;
}

// Not in the pipeline's DATA state: blocked in the driver there, MPICH would not move the
// next chunks meanwhile.
bool RecvOp::wait_for_device() {
    if (state_ == State::PAYLOAD_COPY && payload_copy_) {
        MPIACC_PROBE("recv.payload_wait");
        payload_copy_->wait_bounded();
        MPIACC_PROBE("recv.payload_waited");
    } else if (state_ == State::PAYLOAD_STAGE && !chunks_.empty() && chunks_.front().copy) {
        chunks_.front().copy->wait_bounded();
    } else if (state_ == State::IPC_PULL && !ipc_copies_.empty()) {
        MPIACC_PROBE("recv.pull_wait");
        for (auto &c : ipc_copies_) c->wait_bounded();
        MPIACC_PROBE("recv.pull_waited");
    } else if (state_ == State::IPC_PULL && !chunks_.empty()) {
        chunks_.front().copy->wait_bounded();
    } else {
        return false;
    }
    return true;
}

void RecvOp::matched_from(const MPI_Status &st) {
    just_matched_ = true;
    std::size_t len = received_bytes(st);
    if (!data_in_user_buffer_) {
        on_matched(st, posted_bounce(), len);
        return;
    }
    std::vector<char> head;
    if (len == kEnvelopeBytes) {
        head.resize(len);
        pack_range(dest_.host, dest_.count, dest_.type.get(), 0, head.data(), len);
        char *start = dest_.contiguous_host();
        if (start && looks_like_envelope(head.data(), len)) in_place_head_.put_back(start);
    }
    on_matched(st, head.data(), len);
}

void RecvOp::on_matched(const MPI_Status &st, const void *data, std::size_t len) {
    status = st;
    int cancelled = 0;
    PMPI_Test_cancelled(&st, &cancelled);
    if (cancelled) {
        set_status(&status, st.MPI_SOURCE, st.MPI_TAG, 0, MPI_SUCCESS, true);
        state_ = State::DONE;
        return;
    }
    if (len == kEnvelopeBytes && looks_like_envelope(data, len)) {
        std::memcpy(&envelope_, data, sizeof envelope_);
        on_envelope(envelope_);
        return;
    }
    deliver_payload(data, len);
}

void RecvOp::deliver_payload(const void *data, std::size_t len) {
    std::size_t n = std::min(len, dest_.bytes);
    int err = status.MPI_ERROR;
    // MPICH truncated the payload into our buffer itself (a buffer sized for the user's
    // receive): what it left there is not defined, so none of it reaches the user.
    if (err != MPI_SUCCESS && !data_in_user_buffer_) n = 0;
    if (err == MPI_SUCCESS && len > dest_.bytes)
        err = make_error_code(
            MPI_ERR_TRUNCATE, call,
            format("message of %zu bytes is longer than the receive buffer (%zu bytes)", len, dest_.bytes));
    // MPICH's own status is already exact for a payload that fit; rewriting it costs two
    // PMPI calls on the message-rate path.
    if (err != MPI_SUCCESS || n != len) set_status(&status, status.MPI_SOURCE, status.MPI_TAG, n, err, false);
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
    // The bounce buffer stays alive until the host-to-device copies have finished.
    // A large payload goes straight from it by DMA once the buffer is page-locked (done
    // on its first payload; the cache keeps it so): staging through slots costs a second
    // CPU copy (4.3 GB/s host-to-device at 1 MiB, against 7.3 for staging by hand, on
    // the H200 machine). Receives that only ever get envelopes (device to device) never
    // pay for a registration.
    // A small payload into CUDA memory goes straight from its small bounce too: through a
    // slot it paid a CPU copy more (16 KiB one way on two H200s: 14.2-14.6 us through a
    // slot, 11.8-12.2 straight, 13.1-13.2 staged by hand), and the resident copier takes
    // host memory that is registered.
    bool pinned_source = device_bounce_ && data == device_bounce_;
    // (Under kPinnedBounceMin only a pinnable bounce, which post() asks for CUDA, is whole pages.)
    const bool worth_pinning = n >= kPinnedBounceMin || (bounce_.whole_pages() && bounce_.size() < kPinnedBounceMin);
    if (!pinned_source && data == bounce_.data() && worth_pinning) {
        pinned_source = bounce_.pin(accel_for(dest_.kind));
        if (!pinned_source) dest_.device->note_pageable_payload(n);
    }
    pool_ = dest_.device->staging_pool();
    if (!pinned_source && pool_ && !(pool_->allocations() == 0 && !pool_->last_error().empty())) {
        // Through pinned slots: a copy from the pageable bounce buffer is synchronous and
        // runs at pageable speed (10.5 us for 8 bytes, 2-4 GB/s at 4 MiB on the H200
        // machine); a memcpy into a slot plus an asynchronous copy is several times faster.
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

void RecvOp::on_envelope(const Envelope &env) {
    Context &ctx = context();
    peer_ = env.sender_rank;
    truncated_ = env.size > dest_.bytes;
    bytes_ = std::min<std::size_t>(env.size, dest_.bytes);
    auto sender_kind = static_cast<BufKind>(env.buf_kind);
    // The receiver decides (DESIGN 2.4): IPC pull when the sender's device memory is
    // reachable here, direct when both sides are host, the pipeline otherwise.
    Accel *sender_accel = accel_caps(sender_kind).ipc ? accel_for(sender_kind) : nullptr;
    // Into host memory, a pull is one device-to-host copy. Straight into (usually
    // pageable) memory it only pays from 2 MiB (H200 machine: 256 KiB 6.9 GB/s pulled,
    // 10.6-13.5 through the sender's pipeline; 4 MiB 14.8 pulled, 12-12.6 piped). Below
    // that, or into a non-contiguous type, it goes through pinned slots and a copy out of
    // each: one copy on the device and one on the host, as staging by hand, without the
    // pipeline's CTS round trip first. Only in a process that already works with a CUDA
    // device: a host-only rank gets no context (hundreds of MiB) from a message.
    constexpr std::size_t kPullIntoHostMin = 2u << 20;
    const bool ipc_offered = (env.flags & kEnvelopeHasIpc) && env.node_id == ctx.node_id && ctx.knobs.ipc &&
                             sender_accel && sender_accel->available();
    const bool host_dest = dest_.kind == BufKind::HOST;
    const bool would_pull =
        ipc_offered && (dest_.kind == sender_kind || (host_dest && sender_accel->device_in_use()));
    // A blocking receive into host memory waits for this message alone. A small one
    // comes sooner by the sender's own device-to-host copy and an eager payload than
    // pulled (8 B D->H on two H200s: 8.4-8.7 us one way staged, 10.8-12.1 pulled, the
    // pull crossing NVLink and PCIe from the other GPU), so it declines a sender that
    // then stages its next small sends here, and says why in the CTS: nonblocking
    // receives keep pulling (a window of pulls overlaps, where staged sends each wait
    // for their copy at the call). A rank that never pulls declines without a reason.
    const bool decline_small = would_pull && host_dest && blocking_ && (env.flags & kEnvelopeStagesAfterDecline) &&
                               env.size <= ctx.knobs.device_eager_max;
    if (decline_small) {
        MPIACC_COUNT("protocol.recv.ipc_declined_small");
        note_declined_pull(peer_);
    }
    // Host data under the threshold came by RTS/CTS because this rank asked for it; into
    // host memory the plain payload is faster again.
    if (sender_kind == BufKind::HOST && host_dest && host_rndv_hint_size(ctx.knobs, env.size))
        note_host_payload_route(peer_, 0);
    declined_small_ = decline_small;
    if (would_pull && !decline_small) {
        mode_ = TransferMode::IPC;
        pull_through_slots_ = host_dest && !(dest_.contiguous_host() && bytes_ >= kPullIntoHostMin);
    } else if (sender_kind == BufKind::HOST && dest_.kind == BufKind::HOST) {
        mode_ = TransferMode::DIRECT;
    } else if (shared_staging_usable(env)) {
        mode_ = TransferMode::SHARED;
    } else {
        mode_ = TransferMode::PIPELINE;
    }
    chunk_size_ = std::min<std::size_t>(env.chunk_size, ctx.knobs.chunk_size);
    if (chunk_size_ == 0) chunk_size_ = ctx.knobs.chunk_size;
    // Chunks that MPICH carries between two ranks of a node are copied by a CPU, through
    // its caches: fewer in flight ran faster (kNodePipelineDepth).
    const long depth = mode_ == TransferMode::PIPELINE && same_node(peer_) ? node_transfer_depth(ctx.knobs)
                                                                           : transfer_depth(ctx.knobs);
    depth_ = std::max<std::size_t>(1, std::min<std::size_t>(env.depth, static_cast<std::size_t>(depth)));
    nchunks_ = (bytes_ + chunk_size_ - 1) / chunk_size_;
    set_status(&status, status.MPI_SOURCE, status.MPI_TAG, bytes_, MPI_SUCCESS, false);
    if (ctx.knobs.verbose >= 1)
        std::fprintf(stderr, "[mpiacc %d] %s: RTS id=%llu from %d: %llu bytes %s -> %s, mode %s, chunk %zu x%zu%s\n",
                     ctx.world_rank, call, static_cast<unsigned long long>(env.transfer_id), peer_,
                     static_cast<unsigned long long>(env.size), buf_kind_name(sender_kind), buf_kind_name(dest_.kind),
                     mode_name(mode_), chunk_size_, depth_, truncated_ ? " (truncating)" : "");
    if (mode_ == TransferMode::IPC) {
        MPIACC_COUNT("protocol.recv.ipc");
        std::string why;
        MPIACC_PROBE("recv.import");
        const int device = dest_.device ? dest_.device->device_ordinal() : -1;
        int rc = sender_accel->ipc_import(env.ipc, bytes_, device, &ipc_source_, &why);
        MPIACC_PROBE("recv.imported");
        if (rc != MPI_SUCCESS) {
            // Nothing was pulled: the sender still needs a reply, so fall back to the
            // pipeline rather than strand it.
            MPIACC_COUNT("protocol.ipc.fallback");
            mode_ = TransferMode::PIPELINE;
        } else {
            state_ = State::IPC_PULL;
            issue_pulls();
            // Nothing to wait for (no bytes, or the first copy failed to enqueue): on at once.
            if (ipc_copies_.empty() && chunks_.empty()) ipc_step();
            return;
        }
    }
    // Found by a sender's ABORT, which comes only in the data phase of the other modes: a
    // sender offering a pull waits for the FIN and sends nothing more.
    protocol_state().receivers[{peer_, env.transfer_id}] = this;
    registered_ = true;
    if (mode_ == TransferMode::DIRECT) {
        MPIACC_COUNT("protocol.recv.direct");
        int rc;
        if (char *contig = dest_.contiguous_host())
            rc = netmod().recv_bytes(contig, bytes_, peer_, data_tag(env.transfer_id, ctx.tag_ub), &data_request_);
        else
            rc = netmod().recv_typed(dest_.host, dest_.count, dest_.type.get(), peer_,
                                     data_tag(env.transfer_id, ctx.tag_ub), &data_request_);
        if (rc != MPI_SUCCESS) {
            fail(MPI_ERR_OTHER, "posting the data receive failed");
            return;
        }
        state_ = State::DATA;
        send_control(ControlType::CTS, static_cast<std::uint16_t>(mode_));
        return;
    }
    if (dest_.kind == BufKind::HOST && !dest_.contiguous_host()) packed_.resize(bytes_);
    if (mode_ == TransferMode::SHARED) {
        // Chunks are copied out of the sender's slots: no slot of ours is needed.
        MPIACC_COUNT("protocol.recv.shared");
        shared_pid_ = env.shared.pid;
        state_ = State::AWAIT_SLOT;
        pipeline_step();
        return;
    }
    MPIACC_COUNT("protocol.recv.pipeline");
    if (dest_.kind != BufKind::HOST) {
        // Chunks land in this pool's slots; the count decides admission (admit_pipeline).
        pool_ = dest_.device->staging_pool();
        if (pool_ && chunk_size_ > pool_->slot_size()) {
            chunk_size_ = pool_->slot_size();
            nchunks_ = (bytes_ + chunk_size_ - 1) / chunk_size_;
        }
    }
    state_ = State::AWAIT_SLOT;
    pipeline_step();
}

// SHARED mode (DESIGN 2.4's pipeline, same node): the sender's slots are shared memory
// this rank can map, and its device can copy from (or, into host memory, the CPU). Asked
// before the CTS, so that a transfer never starts in a mode it cannot finish.
bool RecvOp::shared_staging_usable(const Envelope &env) const {
    const Context &ctx = context();
    return (env.flags & kEnvelopeSharedStaging) && !(env.flags & kEnvelopeHasIpc) && env.node_id == ctx.node_id &&
           takes_shared_slots() &&
           !peer_process_unreachable(env.sender_rank, env.shared.pid, env.shared.pid_namespace, ctx.pid_namespace);
}

bool RecvOp::takes_shared_slots() const {
    return context().knobs.shared_staging && (dest_.kind == BufKind::HOST || dest_.device->copies_from_peer_segments());
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
    if (netmod().send_bytes(&m, sizeof m, peer_, kControlTag, &c.request) != MPI_SUCCESS) {
        fail(MPI_ERR_OTHER, "sending a CHUNK_DONE control message failed");
        return false;
    }
    c.stage = ChunkState::Stage::ACKING;
    return true;
}

void RecvOp::send_control(ControlType type, std::uint16_t mode_or_status) {
    std::memset(&control_, 0, sizeof control_);
    control_.magic = kEnvelopeMagic;
    control_.type = static_cast<std::uint16_t>(type);
    control_.transfer_id = envelope_.transfer_id;
    control_.bytes = bytes_;
    if (type == ControlType::CTS) {
        control_.mode = mode_or_status;
        control_.chunk_size = static_cast<std::uint32_t>(chunk_size_);
        control_.depth = static_cast<std::uint16_t>(depth_);
        if (declined_small_) control_.status = kCtsDeclinedForBlockingReceive;
    } else {
        control_.status = mode_or_status;
    }
    if (netmod().send_bytes(&control_, sizeof control_, peer_, kControlTag, &control_request_) != MPI_SUCCESS)
        fail(MPI_ERR_OTHER, "sending the CTS/FIN control message failed");
}

void RecvOp::tell_sender_done(std::uint16_t status) {
    if ((envelope_.flags & kEnvelopeFinWord) &&
        write_fin_word(peer_, envelope_.fin_word, envelope_.transfer_id, status)) {
        MPIACC_COUNT("protocol.recv.fin_word");
        return;
    }
    send_control(ControlType::FIN, status);
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
        if (netmod().recv_bytes(into, into_len, peer_, tag, &c.request) != MPI_SUCCESS) {
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
    int rc = dest_.kind == BufKind::HOST
                 ? ipc_source_->copy_to_host(0, dest_.contiguous_host(), bytes_, &done, &why)
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

void RecvOp::finish_data() {
    if (!packed_.empty()) unpack_range(packed_.data(), bytes_, dest_.host, dest_.count, dest_.type.get(), 0);
    int err = MPI_SUCCESS;
    if (truncated_)
        err = make_error_code(MPI_ERR_TRUNCATE, call,
                              format("message of %llu bytes is longer than the receive buffer (%zu bytes)",
                                     static_cast<unsigned long long>(envelope_.size), dest_.bytes));
    set_status(&status, status.MPI_SOURCE, status.MPI_TAG, bytes_, err, false);
    error = err;
    withdraw();
    state_ = State::DONE;
}

}  // namespace mpiacc
