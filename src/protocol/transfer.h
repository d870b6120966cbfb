// The rendezvous state machines (DESIGN.md 2): SendOp on the sender, RecvOp on the
// receiver, PersistentOp wrapping either, and the control channel that carries CTS and
// FIN on the private communicator.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <algorithm>

#include "accel/accel.h"
#include "core/knobs.h"
#include "core/matching.h"
#include "core/op.h"
#include "datatype/layout.h"
#include "netmod/netmod.h"
#include "pool/pinned_pool.h"
#include "protocol/envelope.h"

namespace mpiacc {

// A reference on a datatype that outlives the user's MPI_Type_free (BRIEF A4): builtin
// types are kept as they are; derived types are duplicated.
class TypeRef {
public:
    TypeRef() = default;
    explicit TypeRef(MPI_Datatype t);
    ~TypeRef();
    TypeRef(const TypeRef &) = delete;
    TypeRef &operator=(const TypeRef &) = delete;
    TypeRef(TypeRef &&o) noexcept : type_(o.type_), owned_(o.owned_) { o.owned_ = false; }
    TypeRef &operator=(TypeRef &&o) noexcept;
    MPI_Datatype get() const { return type_; }

private:
    MPI_Datatype type_ = MPI_DATATYPE_NULL;
    bool owned_ = false;
};

// One side's buffer: host memory described by (buf, count, type), or a captured device
// buffer. The protocol moves byte ranges of it.
struct MessageBuffer {
    BufKind kind = BufKind::HOST;
    void *host = nullptr;  // host: the user's buffer
    int count = 0;
    TypeRef type;  // host data only: device data moves as packed bytes of `device`
    Layout layout;
    std::vector<char> packed;  // host: packed copy (non-contiguous source, Bsend)
    std::unique_ptr<DeviceBuffer> device;
    std::size_t bytes = 0;  // packed size (send) or capacity (receive)

    // Host memory holding bytes [0, bytes) contiguously, or null when not available.
    char *contiguous_host() const;
    // From here on a host message of the plain bytes `data`, which it owns: MPI_Bsend's
    // copy of device data, or the copy a cancelled send keeps.
    void hold_bytes(std::vector<char> &&data);
};

// Host memory a matching receive lands in before MPI-ACC knows whether it is an
// envelope or a payload. Not zero-filled (only what arrives is touched), and large ones
// are reused from a small cache: device receives size it for the largest payload a
// sender may send (2 MiB by default), and allocating that per receive cost more than
// the transfers themselves (docs/performance.md, "Bounce buffers"). A pinnable one,
// whatever its size, is whole pages from the cache, so that pin() can page-lock it once
// for good.
struct CachedBounce;

class BounceBuffer {
public:
    BounceBuffer() = default;
    explicit BounceBuffer(std::size_t bytes, bool pinnable = false);
    ~BounceBuffer() {
        if (data_) release();
    }
    BounceBuffer(const BounceBuffer &) = delete;
    BounceBuffer &operator=(const BounceBuffer &) = delete;
    BounceBuffer(BounceBuffer &&o) noexcept;
    BounceBuffer &operator=(BounceBuffer &&o) noexcept;
    char *data() const { return data_; }
    std::size_t size() const { return size_; }
    // Page-locks the buffer with `accel` (once: a cached buffer keeps it), so that a
    // payload received into it goes to the device by DMA. True when it is pinned for
    // that kind; a refusal is remembered per kind. Only whole_pages() buffers are pinned.
    bool pin(Accel *accel);
    bool pinned() const { return pinned_by_ != nullptr; }
    // Whole pages from the cache: pinnable, or at least the cache's smallest large size.
    bool whole_pages() const { return whole_pages_; }

private:
    void release();
    void adopt(const CachedBounce &b);  // takes a free bounce's buffer and registration
    char *data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
    bool whole_pages_ = false;
    Accel *pinned_by_ = nullptr;   // registered with this kind; undone before freeing
    Accel *refused_by_ = nullptr;  // this kind refused to register it: not asked again
};

// Frees the cached bounce buffers, undoing their registrations (MPI_Finalize, before the
// accelerators shut down).
void clear_bounce_cache();

// Payloads of at least this many bytes for device memory get their bounce buffer
// page-locked; smaller ones only where the bounce is small and the kind registers host
// memory (BounceBuffer: kept per size and page-locked once), not one registration per
// receive.
constexpr std::size_t kPinnedBounceMin = 64u << 10;

// Small blocking device sends that go staged to a peer which declined an IPC pull,
// before IPC is offered to it again: kEagerRun after a first refusal, twice as many
// after each refusal in a row, at most kEagerRunMax. Every refused offer costs a round
// trip, so with a fixed run the first send of every run to a host receiver paid it, and
// small sends to such a peer ran slower with IPC on than off (docs/performance.md,
// "Declining small pulls"). A peer that turns to device receives waits at most
// kEagerRunMax staged sends for its pulls.
constexpr int kEagerRun = 16;
constexpr int kEagerRunMax = 1024;

// SHARED mode's messages for one chunk, at an address that stays put while MPICH holds
// it (ChunkStates move within their vector).
struct SharedChunkMessages {
    ChunkNotice notice{};   // sender: sent; receiver: received into
    ControlMessage done{};  // receiver: its CHUNK_DONE
};

struct ChunkState {
    std::size_t index = 0, offset = 0, len = 0;
    bool sent = false;  // sender: its network send (or SHARED notice) is posted
    // Sender, SHARED mode: the receiver may still read the slot (no CHUNK_DONE yet), so
    // it is not released, not even by a failed transfer.
    bool awaiting_ack = false;
    void *staging = nullptr;
    PinnedPool *pool = nullptr;
    std::unique_ptr<Completion> copy;
    NetHandle request;  // the chunk's (or its notice's) transfer
    std::unique_ptr<SharedChunkMessages> shared;
    // Receiver, SHARED: the sender's segment this chunk's copy reads, mapped here; its
    // use (map_peer_segment) is released once the copy is over.
    void *peer_segment = nullptr;
    // Receiver, SHARED: NETWORK is the notice's receive, LANDING the copy out of the
    // sender's slot, ACKING the CHUNK_DONE's send.
    // Receiver, one-sided: FINISHED has landed (and been copied) but waits for the
    // chunks before it, as slots are handed back in order.
    enum class Stage { COPYING, NETWORK, LANDING, ACKING, FINISHED } stage = Stage::COPYING;

