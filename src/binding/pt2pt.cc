// MPI point-to-point entry points. Host payloads go straight to PMPI; everything else is
// handed to the protocol (DESIGN.md 2).
#include <cstring>

#include "binding/binding.h"
#include "util/counters.h"
#include "util/probe.h"
#include "pool/pinned_pool.h"
#include "protocol/state.h"

using namespace mpiacc;

namespace mpiacc {

namespace {

// A request that is complete already: MPI_Ibsend's local completion, and a staged send
// whose payload MPICH copied out at once. A send to MPI_PROC_NULL is one MPICH completes
// at the call, far cheaper than a completed generalized request (docs/performance.md,
// "Requests complete at the call"). Its status says MPI_PROC_NULL and count 0, which MPI
// leaves undefined for a send; only MPI_ERROR and the cancelled flag are read there.
MPI_Request completed_request() {
    MPI_Request r = MPI_REQUEST_NULL;
    PMPI_Isend(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, &r);
    return r;
}

int pmpi_send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, SendMode mode,
              MPI_Request *request) {
    if (request) return matching::post_send(buf, count, type, dest, tag, comm, mode, request);
    // A blocking send must not stall transfers this rank owes progress to (DESIGN 2.6).
    if (!transfers_in_flight() || mode == SendMode::BUFFERED) {
        switch (mode) {
            case SendMode::BUFFERED: return PMPI_Bsend(buf, count, type, dest, tag, comm);
            case SendMode::SYNCHRONOUS: return PMPI_Ssend(buf, count, type, dest, tag, comm);
            case SendMode::READY: return PMPI_Rsend(buf, count, type, dest, tag, comm);
            default: return PMPI_Send(buf, count, type, dest, tag, comm);
        }
    }
    MPI_Request r;
    int rc = pmpi_send(buf, count, type, dest, tag, comm, mode, &r);
    if (rc != MPI_SUCCESS) return rc;
    return wait_mpich_request(&r, MPI_STATUS_IGNORE);
}

}  // namespace

// Copies the whole device buffer to `out` now and waits: blocking eager sends and
// MPI_Bsend, whose buffer must be reusable when the call returns.
int stage_device_data(MessageBuffer &mb, void *out, const char *call, std::string *why) {
    std::unique_ptr<Completion> done;
    const bool at_once = copy_waited_at_once(0);
    MPIACC_PROBE("stage.copy");
    int rc = mb.device->copy_to_host(0, out, mb.bytes, &done, why, at_once ? CopyUse::WAITED_AT_ONCE : CopyUse::POLLED);
    if (rc != MPI_SUCCESS) return rc;
    if (!transfers_in_flight()) done->wait_bounded();
    progress_until([&] { return done->test(); });
    MPIACC_PROBE("stage.copied");
    if (done->error() != MPI_SUCCESS) {
        *why = std::string(call) + ": copying the device send buffer to host memory failed";
        return done->error();
    }
    return MPI_SUCCESS;
}

// The outgoing data of a send-and-replace: classified, then packed (host) or staged
// (device) into `copy`, so that the receive may reuse the buffer; the same copy MPICH
// makes internally.
int copy_outgoing_data(void *buf, int count, MPI_Datatype type, const char *call, std::vector<char> *copy,
                       std::string *why) {
    BufferAttrs attrs;
    int rc = classify_buffer(buf, type, &attrs, why);
    MessageBuffer mb;
    if (rc == MPI_SUCCESS) rc = make_message_buffer(buf, count, type, attrs, &mb, why);
    if (rc != MPI_SUCCESS) return rc;
    copy->resize(mb.bytes);
    if (mb.bytes == 0) return MPI_SUCCESS;
    return mb.kind == BufKind::HOST ? pack_range(buf, count, type, 0, copy->data(), mb.bytes)
                                    : stage_device_data(mb, copy->data(), call, why);
}

