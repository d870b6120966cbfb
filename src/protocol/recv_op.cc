#include <algorithm>
#include <cstdio>
#include <cstring>

// The receive side of the rendezvous (DESIGN.md 2): posting and matching, the choice of
// path once the envelope is read, completion and failure. The paths themselves are in
// recv_payload.cc (eager payloads), recv_pull.cc (IPC) and recv_pipeline.cc (pipeline and
// shared slots).
#include "core/context.h"
#include "core/progress.h"
#include "netmod/netmod.h"
#include "protocol/fin_words.h"
#include "protocol/state.h"
#include "protocol/transfer.h"
#include "util/counters.h"
#include "util/error.h"
#include "util/probe.h"

namespace mpiacc {

namespace {

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
        rc = matching::post_recv(op->dest_.host, op->dest_.count, op->dest_.type.get(), source, tag, comm,
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
            // tests, which would otherwise stand between a small payload's arrival and its
            // match (docs/performance.md, "Waiting in the driver").
            MPI_Status st;
            st.MPI_ERROR = MPI_SUCCESS;
            rc = matching::recv_now(op->posted_bounce(), static_cast<int>(n), MPI_BYTE, source, tag, comm, &st);
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
            rc = matching::post_recv(op->posted_bounce(), static_cast<int>(n), MPI_BYTE, source, tag, comm,
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
    if (matching_request_ != MPI_REQUEST_NULL) {
        if (state_ == State::MATCHING) matching::cancel(&matching_request_);
        matching::release(&matching_request_);
    }
    netmod().release(&control_request_);
    netmod().release(&data_request_);
    release_pooled();
}

void RecvOp::release_pooled() {
    // Only once nothing of MPICH's can still write into the bounce buffer (the destructor
    // calls it after freeing its requests).
    if (matching_request_ != MPI_REQUEST_NULL || data_request_.pending()) return;
    if (reserved_slot_) pool_->release(reserved_slot_);
    reserved_slot_ = nullptr;
    if (device_bounce_) dest_.device->release_receive_bounce(device_bounce_);
    device_bounce_ = nullptr;
    bounce_ = BounceBuffer();
}

int RecvOp::cancel() {
    if (state_ == State::MATCHING && matching_request_ != MPI_REQUEST_NULL) return matching::cancel(&matching_request_);
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
    netmod().cancel(&data_request_);
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
        data_request_.pending()) {
        fail(error_class, what);
        return;
    }
    if (one_sided_ && msg.depth == kAbortTransportFailed) {
        // Its queue pair is in error: none of its writes still in flight will land.
        netmod().fail_peer(peer_, what);
        fail(error_class, what + " (its RDMA writes to this rank failed)");
        return;
    }
    // The sender posted msg.bytes chunk sends before it stopped: those are received and
    // dropped, so that they complete on its side; receives for later ones are cancelled
    // (one-sided: forgotten, as their writes never come).
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
        if (one_sided_)
            for (auto &c : unsent_) netmod().abandon(&c.request);
        else
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
            rc = matching::peek(matching_request_, &flag, &st);
        } else {
            rc = matching::test(&matching_request_, &flag, &st);
        }
        if (!flag) return;
        MPIACC_PROBE("recv.matched");
        if (rc != MPI_SUCCESS) st.MPI_ERROR = rc;
        matched_from(st);
    }
    // A device copy the matching issued just now (above, or in a BLOCKING_BOUNCE post) is
    // not asked about in the same call: even a small copy is far from done when its issue
    // returns, so a query could only say "not yet" and delay the blocking receive's wait
    // in the driver, which comes next (docs/performance.md, "Waiting in the driver").
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
                if (data_request_.pending()) {
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
    if ((state_ == State::DONE || state_ == State::FIN) && !control_request_.pending() && chunks_.empty() &&
        unsent_.empty() && !data_request_.pending()) {
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
    if (matching::cancelled(st)) {
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

void RecvOp::on_envelope(const Envelope &env) {
    Context &ctx = context();
    peer_ = env.sender_rank;
    truncated_ = env.size > dest_.bytes;
    // A message that does not fit moves no bytes (the CTS asks for none), as MPICH 4.0.2
    // delivers none of such a message: the same outcome at every size and pairing.
    bytes_ = truncated_ ? 0 : static_cast<std::size_t>(env.size);
    const auto sender_kind = static_cast<BufKind>(env.buf_kind);
    pull_source_ = pull_source(env);
    declined_small_ = pull_source_ && declines_small_pull(env);
    if (declined_small_) {
        MPIACC_COUNT("protocol.recv.ipc_declined_small");
        note_declined_pull(peer_);
    }
    // Host data under the threshold came by RTS/CTS because this rank asked for it; into
    // host memory the plain payload is faster again.
    if (sender_kind == BufKind::HOST && dest_.kind == BufKind::HOST && host_rndv_hint_size(ctx.knobs, env.size))
        note_host_payload_route(peer_, 0);
    mode_ = choose_mode(env);
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
        if (start_pull(env)) return;
        // Nothing was pulled: the sender still needs a reply, so fall back to the
        // pipeline rather than strand it.
        MPIACC_COUNT("protocol.ipc.fallback");
        mode_ = TransferMode::PIPELINE;
    }
    // Found by a sender's ABORT, which comes only in the data phase of the other modes: a
    // sender offering a pull waits for the FIN and sends nothing more.
    protocol_state().receivers[{peer_, env.transfer_id}] = this;
    registered_ = true;
    switch (mode_) {
        case TransferMode::DIRECT: start_direct(env); break;
        case TransferMode::SHARED: start_shared(env); break;
        default: start_pipeline(); break;
    }
}

// The receive paths in order of preference: the first that can serve the envelope takes
// it, as NCCL's transports each answer canConnect; the pipeline serves any.
TransferMode RecvOp::choose_mode(const Envelope &env) const {
    struct Path {
        TransferMode mode;
        bool (RecvOp::*can_serve)(const Envelope &) const;
    };
    static constexpr Path kPaths[] = {
        {TransferMode::IPC, &RecvOp::pull_can_serve},
        {TransferMode::DIRECT, &RecvOp::direct_can_serve},
        {TransferMode::SHARED, &RecvOp::shared_can_serve},
    };
    for (const Path &path : kPaths)
        if ((this->*path.can_serve)(env)) return path.mode;
    return TransferMode::PIPELINE;
}

// DIRECT: host data into host memory, one message straight between the two buffers.
bool RecvOp::direct_can_serve(const Envelope &env) const {
    return static_cast<BufKind>(env.buf_kind) == BufKind::HOST && dest_.kind == BufKind::HOST;
}

void RecvOp::start_direct(const Envelope &env) {
    const int tag = data_tag(env.transfer_id, context().tag_ub);
    MPIACC_COUNT("protocol.recv.direct");
    int rc;
    if (char *contig = dest_.contiguous_host())
        rc = netmod().recv_bytes(contig, bytes_, peer_, tag, &data_request_);
    else
        rc = netmod().recv_typed(dest_.host, dest_.count, dest_.type.get(), peer_, tag, &data_request_);
    if (rc != MPI_SUCCESS) {
        fail(MPI_ERR_OTHER, "posting the data receive failed");
        return;
    }
    state_ = State::DATA;
    send_control(ControlType::CTS, static_cast<std::uint16_t>(mode_));
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
    const void *msg = &control_;
    std::size_t len = sizeof control_;
    if (type == ControlType::CTS && one_sided_ && !ring_slots_.empty()) {
        // The slots go with the CTS, which the sender tells by its length.
        cts_frame_.reset(new ControlFrame());
        cts_frame_->msg = control_;
        cts_frame_->slots.count = static_cast<std::uint32_t>(ring_slots_.size());
        std::copy(ring_slots_.begin(), ring_slots_.end(), cts_frame_->slots.slots);
        msg = cts_frame_.get();
        len = cts_length(ring_slots_.size());
    }
    if (netmod().send_control(msg, len, peer_, &control_request_) != MPI_SUCCESS)
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