    // Chunk `index` of a transfer of `total` bytes cut into pieces of `chunk_size`.
    static ChunkState at(std::size_t index, std::size_t chunk_size, std::size_t total) {
        ChunkState c;
        c.index = index;
        c.offset = index * chunk_size;
        c.len = std::min(chunk_size, total - c.offset);
        return c;
    }
};

// Chunks a pipeline transfer keeps in flight on each side: MPIACC_PIPELINE_DEPTH, at
// least 2 (double buffering).
inline long transfer_depth(const Knobs &k) { return std::max<long>(2, k.pipeline_depth); }

// Receiver: the depth of a pipeline whose chunks MPICH carries from a sender on this
// node, where a CPU copies each one between the ranks and fewer bytes in flight ran
// faster (docs/performance.md, "Pipeline depth between ranks of one node"): at most
// kNodePipelineDepth.
constexpr long kNodePipelineDepth = 2;
inline long node_transfer_depth(const Knobs &k) { return std::min(transfer_depth(k), kNodePipelineDepth); }

// Receiver: what one pipeline transfer of `nchunks` chunks (at most `depth` in flight)
// holds of its sender's admission budget while it runs (RecvOp::admit_pipeline): a
// transfer of several chunks holds its depth in chunks, one of a single chunk holds 1.
struct PipelineShare {
    long chunks = 0;
    // The transfer's depth: the sender's chunk budget is MPIACC_PIPELINE_TRANSFERS times it.
    long depth = 0;
    bool several() const { return chunks > 1; }
};

// Chunks of a transfer that ended early (it failed, or was destroyed unfinished). A
// staging slot goes back to its pool only once nothing can touch it any more: a device
// copy still running into it, or a receive MPICH had already matched (a cancel cannot
// stop that one), would otherwise write into whichever transfer took the slot next.
// So that nothing lands in the user's buffer after the call has returned either, a
// failed op completes only once its chunks are retired. A sender that fails tells its
// receiver how many chunk sends it posted (ABORT) and the receiver takes exactly those,
// so a failed sender cancels none of its sends: it waits for them (retire_stopped_chunks).
enum class ChunkFlow { SENDING, RECEIVING };
// Cancels what can be cancelled: receives (one already matched still completes when its
// data arrives, so it is kept and tested), and, for a destructor (retire_chunks_now),
// sends, which only read their slot and are freed at once. Device copies run on.
void stop_chunks(std::vector<ChunkState> *chunks, ChunkFlow flow);
// Releases the chunks whose copy and request have ended. True once none is left.
bool retire_stopped_chunks(std::vector<ChunkState> *chunks);
// For a destructor (finalize, the op unfinished): stops the chunks and waits a bounded
// time for them to end (what is left then keeps its slot until the pool itself goes).
void retire_chunks_now(std::vector<ChunkState> *chunks, ChunkFlow flow);
// MPIACC_FAULT_CHUNK_COPY: true (and *why says so) when this pipeline chunk copy,
// counted per process, is the one the knob names for this rank, so that tests reach the
// failure paths. Costs a test of an empty string when the knob is unset.
bool chunk_copy_fault(std::string *why);

class SendOp : public Op {
public:
    // Sends the envelope at once on the user's communicator (so ordering holds, DESIGN
    // 2.1) and waits for the receiver's CTS or FIN. `stages_after_decline`: a declined
    // pull offer would make the next small sends to this peer go staged (send_common),
    // which the envelope tells the receiver. `blocking`: the send of a blocking call.
    static int post(MessageBuffer &&source, int dest, int tag, MPI_Comm comm, SendMode mode, const char *call,
                    std::unique_ptr<SendOp> *out, bool stages_after_decline = false, bool blocking = false);
    ~SendOp() override;
    void progress() override;
    int cancel() override;
    std::unique_ptr<Op> release_from_user(int *rc) override;
    bool awaits_match() const override { return state_ == State::AWAIT_REPLY && !have_reply_; }
    // `slots`: what a CTS names of the receiver's slots (null: a plain CTS).
    void on_control(const ControlMessage &msg, const CtsSlots *slots = nullptr);

private:
    SendOp() = default;
    void fail(int error_class, const char *what);
    void start_data();
    void pipeline_step();
    void *acquire_slot(PinnedPool *pool);
    void *host_chunk_slot(const ChunkState &c);
    void *one_sided_host_slot(const ChunkState &c);
    bool transport_failed();
    void copy_host_chunk(ChunkState &c, void *slot, PinnedPool *pool);
    bool post_chunk(ChunkState &c, int tag);
    bool post_ready_chunks(int tag);
    void finish();
    void read_fin_word();
    void release_fin_word();