namespace {

// The op is destroyed later (retire_later).
int finish_blocking_op(std::unique_ptr<Op> owned, MPI_Status *status) {
    Op *op = owned.get();
    int rc = run_to_completion(op);
    MPIACC_PROBE("op.complete");
    give_status(status, op->status);
    if (rc != MPI_SUCCESS) call_errhandler(op->comm, rc);
    retire_later(std::move(owned));
    return rc;
}

// A blocking host receive that landed in a bounce buffer: an envelope starts the
// rendezvous; a payload is copied out, with MPI_ERR_TRUNCATE when it does not fit.
int deliver_from_bounce(const char *bounce, MPI_Status st, void *buf, int count, MPI_Datatype type, long long n,
                        const BufferAttrs &attrs, MPI_Comm comm, const char *call, MPI_Status *status) {
    std::size_t len = received_bytes(st);
    if (len == kEnvelopeBytes && looks_like_envelope(bounce, len)) {
        MessageBuffer mb;
        std::string why;
        make_message_buffer(buf, count, type, attrs, &mb, &why);
        std::unique_ptr<RecvOp> op;
        {
            StateLock lock;
            RecvOp::from_matched(std::move(mb), bounce, len, st, comm, call, &op, true);
        }
        return finish_blocking_op(std::move(op), status);
    }
    if (len > static_cast<std::size_t>(n)) {
        const int code = truncated_receive(&st, call, len, static_cast<std::size_t>(n));
        give_status(status, st);
        call_errhandler(comm, code);
        return code;
    }
    if (len > 0) {
        if (is_builtin_type(type)) {
            std::memcpy(buf, bounce, len);
        } else {
            int rc = unpack_range(bounce, len, buf, count, type, 0);
            if (rc != MPI_SUCCESS)
                return raise_error(comm, rc, call, "unpacking the message into the receive buffer failed");
        }
    }
    give_status(status, st);
    return MPI_SUCCESS;
}

// MPICH truncated a receive of `n` bytes itself (into the user's buffer or one of ours):
// it wrote nothing and has called the communicator's handler; the call returns MPI-ACC's
// code naming the user's call, with count 0 (truncated_receive).
int mpich_truncated(MPI_Status st, std::size_t n, const char *call, MPI_Status *status) {
    const int code = truncated_receive(&st, call, 0, n);
    give_status(status, st);
    return code;
}

// A blocking receive straight into a contiguous host buffer got exactly an envelope's
// length: an envelope starts the rendezvous into the same buffer, whose first bytes
// (`head`, kept before the receive) go back first; anything else was the payload.
int finish_in_place_receive(void *buf, int count, MPI_Datatype type, const InPlaceHead &head, const MPI_Status &st,
                            MPI_Comm comm, const char *call, MPI_Status *status) {
    MessageBuffer mb;
    std::string why;
    make_message_buffer(buf, count, type, BufferAttrs{}, &mb, &why);
    if (looks_like_envelope(mb.contiguous_host(), kEnvelopeBytes)) {
        std::unique_ptr<RecvOp> op;
        {
            StateLock lock;
            RecvOp::from_completed_user_receive(std::move(mb), head, st, comm, call, &op);
        }
        return finish_blocking_op(std::move(op), status);
    }
    give_status(status, st);
    return MPI_SUCCESS;
}

}  // namespace

int run_to_completion(Op *op) {
    op->waited_by_call = true;
    mark_pending(op);
    while (!op->complete) {
        progress_poke();
        if (!op->complete) {
            StateLock lock;
            op->progress();
            // After a wait in the driver the op goes on at once (a pull's FIN, which its
            // sender waits on), not after another round of polling.
            if (!op->complete) {
                // Not done this round, so the call waits anyway: the ops earlier blocking
                // calls retired are destroyed now, off the critical path.
                if (!context().retired_ops.empty()) destroy_retired_ops();
                if (context().pending.get() == 1 && op->wait_for_device()) op->progress();
            }
        }
    }
    settle_pending(op);
    return op->error;
}

int wait_mpich_request(MPI_Request *req, MPI_Status *status) {
    if (!transfers_in_flight()) return PMPI_Wait(req, status);
    for (;;) {
        int flag = 0;
        int rc = PMPI_Test(req, &flag, status);
        if (rc != MPI_SUCCESS || flag) return rc;
        progress_poke();
    }
}