    enum class State { AWAIT_REPLY, DATA, DONE } state_ = State::AWAIT_REPLY;
    bool shared_ = false;  // SHARED mode: chunks stay in our slots, the receiver copies them
    // PIPELINE mode, host buffer, a receiver on this node: the chunks host_chunk_staged
    // picks go through huge-page slots (host_chunk_pool()) where one is free.
    bool stage_host_chunks_ = false;
    MessageBuffer source_;
    Envelope envelope_{};
    MPI_Request envelope_request_ = MPI_REQUEST_NULL;
    bool blocking_ = false;     // the send of a blocking call
    bool synchronous_ = false;  // MPI_Ssend/MPI_Issend: complete only once matched
    int peer_ = -1;             // receiver's rank in the private communicator
    std::uint64_t id_ = 0;
    bool registered_ = false;
    ControlMessage reply_{};
    bool have_reply_ = false;
    // The FIN word the envelope offers (protocol/fin_words.h), until the reply: -1 for none.
    int fin_word_ = -1;
    NetHandle data_request_;    // DIRECT
    std::vector<char> prefix_;  // DIRECT, truncated non-contiguous
    std::vector<ChunkState> chunks_;
    std::size_t next_chunk_ = 0, next_to_send_ = 0, chunks_done_ = 0, nchunks_ = 0;
    std::size_t chunk_size_ = 0, depth_ = 0, send_bytes_ = 0;
    bool aborted_to_peer_ = false;
    // The receiver's slots (its CTS named them): chunk k is written into slots_[k mod n].
    std::vector<RemoteSlot> slots_;
    bool one_sided_ = false;
    bool transport_failed_ = false;  // the netmod to the peer failed: the ABORT says so
    ControlMessage abort_msg_{};
    NetHandle abort_request_;
};

// A receive MPI-ACC handles: into device memory, into a bounce buffer (receives smaller
// than an envelope), or a host receive that turned out to be an envelope.
class RecvOp : public Op {
public:
    // How the matching receive is posted on the user's communicator.
    enum class Posting {
        BOUNCE,          // into an internal buffer; the request is internal
        WATCHED_BOUNCE,  // into an internal buffer; the MPICH request is the user's handle
        IN_PLACE,        // into the user's host buffer; the MPICH request is the user's handle
                         // (WATCHED_BOUNCE instead when another pending in-place receive
                         // owns some of those bytes)
        // Into an internal buffer by a blocking PMPI_Recv, matched before post returns. Only
        // for a blocking call with nothing of MPI-ACC's in flight and no other thread in the
        // library (nothing to progress while MPICH waits), like a blocking host receive.
        BLOCKING_BOUNCE,
    };
    // Fails only when MPICH refuses the receive (for BLOCKING_BOUNCE: with an error other
    // than truncation, which the op reports as a matched receive's would be).
    static int post(MessageBuffer &&dest, int source, int tag, MPI_Comm comm, const char *call, Posting posting,
                    std::unique_ptr<RecvOp> *out, MPI_Request *matching);
    // Continues from an envelope (or payload) already received into `data` of `len` bytes
    // with matching status `st` (blocking receive, probe stash, MPI_Mrecv).
    // `blocking`: the receive of a blocking call (MPI_Recv, MPI_Mrecv).
    static int from_matched(MessageBuffer &&dest, const void *data, std::size_t len, const MPI_Status &st,
                            MPI_Comm comm, const char *call, std::unique_ptr<RecvOp> *out, bool blocking);
    // Continues a host receive posted without a RecvOp (core/host_recv.h) whose matching
    // message is the envelope at `envelope`. `held`, when not MPI_REQUEST_NULL, is the
    // completed MPICH request behind the user's handle; the op frees it when destroyed.
    static int from_host_receive(MessageBuffer &&dest, const void *envelope, const MPI_Status &st, MPI_Comm comm,
                                 const char *call, MPI_Request held, std::unique_ptr<RecvOp> *out);
    // Continues a watched host receive whose request already completed (MPICH freed it).
    // (Only blocking receives land in the user's buffer that way.)
    // `head`: the buffer's first bytes as they were before the receive, put back once the
    // envelope is read.
    static int from_completed_user_receive(MessageBuffer &&dest, const InPlaceHead &head, const MPI_Status &st,
                                           MPI_Comm comm, const char *call, std::unique_ptr<RecvOp> *out);
    ~RecvOp() override;
    void progress() override;
    int cancel() override;
    // The sender gave up after the CTS (ABORT): fail instead of waiting for chunks.
    void on_abort(const ControlMessage &msg);
    bool wait_for_device() override;
    bool cancel_when_abandoned() const override { return true; }
    void release_pooled() override;

private:
    RecvOp() = default;
    // How the copy issued now is waited for: at once by the blocking call driving it alone.
    CopyUse copy_use() const;
    void fail(int error_class, const std::string &what);
    // A failure of this side while the sender goes on sending (a chunk's device copy):
    // the remaining chunks are still received, and dropped, so that the sender's posted
    // sends complete; the receive then completes with the error (finish_drain).
    void drain(int error_class, const std::string &what);
    void finish_drain();
    void matched_from(const MPI_Status &st);
    void on_matched(const MPI_Status &st, const void *data, std::size_t len);
    void deliver_payload(const void *data, std::size_t len);
    void on_envelope(const Envelope &env);
    void send_control(ControlType type, std::uint16_t mode_or_status);
    // The pull ended (status 0) or failed: the sender's FIN word, or the FIN message.
    void tell_sender_done(std::uint16_t status);
    void pipeline_step();
    // The receive paths (recv_op.cc: choose_mode asks each whether it can serve).
    TransferMode choose_mode(const Envelope &env) const;
    Accel *pull_source(const Envelope &env) const;
    bool declines_small_pull(const Envelope &env) const;
    bool pull_can_serve(const Envelope &env) const;
    bool direct_can_serve(const Envelope &env) const;
    bool shared_can_serve(const Envelope &env) const;
    bool start_pull(const Envelope &env);
    void start_direct(const Envelope &env);
    void start_shared(const Envelope &env);
    void start_pipeline();
    void start_chunks();
    void start_shared_copy(ChunkState &c);
    bool acknowledge_chunk(ChunkState &c);
    bool admit_pipeline();
    void leave_pipeline();
    // Leaves Context::receivers and the pipeline admission.
    void withdraw();
    void payload_stage_step();
    void issue_pulls();
    void ipc_step();
    bool slot_pulls_step();
    void finish_data();

    enum class State { MATCHING, PAYLOAD_COPY, PAYLOAD_STAGE, AWAIT_SLOT, DATA, IPC_PULL, FIN, DONE };
    State state_ = State::MATCHING;
    MessageBuffer dest_;
    MPI_Request matching_request_ = MPI_REQUEST_NULL;
    bool matching_is_user_handle_ = false;  // never free it while the user may hold it
    bool data_in_user_buffer_ = false;      // IN_PLACE: the message landed in dest_.host
    bool just_matched_ = false;             // matched_from ran since the last progress()
    InPlaceHead in_place_head_;             // IN_PLACE posting: the buffer's first bytes before it
    std::uint32_t in_place_range_ = 0;      // token in Context::in_place_ranges, 0 = none
    BounceBuffer bounce_;
    // Or, for a device receive, pinned memory its kind lent (DeviceBuffer::
    // acquire_receive_bounce), posted instead of bounce_; given back by the destructor.
    char *device_bounce_ = nullptr;
    // Where the matching receive was posted (bounce_ or device_bounce_).
    char *posted_bounce() const { return device_bounce_ ? device_bounce_ : bounce_.data(); }
    std::unique_ptr<Completion> payload_copy_;
    const char *payload_ = nullptr;  // PAYLOAD_STAGE: the payload, in bounce_
    Envelope envelope_{};
    int peer_ = -1;
    TransferMode mode_ = TransferMode::DIRECT;
    std::size_t bytes_ = 0, chunk_size_ = 0, depth_ = 0, nchunks_ = 0;
    bool truncated_ = false;
    ControlMessage control_{};
    NetHandle control_request_;
    NetHandle data_request_;
    std::vector<char> packed_;  // non-contiguous host destination
    std::vector<ChunkState> chunks_;
    std::size_t next_chunk_ = 0, chunks_done_ = 0;
    void *reserved_slot_ = nullptr;  // first slot, held before the CTS goes out
    PinnedPool *pool_ = nullptr;
    Accel *pull_source_ = nullptr;  // the sender's component, when a pull could serve
    std::unique_ptr<DeviceBuffer> ipc_source_;
    std::vector<std::unique_ptr<Completion>> ipc_copies_;
    // A pull into host memory below kPullIntoHostMin, or not contiguous: chunk by chunk
    // into pinned slots of this process's device (chunks_), each copied out on landing.
    bool pull_through_slots_ = false;
    bool blocking_ = false;        // the receive of a blocking call: latency comes first
    bool declined_small_ = false;  // declined a small pull for that reason (CTS status)
    int ipc_error_ = MPI_SUCCESS;  // the first pull that failed, to or in the driver
    std::string ipc_why_;
    bool registered_ = false;
    PipelineShare admitted_;        // counted in Context::pipeline_admission (admit_pipeline)
    bool waiting_counted_ = false;  // counted there as a receive of several chunks waiting
    bool queued_ = false;           // waited for admission at least once
    bool draining_ = false;         // see drain()
    int shared_pid_ = 0;            // SHARED: the sender's process, whose segments the notices name
    // Receives of chunks the sender never posted (it failed, ABORT): cancelled, retired.
    std::vector<ChunkState> unsent_;
    // One-sided (the CTS names slots): the netmod was asked whether the peer is reached
    // so; ring_ holds the slots named, chunk k in ring_[k mod n] (null while its chunk
    // is in flight); cts_frame_ is the CTS with them.
    bool reach_asked_ = false;
    bool one_sided_ = false;
    std::vector<void *> ring_;
    std::vector<RemoteSlot> ring_slots_;
    std::unique_ptr<ControlFrame> cts_frame_;
    bool prepare_one_sided();
    bool name_slots();
    void release_ring();
    bool one_sided_failed();
};

// A nonblocking send of device data staged whole (below one packet, nothing of the
// user's to wait for): the plain payload's MPICH send, and the staging memory it reads
// until that send completes.
class StagedSendOp : public Op {
public:
    // The payload is in MPICH already: `request` sends it.
    StagedSendOp(StagingBuffer &&staging, MPI_Request request, SendMode mode = SendMode::STANDARD)
        : staging_(std::move(staging)), request_(request), mode_(mode) {}
    // The payload is still being copied into `staging` by `copy`: the op joins
    // Context::unposted_payloads, and post_staged_payloads() sends it, in call order,
    // once the copy has ended. `source` (the user's device buffer) is kept until then.
    // Unposted exactly while it holds the copy.
    StagedSendOp(MessageBuffer &&source, StagingBuffer &&staging, std::unique_ptr<Completion> copy, int dest, int tag,
                 MPI_Comm comm, SendMode mode, const char *call);
    ~StagedSendOp() override;
    void progress() override;
    int cancel() override;
    std::unique_ptr<Op> release_from_user(int *rc) override;
    // Posted (a request of MPICH's): it may wait for a matching receive.
    bool awaits_match() const override { return !copy_ && request_ != MPI_REQUEST_NULL && !complete; }
    bool wait_for_device() override;