int wait_each(std::vector<MPI_Request> &reqs) {
    for (MPI_Request &r : reqs) {
        int rc = wait_mpich_request(&r, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

namespace {

// Whether a nonblocking send of `bytes` is staged whole at the call (the eager branch of
// send_common below) for every buffer of `kind`, known before the buffer is captured.
bool small_isend_staged_at_call(BufKind kind, SendMode mode, int count, MPI_Datatype type, const Knobs &knobs) {
    const AccelCaps &caps = accel_caps(kind);
    if (!caps.stages_small_isends || caps.ipc) return false;
    if (mode == SendMode::BUFFERED) return true;  // its copy is taken at the call
    const long long bytes = packed_bytes(count, type);
    if (bytes < 0) return false;
    const auto n = static_cast<std::size_t>(bytes);
    return n <= staged_isend_eager_max(knobs) && n != kEnvelopeBytes;
}

// A nonblocking send of small device data with a pinned slot: the copy into the slot is
// issued and the call returns; progress sends the payload once the copy has ended, after
// every payload queued before it (BRIEF S1: the caller is not held for the GPU). Issued
// back to back, a window's copies overlap (docs/performance.md, "Deferred small
// nonblocking device sends").
int post_staged_later(MessageBuffer &&mb, StagingBuffer &&staging, int dest, int tag, MPI_Comm comm, SendMode mode,
                      const char *call, MPI_Request *request) {
    std::unique_ptr<Completion> copy;
    std::string why;
    int rc = mb.device->copy_to_host(0, staging.data(), mb.bytes, &copy, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    MPIACC_COUNT("protocol.send.eager_device");
    std::unique_ptr<Op> op;
    {
        StateLock lock;  // the op joins Context::unposted_payloads
        op.reset(new StagedSendOp(std::move(mb), std::move(staging), std::move(copy), dest, tag, comm, mode, call));
        // Earlier calls' payloads whose copies have ended go to MPICH now, not at the next
        // wait: a window's receiver works on them while this rank issues the rest.
        post_staged_payloads_ahead_of(static_cast<const StagedSendOp *>(op.get()));
    }
    *request = register_user_op(std::move(op), Op::Handle::GREQUEST, MPI_REQUEST_NULL);
    return MPI_SUCCESS;
}

}  // namespace

int send_common(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, SendMode mode,
                const char *call, MPI_Request *request) {
    MPIACC_PROBE("send.entry");
    Context &ctx = context();
    if (!ctx.initialized || dest == MPI_PROC_NULL) return pmpi_send(buf, count, type, dest, tag, comm, mode, request);
    HostPayloadRoute route(comm, dest, request == nullptr);
    if (buffer_is_plain_host(ctx, buf) && route.eager(packed_bytes(count, type))) {
        keep_send_order(comm, dest);
        return pmpi_send(buf, count, type, dest, tag, comm, mode, request);
    }

    BufferAttrs attrs;
    std::string why;
    int rc = classify_buffer(buf, type, &attrs, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    MPIACC_PROBE("send.classified");
    if (attrs.kind == BufKind::HOST) {
        // Only a small nonblocking device send may queue behind the payloads still being
        // staged (below); every other send waits until those before it are in MPICH.
        keep_send_order(comm, dest);
        long long n = packed_bytes(count, type);
        // Invalid arguments are MPICH's to report, with its own checks.
        if (n < 0 || count < 0 || route.eager(n)) return pmpi_send(buf, count, type, dest, tag, comm, mode, request);
    }
    // A blocking call makes every copy of a device buffer before it returns.
    attrs.within_call = request == nullptr;
    // So does a small nonblocking one staged at the call: a kind may then copy on the
    // user's queue (docs/performance.md, "Small nonblocking OpenCL sends").
    attrs.copies_in_call = attrs.within_call || small_isend_staged_at_call(attrs.kind, mode, count, type, ctx.knobs);
    // Inside a node a buffer of a kind with IPC is pulled by the receiver (one copy)
    // rather than staged on both sides (two copies). Only such a send needs the peer's
    // world rank (on another communicator, five PMPI group calls); it is used again below.
    const int world_dest = accel_caps(attrs.kind).ipc ? world_rank_of(comm, dest) : -1;
    attrs.ipc_offer = ipc_pull_offered(attrs.kind, world_dest);
    MessageBuffer mb;
    rc = make_message_buffer(const_cast<void *>(buf), count, type, attrs, &mb, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    MPIACC_PROBE("send.captured");
    if (mb.kind == BufKind::HOST && route.eager(static_cast<long long>(mb.bytes)))
        return pmpi_send(buf, count, type, dest, tag, comm, mode, request);

    bool stages_after_decline = false;  // see SendOp::post
    if (mb.kind != BufKind::HOST) {
        const bool blocking = request == nullptr;
        // A derived type on a device is never offered for a pull (typed_device.h): small
        // ones go staged whole, as without IPC.
        bool ipc_candidate = attrs.ipc_offer && mb.device->holds_plain_bytes();
        // A nonblocking send may stage at the call only when no wait on that copy holds a
        // caller beyond its own running time (BRIEF S1): the kind says (accel.h).
        const bool copy_is_bounded = mb.device->stages_nonblocking_sends();
        const std::size_t eager_max = blocking ? staged_eager_max(ctx.knobs) : staged_isend_eager_max(ctx.knobs);
        const bool may_go_eager = (blocking || copy_is_bounded) && mode != SendMode::BUFFERED &&
                                  mb.bytes != kEnvelopeBytes && mb.bytes <= eager_max;
        const std::size_t after_decline_max =
            blocking ? ctx.knobs.device_eager_max : eager_after_decline_max(ctx.knobs);
        stages_after_decline = ipc_candidate && may_go_eager && mb.bytes <= after_decline_max && world_dest >= 0 &&
                               protocol_state().eager_sends_left;
        // A run a blocking receive's refusal started holds for blocking sends only: the
        // peer's nonblocking receives pull small sends faster than they stage at the call.
        if (stages_after_decline &&
            (blocking || !protocol_state().eager_blocking_only[world_dest].load(std::memory_order_relaxed))) {
            // This peer declined the last small pull (its receive was host memory, which
            // the staged eager path serves in one step, without the pipeline's round trip:
            // docs/performance.md, "Declining small pulls"). Either path is correct for
            // any receive; after a run of staged sends (kEagerRun, doubling while it keeps
            // declining) IPC is offered again, so a peer that now receives into device
            // memory gets the pull back.
            std::atomic<int> &left = protocol_state().eager_sends_left[world_dest];
            // The receiver may have asked for pulls again since (a PULL_HINT: its receives
            // are device memory now).
            if (left.load(std::memory_order_relaxed) > 0) poll_pull_hints();
            int n = left.load(std::memory_order_relaxed);
            while (n > 0 && !left.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
            }
            if (n > 0) ipc_candidate = false;
        }
        // Without a pull, a message below one packet takes a single staged copy (BRIEF
        // P2): RTS/CTS would only add a round trip before the same copies.
        if (!ipc_candidate && may_go_eager) {
            // Small device data: staged whole, sent as the plain payload (DESIGN 2.2),
            // through a pinned slot when one is free.
            StagingBuffer staging(mb.device->staging_pool(), mb.bytes);
            if (!blocking && staging.pinned())
                return post_staged_later(std::move(mb), std::move(staging), dest, tag, comm, mode, call, request);
            keep_send_order(comm, dest);
            rc = stage_device_data(mb, staging.data(), call, &why);
            if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
            MPIACC_COUNT("protocol.send.eager_device");
            if (blocking) {
                rc = pmpi_send(staging.data(), static_cast<int>(mb.bytes), MPI_BYTE, dest, tag, comm, mode, nullptr);
                MPIACC_PROBE("stage.sent");
                return rc;
            }
            MPI_Request payload;
            rc = pmpi_send(staging.data(), static_cast<int>(mb.bytes), MPI_BYTE, dest, tag, comm, mode, &payload);
            if (rc != MPI_SUCCESS) return rc;
            // MPICH copies a small payload out at once: then nothing is left in flight, and
            // the next send of a window may wait for its copy in the driver (not with an
            // op pending: progress would poll every one between copies).
            int sent = 0;
            if (mode != SendMode::SYNCHRONOUS) rc = PMPI_Test(&payload, &sent, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS || sent) {
                if (rc == MPI_SUCCESS) *request = completed_request();
                return rc;
            }
            std::unique_ptr<Op> op(new StagedSendOp(std::move(staging), payload, mode));
            op->comm = comm;
            op->call = call;
            *request = register_user_op(std::move(op), Op::Handle::GREQUEST, MPI_REQUEST_NULL);
            return MPI_SUCCESS;
        }
        if (mode == SendMode::BUFFERED) {
            // MPI_Bsend completes locally (DESIGN 2.5): take the data off the device now.
            std::vector<char> copy(mb.bytes);
            rc = stage_device_data(mb, copy.data(), call, &why);
            if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
            mb.hold_bytes(std::move(copy));
        }
    } else if (mode == SendMode::BUFFERED && mb.packed.empty()) {
        mb.packed.resize(mb.bytes);
        rc = pack_range(mb.host, mb.count, mb.type.get(), 0, mb.packed.data(), mb.bytes);
        if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, "packing the send buffer failed");
    }

    keep_send_order(comm, dest);
    std::unique_ptr<SendOp> op;
    {
        StateLock lock;
        rc = SendOp::post(std::move(mb), dest, tag, comm, mode, call, &op, stages_after_decline, request == nullptr);
    }
    if (rc != MPI_SUCCESS) {
        call_errhandler(comm, rc);
        return rc;
    }
    if (mode == SendMode::BUFFERED) {
        add_detached_op(std::move(op));
        if (request) *request = completed_request();
        return MPI_SUCCESS;
    }
    if (!request) return finish_blocking_op(std::move(op), MPI_STATUS_IGNORE);
    *request = register_user_op(std::move(op), Op::Handle::GREQUEST, MPI_REQUEST_NULL);
    return MPI_SUCCESS;
}

// The commonest nonblocking receive (builtin type, host memory, no stashed envelope that
// could match first): a record, no RecvOp, no look at anything else. A NULL buffer with
// a count is MPICH's to refuse (recv_common).
inline bool plain_host_irecv(const Context &ctx, const void *buf, int count, MPI_Datatype type, int source) {
    return ctx.initialized && source != MPI_PROC_NULL && is_builtin_type(type) && count >= 0 &&
           (buf != nullptr || count == 0) && protocol_state().stash.empty() && buffer_is_plain_host(ctx, buf);
}

int recv_common(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, const char *call,
                MPI_Status *status, MPI_Request *request) {
    MPIACC_PROBE("recv.entry");
    Context &ctx = context();
    if (!ctx.initialized || source == MPI_PROC_NULL) {
        if (request) return PMPI_Irecv(buf, count, type, source, tag, comm, request);
        return PMPI_Recv(buf, count, type, source, tag, comm, status);
    }
    if (request && plain_host_irecv(ctx, buf, count, type, source))
        return post_host_recv(buf, count, type, static_cast<std::size_t>(count) * builtin_type_size(type), source, tag,
                              comm, call, request);
    if (!protocol_state().stash.empty()) {
        std::unique_ptr<StashedEnvelope> s;
        {
            StateLock lock;
            s = take_stashed(source, tag, comm);
        }
        if (s) return recv_stashed(buf, count, type, std::move(s), call, status, request);
    }
    BufferAttrs attrs;
    std::string why;
    if (!buffer_is_plain_host(ctx, buf)) {
        int rc = classify_buffer(buf, type, &attrs, &why);
        if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    }
    MPIACC_PROBE("recv.classified");
    const long long n = packed_bytes(count, type);
    if (attrs.kind == BufKind::HOST && (n < 0 || count < 0 || (!buf && count > 0 && is_builtin_type(type)))) {
        // Invalid arguments are MPICH's to report (a bounce would copy into NULL).
        if (request) return PMPI_Irecv(buf, count, type, source, tag, comm, request);
        return PMPI_Recv(buf, count, type, source, tag, comm, status);
    }
    // Host receives hand MPICH's own request to the user (no generalized request on the
    // host path); completion calls test it directly and finish what an envelope starts.
    if (request && attrs.kind == BufKind::HOST)
        return post_host_recv(buf, count, type, static_cast<std::size_t>(n), source, tag, comm, call, request);

    // A host buffer that can hold an envelope, laid out contiguously, receives in place.
    // Others land in a bounce buffer first: smaller ones because an envelope must fit,
    // non-contiguous ones because MPICH refuses a 200-byte envelope into a typemap whose
    // elements it does not fill ("message truncated" in 4.0.2).
    Layout layout;  // a builtin type's: contiguous from buf
    const bool in_place = static_cast<std::size_t>(n) >= kEnvelopeBytes &&
                          (is_builtin_type(type) || (layout = describe_layout(count, type)).contiguous);

    if (attrs.kind == BufKind::HOST && !request) {
        MPI_Status st;
        st.MPI_ERROR = MPI_SUCCESS;
        if (in_place) {
            // Straight into the user's buffer; an envelope shows up as exactly its length.
            InPlaceHead head;
            head.keep(typed_address(buf, layout.true_lb));
            int rc;
            if (!transfers_in_flight()) {
                rc = PMPI_Recv(buf, count, type, source, tag, comm, &st);
            } else {
                MPI_Request r;
                rc = PMPI_Irecv(buf, count, type, source, tag, comm, &r);
                if (rc == MPI_SUCCESS) rc = wait_mpich_request(&r, &st);
            }
            if (rc == MPI_SUCCESS && received_bytes(st) == kEnvelopeBytes)
                return finish_in_place_receive(buf, count, type, head, st, comm, call, status);
            if (is_truncation(rc)) return mpich_truncated(st, static_cast<std::size_t>(n), call, status);
            give_status(status, st);
            return rc;
        }
        char small[kEnvelopeBytes];
        BounceBuffer large;
        char *bounce = small;
        std::size_t bounce_size = kEnvelopeBytes;
        if (static_cast<std::size_t>(n) > kEnvelopeBytes) {
            bounce_size = std::max(kEnvelopeBytes, std::min<std::size_t>(n, largest_payload(ctx.knobs)));
            large = BounceBuffer(bounce_size);
            bounce = large.data();
        }
        int rc;
        if (!transfers_in_flight()) {
            rc = PMPI_Recv(bounce, static_cast<int>(bounce_size), MPI_BYTE, source, tag, comm, &st);
        } else {
            MPI_Request r;
            rc = PMPI_Irecv(bounce, static_cast<int>(bounce_size), MPI_BYTE, source, tag, comm, &r);
            if (rc == MPI_SUCCESS) rc = wait_mpich_request(&r, &st);
        }
        if (is_truncation(rc)) return mpich_truncated(st, static_cast<std::size_t>(n), call, status);
        if (rc != MPI_SUCCESS) return rc;
        return deliver_from_bounce(bounce, st, buf, count, type, n, attrs, comm, call, status);
    }

    MessageBuffer mb;
    attrs.within_call = request == nullptr;
    int rc = make_message_buffer(buf, count, type, attrs, &mb, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    MPIACC_PROBE("recv.captured");
    std::unique_ptr<RecvOp> op;
    // A blocking receive with nothing else of ours to progress waits in MPICH, as a
    // blocking host receive does (above). Not with other threads in the library: one of
    // them may start what this wait would have to progress.
    const RecvOp::Posting posting =
        !request && !ctx.locking && !transfers_in_flight() ? RecvOp::Posting::BLOCKING_BOUNCE : RecvOp::Posting::BOUNCE;
    {
        StateLock lock;
        rc = RecvOp::post(std::move(mb), source, tag, comm, call, posting, &op, nullptr);
    }
    MPIACC_PROBE("recv.posted");
    if (rc != MPI_SUCCESS) {
        call_errhandler(comm, rc);
        return rc;
    }
    if (!request) return finish_blocking_op(std::move(op), status);
    *request = register_user_op(std::move(op), Op::Handle::GREQUEST, MPI_REQUEST_NULL);
    return MPI_SUCCESS;
}

bool stash_matches(const StashedEnvelope &s, int source, int tag, MPI_Comm comm) {
    if (source != MPI_ANY_SOURCE && s.status.MPI_SOURCE != source) return false;
    if (tag != MPI_ANY_TAG && s.status.MPI_TAG != tag) return false;
    if (s.comm == comm) return true;
    int same = MPI_UNEQUAL;
    PMPI_Comm_compare(s.comm, comm, &same);
    return same == MPI_IDENT;
}

std::unique_ptr<StashedEnvelope> take_stashed(int source, int tag, MPI_Comm comm) {
    for (auto it = protocol_state().stash.begin(); it != protocol_state().stash.end(); ++it) {
        if (!stash_matches(**it, source, tag, comm)) continue;
        std::unique_ptr<StashedEnvelope> out = std::move(*it);
        protocol_state().stash.erase(it);
        return out;
    }
    return nullptr;
}

int recv_stashed(void *buf, int count, MPI_Datatype type, std::unique_ptr<StashedEnvelope> stashed, const char *call,
                 MPI_Status *status, MPI_Request *request) {
    MPI_Comm comm = stashed->comm;
    if (stashed->placeholder != MPI_REQUEST_NULL) PMPI_Request_free(&stashed->placeholder);
    BufferAttrs attrs;
    std::string why;
    int rc = classify_buffer(buf, type, &attrs, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    MessageBuffer mb;
    rc = make_message_buffer(buf, count, type, attrs, &mb, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    std::unique_ptr<RecvOp> op;
    {
        StateLock lock;
        RecvOp::from_matched(std::move(mb), &stashed->envelope, kEnvelopeBytes, stashed->status, comm, call, &op,
                             request == nullptr);
    }
    if (!request) return finish_blocking_op(std::move(op), status);
    *request = register_user_op(std::move(op), Op::Handle::GREQUEST, MPI_REQUEST_NULL);
    return MPI_SUCCESS;
}

}  // namespace mpiacc

// ---------------------------------------------------------------- entry points

namespace {

// The commonest send (builtin type, plain host memory, a payload size): straight to
// MPICH from the entry point, whose frame is then a tail call; send_common's frame
// (room for the device paths) was a visible share of MPICH's 8-byte latency
// (docs/performance.md, "Host fast path and idle receives").
inline bool plain_host_send(const Context &ctx, const void *buf, int count, MPI_Datatype type) {
    return ctx.initialized && is_builtin_type(type) && count >= 0 && buffer_is_plain_host(ctx, buf) &&
           plain_payload_size(ctx, static_cast<std::size_t>(count) * builtin_type_size(type));
}

// The plain send and receive (builtin type, plain host memory, nothing in flight or
// stashed, autodetection off) are tail calls from MPI_Send's and MPI_Recv's entry points,
// which test for them first and call nothing else themselves: an entry point that may
// make an ordinary call (the memory-kind lookup, send_common) saves registers and builds
// its frame before its first test. With the inline copy of short payloads
// (copy_bounced_payload), this brought libmpiacc's share of MPICH's 8-byte host latency
// well inside DESIGN.md 5's budget (docs/performance.md, "Host fast path and idle
// receives"). Everything else goes on, again by a tail call, to the *_checked functions
// below.

// At least an envelope's length: in place; an envelope shows up as exactly its length.
[[gnu::noinline]] int plain_recv_in_place(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                          MPI_Status *status) {
    MPI_Status st;
    st.MPI_ERROR = MPI_SUCCESS;
    InPlaceHead head;
    head.keep(buf);
    int rc = PMPI_Recv(buf, count, type, source, tag, comm, &st);
    if (rc == MPI_SUCCESS && received_bytes(st) == kEnvelopeBytes)
        return finish_in_place_receive(buf, count, type, head, st, comm, "MPI_Recv", status);
    if (rc != MPI_SUCCESS && is_truncation(rc))
        return mpich_truncated(st, static_cast<std::size_t>(count) * builtin_type_size(type), "MPI_Recv", status);
    give_status(status, st);
    return rc;
}

// Shorter than an envelope: into a bounce that can hold one, then one copy.
[[gnu::noinline]] int plain_recv_short(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                       MPI_Status *status) {
    const std::size_t n = static_cast<std::size_t>(count) * builtin_type_size(type);
    alignas(16) char bounce[kEnvelopeBytes];
    MPI_Status st;
    st.MPI_ERROR = MPI_SUCCESS;
    int rc = PMPI_Recv(bounce, kEnvelopeBytes, MPI_BYTE, source, tag, comm, &st);
    if (rc != MPI_SUCCESS) return is_truncation(rc) ? mpich_truncated(st, n, "MPI_Recv", status) : rc;
    const std::size_t len = received_bytes(st);
    if (len > n)
        return deliver_from_bounce(bounce, st, buf, count, type, static_cast<long long>(n), BufferAttrs{}, comm,
                                   "MPI_Recv", status);
    copy_bounced_payload(buf, bounce, len);
    give_status(status, st);
    return MPI_SUCCESS;
}

// A plain receive of any size: which of the two above.
inline int plain_recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status) {
    if (static_cast<std::size_t>(count) * builtin_type_size(type) >= kEnvelopeBytes)
        return plain_recv_in_place(buf, count, type, source, tag, comm, status);
    return plain_recv_short(buf, count, type, source, tag, comm, status);
}

// The entry points' tests pass when autodetection is off; these repeat them with it
// (a host pointer is still plain), then take the general path.
[[gnu::noinline]] int send_checked(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    if (plain_host_send(context(), buf, count, type) && !transfers_in_flight())
        return PMPI_Send(buf, count, type, dest, tag, comm);
    return send_common(buf, count, type, dest, tag, comm, SendMode::STANDARD, "MPI_Send", nullptr);
}

[[gnu::noinline]] int isend_checked(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                    MPI_Request *req) {
    if (plain_host_send(context(), buf, count, type)) return PMPI_Isend(buf, count, type, dest, tag, comm, req);
    return send_common(buf, count, type, dest, tag, comm, SendMode::STANDARD, "MPI_Isend", req);
}

[[gnu::noinline]] int recv_checked(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                   MPI_Status *status) {
    if (plain_host_irecv(context(), buf, count, type, source) && !transfers_in_flight())
        return plain_recv(buf, count, type, source, tag, comm, status);
    return recv_common(buf, count, type, source, tag, comm, "MPI_Recv", status, nullptr);
}

}  // namespace

extern "C" {

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    const Context &ctx = context();
    if (!ctx.autodetect_active && plain_host_send(ctx, buf, count, type) && !transfers_in_flight())
        return PMPI_Send(buf, count, type, dest, tag, comm);
#ifdef MPIACC_PROBES
    int rc = send_checked(buf, count, type, dest, tag, comm);
    MPIACC_PROBE("send.return");
    return rc;
#else
    return send_checked(buf, count, type, dest, tag, comm);
#endif
}
int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    return send_common(buf, count, type, dest, tag, comm, SendMode::BUFFERED, "MPI_Bsend", nullptr);
}
int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    return send_common(buf, count, type, dest, tag, comm, SendMode::SYNCHRONOUS, "MPI_Ssend", nullptr);
}
int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    return send_common(buf, count, type, dest, tag, comm, SendMode::READY, "MPI_Rsend", nullptr);
}
int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    const Context &ctx = context();
    if (!ctx.autodetect_active && plain_host_send(ctx, buf, count, type))
        return PMPI_Isend(buf, count, type, dest, tag, comm, req);
    return isend_checked(buf, count, type, dest, tag, comm, req);
}
int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    return send_common(buf, count, type, dest, tag, comm, SendMode::BUFFERED, "MPI_Ibsend", req);
}
int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    return send_common(buf, count, type, dest, tag, comm, SendMode::SYNCHRONOUS, "MPI_Issend", req);
}
int MPI_Irsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    return send_common(buf, count, type, dest, tag, comm, SendMode::READY, "MPI_Irsend", req);
}
int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status) {
    const Context &ctx = context();
    if (!ctx.autodetect_active && plain_host_irecv(ctx, buf, count, type, source) && !transfers_in_flight())
        return plain_recv(buf, count, type, source, tag, comm, status);
#ifdef MPIACC_PROBES
    int rc = recv_checked(buf, count, type, source, tag, comm, status);
    MPIACC_PROBE("recv.return");
    return rc;
#else
    return recv_checked(buf, count, type, source, tag, comm, status);
#endif
}
int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req) {
    // Checked here too: recv_common's frame (bounce buffers on the stack) costs more than
    // this whole path.
    Context &ctx = context();
    if (plain_host_irecv(ctx, buf, count, type, source))
        return post_host_recv(buf, count, type, static_cast<std::size_t>(count) * builtin_type_size(type), source, tag,
                              comm, "MPI_Irecv", req);
    return recv_common(buf, count, type, source, tag, comm, "MPI_Irecv", MPI_STATUS_IGNORE, req);
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
    Context &ctx = context();
    if (!ctx.initialized)
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                             comm, status);
    MPI_Request reqs[2];
    int rc =
        recv_common(recvbuf, recvcount, recvtype, source, recvtag, comm, "MPI_Sendrecv", MPI_STATUS_IGNORE, &reqs[0]);
    if (rc != MPI_SUCCESS) return rc;
    rc = send_common(sendbuf, sendcount, sendtype, dest, sendtag, comm, SendMode::STANDARD, "MPI_Sendrecv", &reqs[1]);
    if (rc != MPI_SUCCESS) {
        MPI_Cancel(&reqs[0]);
        MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
        return rc;
    }
    MPI_Status st[2];
    rc = MPI_Waitall(2, reqs, st);
    // MPICH's lightweight request for a receive from MPI_PROC_NULL reports source and
    // tag 0 when tested; MPI_Sendrecv itself reports the proper empty status.
    if (source == MPI_PROC_NULL) set_status(&st[0], MPI_PROC_NULL, MPI_ANY_TAG, 0, MPI_SUCCESS, false);
    give_status(status, st[0]);
    if (rc == MPI_ERR_IN_STATUS) rc = st[0].MPI_ERROR != MPI_SUCCESS ? st[0].MPI_ERROR : st[1].MPI_ERROR;
    return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
                         MPI_Comm comm, MPI_Status *status) {
    Context &ctx = context();
    if (!ctx.initialized) return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
    std::vector<char> copy;
    std::string why;
    int rc = copy_outgoing_data(buf, count, type, "MPI_Sendrecv_replace", &copy, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, "MPI_Sendrecv_replace", why);
    // As a large count: the packed bytes of `count` elements may be more than an int holds.
    return MPI_Sendrecv_c(copy.data(), static_cast<MPI_Count>(copy.size()), MPI_BYTE, dest, sendtag, buf, count, type,
                          source, recvtag, comm, status);
}

}  // extern "C"