    // Sends the payload once its copy has ended (or completes the op: the copy failed, or
    // the send was cancelled before it). False while the copy runs. Caller holds the
    // StateLock; the op is the head of Context::unposted_payloads.
    bool post_when_staged();
    // Whether the copy into the staging memory has ended (or failed): post_when_staged
    // would not wait. Unposted ops only.
    bool copied() { return copy_->test(); }
    // Call order among the unposted payloads; the communicator and rank it goes to.
    std::uint64_t sequence() const { return sequence_; }
    bool goes_to(MPI_Comm c, int rank) const { return c == comm && rank == dest_; }

private:
    MessageBuffer source_;   // the device buffer the copy reads; kept while staging_ is
    StagingBuffer staging_;  // what MPICH sends from, until the send completes
    MPI_Request request_ = MPI_REQUEST_NULL;
    std::unique_ptr<Completion> copy_;  // unposted: the staging copy
    int dest_ = -1, tag_ = 0;
    SendMode mode_ = SendMode::STANDARD;
    std::uint64_t sequence_ = 0;  // 0: posted at construction, never queued
    bool cancel_requested_ = false;
};

// Unposted payloads (StagedSendOp) are posted to MPICH in call order by progress, each
// once its copy has ended. Caller holds the StateLock.
void post_staged_payloads();
// The call that queued `op` (the newest) posts the payloads ahead of it, when more than
// kStagedPostBatch are and the copy of the latest of them has ended; it does not ask
// about the copy it has only issued. Caller holds the StateLock.
constexpr std::size_t kStagedPostBatch = 8;
void post_staged_payloads_ahead_of(const StagedSendOp *op);
// DESIGN 2.1: no send overtakes an earlier one to the same communicator and rank. Before
// anything else is sent to (comm, dest), drives progress until every payload queued
// earlier for it is in MPICH; costs one relaxed load while none is queued. The second
// form waits for all of them (MPI_Start of a request whose destination MPI-ACC does not
// know). Not under the StateLock.
void keep_send_order(MPI_Comm comm, int dest);
void keep_send_order();

// MPI_*_init requests: arguments kept, a fresh SendOp/RecvOp per MPI_Start.
class PersistentOp : public Op {
public:
    enum class Kind { SEND, RECV };
    PersistentOp(Kind kind, void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm, SendMode mode,
                 const char *call);
    int start() override;
    void progress() override;
    int cancel() override;
    std::unique_ptr<Op> release_from_user(int *rc) override;
    bool awaits_match() const override { return running_ && !running_->complete && running_->awaits_match(); }
    bool active() const override { return running_ != nullptr; }
    bool persistent() const override { return true; }
    void reset_after_completion() override;

private:
    Kind kind_;
    void *buf_;
    int count_;
    TypeRef type_;
    int peer_, tag_;
    SendMode mode_;
    std::unique_ptr<Op> running_;
};

// CTS, FIN and ABORT messages on the private communicator, taken by matched probe.
// Receives kept posted for them would be wildcard (MPI_ANY_SOURCE) receives, and UCX
// then searches its wildcard list for every message the rank gets, user traffic
// included, which slows plain MPICH messages too (docs/performance.md, "Host fast path
// and idle receives"). Probing posts nothing, costs nothing while no transfer is in
// flight, and bounds what it holds (DESIGN 2.7) at one message.
//
// Takes the control messages that have arrived and hands each to its transfer. Progress
// calls it only while this rank has transfers. Caller holds the StateLock.
void poll_control_messages();
// MPI_Finalize: takes what is left for transfers that are gone.
void drain_control_messages();

// Receiver: the PipelineShare of a transfer of `nchunks` chunks, `depth` in flight at most.
inline PipelineShare pipeline_share(std::size_t nchunks, std::size_t depth) {
    PipelineShare share;
    share.depth = std::max<long>(2, static_cast<long>(depth));
    share.chunks = nchunks > 1 ? share.depth : 1;
    return share;
}
// Receiver: whether a transfer with `share` may start beside the chunks the sender's other
// transfers hold (`held_chunks`), while `several_waiting` transfers of several chunks
// wait. MPIACC_PIPELINE_TRANSFERS bounds the chunks (0: no bound); the first transfer
// always starts, however large. A single chunk does not pass a waiting transfer of
// several: a steady run of small receives would otherwise keep the larger one waiting.
inline bool pipeline_admits(const Knobs &k, long held_chunks, int several_waiting, const PipelineShare &share) {
    if (k.pipeline_transfers <= 0) return true;
    if (!share.several() && several_waiting > 0) return false;
    if (held_chunks == 0) return true;
    return held_chunks + share.chunks <= k.pipeline_transfers * share.depth;
}

// Whether chunk `index`, `len` bytes of a host buffer that a pipeline sends through MPICH
// to a receiver on this node, is first copied into a huge-page slot, with
// `sends_in_flight` sends of this rank open (this one included). MPICH's single copy
// between the ranks reads 2 MiB pages faster than 4 KiB ones, which pays for the copy from
// kHostChunkStagingMin a chunk (docs/performance.md, "Host chunk staging"). A lone send's
// first chunk goes as it is: the receiver reads it while the next one is copied.
constexpr std::size_t kHostChunkStagingMin = std::size_t{1} << 20;
inline bool host_chunk_staged(std::size_t index, std::size_t len, std::size_t sends_in_flight) {
    if (len < kHostChunkStagingMin) return false;
    return index != 0 || sends_in_flight > 1;
}

// Host payloads under the rendezvous threshold go eagerly, and a device receive takes
// each into a bounce buffer of its own, which MPICH writes cold; RTS/CTS moves them
// through a few warm staging slots instead. So a rank whose device receives get host
// payloads of at least kHostRndvHintMin asks their sender to send those by RTS/CTS
// (docs/performance.md, "Rendezvous hint for host payloads"). Host receives keep the
// eager path. A host message this size could be hinted: at least kHostRndvHintMin and
// under MPIACC_HOST_RNDV_THRESHOLD, past which it goes by RTS/CTS anyway.
constexpr std::size_t kHostRndvHintMin = std::size_t{256} << 10;
inline bool host_rndv_hint_size(const Knobs &k, std::size_t bytes) {
    return bytes >= kHostRndvHintMin && (k.host_rndv_threshold == 0 || bytes < k.host_rndv_threshold);
}
// Host payloads of fewer bytes go from the entry points straight to MPICH
// (Context::plain_send_below): the rendezvous threshold, or kHostRndvHintMin where lower.
inline std::size_t plain_send_limit(const Knobs &k) {
    const std::size_t below = k.host_rndv_threshold ? k.host_rndv_threshold : SIZE_MAX;
    return std::min(below, kHostRndvHintMin);
}
// Receiver: tells `world_peer`, once per change, to send its host payloads of at least
// `from` bytes (kHostRndvHintMin) by RTS/CTS, or with 0 to stop: a device receive got
// such a payload, or a host receive got an envelope for host data of a
// host_rndv_hint_size. Caller holds the StateLock.
void note_host_payload_route(int world_peer, std::size_t from);
// Receiver: this rank declined a small pull of `world_peer` for a blocking host receive,
// which starts that sender's run of staged small sends (kEagerRun).
void note_declined_pull(int world_peer);
// Receiver: a device receive got a payload of at most MPIACC_DEVICE_EAGER_MAX bytes from
// `peer` of `comm`. If this rank declined that sender's last small pull, it asks the
// sender (once) to offer pulls again: into device memory one pull beats the two copies of
// a staged send (docs/performance.md, "Declining small pulls"). Caller holds the
// StateLock.
void note_small_device_payload(MPI_Comm comm, int peer);
// Sender: takes waiting control messages (a PULL_HINT among them) once in a few calls;
// send_common asks while it stages small sends after a decline. Takes the StateLock.
void poll_pull_hints();
// Sender: whether host data of `bytes`, a host_rndv_hint_size, to (comm, dest) is to go
// by RTS/CTS because its receiver asked. Takes waiting control messages now and then,
// under the StateLock.
bool host_rndv_hinted(MPI_Comm comm, int dest, std::size_t bytes);
// MPI_Finalize, before drain_control_messages: takes every hint (RNDV_HINT, PULL_HINT)
// sent to this rank (how many, the ranks sum collectively over proto_comm) and completes
// those it sent.
void finish_peer_hints();

// An envelope a probe had to receive to learn the message's real size.
// Usually an envelope; a 200-byte payload from a program not using MPI-ACC is kept as
// received and delivered as is.
struct StashedEnvelope {
    MPI_Comm comm;
    MPI_Status status;  // matching status as MPICH reported it (count = envelope bytes)
    Envelope envelope;
    MPI_Request placeholder = MPI_REQUEST_NULL;  // backs a fake MPI_Message handle
    bool is_envelope() const { return looks_like_envelope(&envelope, sizeof envelope); }
};

// Captures the bytes [lo, hi) relative to the buffer argument `buf` (a device pointer,
// or a cl_mem whose offsets count from MPIX_ACC_OFFSET) as one region of attrs' kind:
// a datatype's footprint. *out stays null for page-locked host memory tagged as device
// memory. Returns an MPI error class with *why on failure.
int capture_footprint(void *buf, std::int64_t lo, std::int64_t hi, const BufferAttrs &attrs,
                      std::unique_ptr<DeviceBuffer> *out, std::string *why);

// Builds the MessageBuffer for a call's (buf, count, type) with the classified attrs:
// host, or a device buffer captured now. Returns an MPI error class with *why on failure.
int make_message_buffer(void *buf, int count, MPI_Datatype type, const BufferAttrs &attrs, MessageBuffer *out,
                        std::string *why);

// Largest payload a sender may send without an envelope: host data under the
// rendezvous threshold, or device data a blocking send staged whole.
inline std::size_t largest_payload(const Knobs &k) {
    if (k.host_rndv_threshold == 0) return SIZE_MAX;
    return std::max(k.host_rndv_threshold - 1, k.device_eager_max);
}

// Largest blocking device send that goes staged whole, as the plain payload, when no IPC
// pull is on offer: one below a packet (BRIEF P2) that every receiver takes as a payload.
// Through RTS/CTS such sends trailed staging by hand: the round trip comes before the
// same copies (docs/performance.md, "Staged small device sends").
inline std::size_t staged_eager_max(const Knobs &k) {
    return std::max(k.device_eager_max, std::min(k.chunk_size - 1, largest_payload(k)));
}

// Largest nonblocking device send (of a kind that may: stages_nonblocking_sends) that
// goes staged whole at the call. Never more than a blocking send would.
inline std::size_t staged_isend_eager_max(const Knobs &k) {
    return std::min(k.device_isend_eager_max, staged_eager_max(k));
}

// Largest device send that goes staged, instead of offering a pull, to a peer that
// declined the last offer (kEagerRun): a nonblocking one up to what it may stage at the
// call, since windows of such sends ran faster staged than through RTS/CTS
// (docs/performance.md, "Staged small device sends").
inline std::size_t eager_after_decline_max(const Knobs &k) {
    return std::max(k.device_eager_max, staged_isend_eager_max(k));
}

// Bytes a completed receive's status reports. MPICH keeps the count in bytes in the
// status itself (count_lo, and count_hi above the cancelled bit); reading it there keeps
// a PMPI call off the small-message path.
inline std::size_t received_bytes(const MPI_Status &st) {
    return static_cast<std::size_t>(static_cast<unsigned>(st.count_lo)) |
           (static_cast<std::size_t>(static_cast<unsigned>(st.count_hi_and_cancelled) >> 1) << 32);
}

// Status fields for MPI-ACC-completed operations.
void set_status(MPI_Status *st, int source, int tag, std::size_t bytes, int error, bool cancelled);

// A receive whose message did not fit its buffer ends as MPICH 4.0.2's own do at every
// size: MPI_ERR_TRUNCATE, status count 0 and nothing written into the buffer. Returns the
// error code (MPI-ACC's message naming `call`; `message_bytes` 0 when MPICH truncated and
// the size is unknown) and sets it, with count 0, in *st (source and tag kept).
int truncated_receive(MPI_Status *st, const char *call, std::size_t message_bytes, std::size_t buffer_bytes);

// rc is an error of class MPI_ERR_TRUNCATE (MPICH's, from a receive it truncated itself).
bool is_truncation(int rc);

// Hands `st` to a single-completion call's status argument: every field but MPI_ERROR,
// which those calls leave as the user set it (MPI 4.0 3.2.5: only the multiple-completion
// calls write it, with MPI_ERR_IN_STATUS).
inline void give_status(MPI_Status *out, const MPI_Status &st) {
    if (out == MPI_STATUS_IGNORE) return;
    const int keep = out->MPI_ERROR;
    *out = st;
    out->MPI_ERROR = keep;
}

}  // namespace mpiacc
