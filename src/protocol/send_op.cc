#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

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

int SendOp::post(MessageBuffer &&source, int dest, int tag, MPI_Comm comm, SendMode mode, const char *call,
                 std::unique_ptr<SendOp> *out, bool stages_after_decline, bool blocking) {
    Context &ctx = context();
    std::unique_ptr<SendOp> op(new SendOp());
    op->source_ = std::move(source);
    op->comm = comm;
    op->call = call;
    op->peer_ = world_rank_of(comm, dest);
    op->blocking_ = blocking;
    op->synchronous_ = mode == SendMode::SYNCHRONOUS;
    op->id_ = protocol_state().new_transfer_id();

    Envelope &e = op->envelope_;
    std::memset(&e, 0, sizeof e);
    e.magic = kEnvelopeMagic;
    e.version = kProtocolVersion;
    e.buf_kind = static_cast<std::uint16_t>(op->source_.kind);
    e.size = op->source_.bytes;
    e.transfer_id = op->id_;
    e.sender_rank = ctx.world_rank;
    e.chunk_size = static_cast<std::uint32_t>(ctx.knobs.chunk_size);
    e.depth = static_cast<std::uint16_t>(transfer_depth(ctx.knobs));
    e.node_id = ctx.node_id;
    // Only to a peer on this node: a receiver elsewhere could not open the handles, and
    // exporting a pending dependency costs a wait and a second event record on our stream.
    if (op->source_.device && ipc_pull_offered(op->source_.kind, op->peer_) && op->source_.device->ipc_export(&e.ipc))
        e.flags |= kEnvelopeHasIpc;
    if ((e.flags & kEnvelopeHasIpc) && stages_after_decline) e.flags |= kEnvelopeStagesAfterDecline;
    if (e.flags & kEnvelopeHasIpc) {
        op->fin_word_ = own_fin_words().take();
        if (op->fin_word_ >= 0) {
            e.flags |= kEnvelopeFinWord;
            e.fin_word = static_cast<std::uint32_t>(op->fin_word_);
        }
    }
    // Staging slots a receiver on this node can copy out of itself. Asking the pool
    // makes its first allocation, which a transfer this size would make anyway (for a
    // host buffer, the process's host staging pool: once, to MPI_Finalize).
    if (!(e.flags & kEnvelopeHasIpc) && ctx.knobs.shared_staging && same_node(op->peer_) &&
        (op->source_.device ? op->source_.device->staging_pool()->shared()
                            : op->source_.kind == BufKind::HOST && host_staging_pool()->shared())) {
        e.flags |= kEnvelopeSharedStaging;
        e.shared.pid = ctx.pid;
        e.shared.pid_namespace = ctx.pid_namespace;
    }

    MPIACC_PROBE("send.envelope");
    // Synchronous sends need nothing more than a standard envelope: the sender completes
    // only after the receiver's CTS or FIN, which it sends once the envelope has matched.
    const SendMode envelope_mode = mode == SendMode::SYNCHRONOUS ? SendMode::STANDARD : mode;
    const int rc = matching::post_send(&op->envelope_, kEnvelopeBytes, MPI_BYTE, dest, tag, comm, envelope_mode,
                                       &op->envelope_request_);
    if (rc != MPI_SUCCESS) {
        op->release_fin_word();  // no receiver has it
        return rc;
    }
    MPIACC_PROBE("send.envelope_posted");
    protocol_state().senders[op->id_] = op.get();
    op->registered_ = true;
    if (ctx.knobs.verbose >= 1)
        std::fprintf(stderr, "[mpiacc %d] %s: RTS id=%llu to %d: %zu bytes from %s%s\n", ctx.world_rank, call,
                     static_cast<unsigned long long>(op->id_), op->peer_, op->source_.bytes,
                     buf_kind_name(op->source_.kind), (e.flags & kEnvelopeHasIpc) ? " (IPC offered)" : "");
    *out = std::move(op);
    return MPI_SUCCESS;
}

SendOp::~SendOp() {
    if (registered_) protocol_state().senders.erase(id_);
    // Still held: the envelope went out and was not answered (a failure, MPI_Finalize), so
    // the receiver may still write the word. (A reply, a failed post and a cancel free it.)
    if (fin_word_ >= 0) own_fin_words().abandon(fin_word_);
    retire_chunks_now(&chunks_, ChunkFlow::SENDING);
    if (envelope_request_ != MPI_REQUEST_NULL) matching::release(&envelope_request_);
    netmod().release(&data_request_);
    netmod().release(&abort_request_);
}

void SendOp::on_control(const ControlMessage &msg, const CtsSlots *slots) {
    if (static_cast<ControlType>(msg.type) == ControlType::CHUNK_DONE) {
        for (auto &c : chunks_)
            if (c.index == msg.bytes) c.awaiting_ack = false;
        return;
    }
    MPIACC_PROBE("send.reply");
    reply_ = msg;
    have_reply_ = true;
    if (slots && static_cast<ControlType>(msg.type) == ControlType::CTS)
        slots_.assign(slots->slots, slots->slots + slots->count);
    // A CTS, or a FIN by message: either way the receiver does not write the word.
    release_fin_word();
}

void SendOp::release_fin_word() {
    if (fin_word_ < 0) return;
    own_fin_words().release(fin_word_);
    fin_word_ = -1;
}

// The receiver wrote this transfer's FIN into its word: the same reply as the message.
void SendOp::read_fin_word() {
    const int status = own_fin_words().read(fin_word_, id_);
    if (status < 0) return;
    MPIACC_PROBE("send.reply");
    MPIACC_COUNT("protocol.send.fin_word");
    std::memset(&reply_, 0, sizeof reply_);
    reply_.magic = kEnvelopeMagic;
    reply_.type = static_cast<std::uint16_t>(ControlType::FIN);
    reply_.transfer_id = id_;
    reply_.status = static_cast<std::uint16_t>(status);
    have_reply_ = true;
    release_fin_word();
}

int SendOp::cancel() {
    // Only a send whose envelope has not matched yet can be cancelled, as in MPICH.
    if (state_ != State::AWAIT_REPLY || have_reply_ || envelope_request_ == MPI_REQUEST_NULL) return MPI_SUCCESS;
    matching::cancel(&envelope_request_);
    MPI_Status st;
    matching::wait(&envelope_request_, &st);
    if (matching::cancelled(st)) {
        release_fin_word();  // the envelope never reached a receiver
        set_status(&status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS, true);
        state_ = State::DONE;
        complete = true;
    }
    return MPI_SUCCESS;
}

// The envelope is in MPICH (its cancel failed, as MPICH cannot withdraw a message it
// sent eagerly) and nothing answered it yet. A successor keeps a host copy of the data,
// as MPI_Bsend would, and the envelope's id, so a later CTS is served from the copy; the
// user's request completes now, not cancelled.
std::unique_ptr<Op> SendOp::release_from_user(int *rc) {
    if (complete || state_ != State::AWAIT_REPLY || have_reply_) return nullptr;  // it ends by itself
    // Two sends must wait for their match as before (MPICH cannot withdraw them either):
    // a synchronous one, whose completion says a receive has started, and one offered for
    // an IPC pull, whose receiver reads the user's buffer itself once it matches.
    if (synchronous_ || (envelope_.flags & kEnvelopeHasIpc)) return nullptr;
    std::vector<char> data(source_.bytes);
    if (source_.bytes != 0) {
        int err = MPI_SUCCESS;
        std::string why;
        if (source_.device) {
            // Ordered after the dependency captured at the call, like every copy of it.
            std::unique_ptr<Completion> done;
            err = source_.device->copy_to_host(0, data.data(), source_.bytes, &done, &why);
            if (err == MPI_SUCCESS) {
                while (!done->test()) done->wait_bounded();
                err = done->error();
                why = done->what();
            }
        } else if (const char *contig = source_.contiguous_host()) {
            std::memcpy(data.data(), contig, source_.bytes);
        } else {
            err = pack_range(source_.host, source_.count, source_.type.get(), 0, data.data(), source_.bytes);
        }
        if (err != MPI_SUCCESS) {
            *rc = make_error_code(err, "MPI_Cancel", with_detail("copying the send buffer failed", why));
            return nullptr;
        }
    }
    if (envelope_request_ != MPI_REQUEST_NULL) matching::wait(&envelope_request_, MPI_STATUS_IGNORE);
    std::unique_ptr<SendOp> rest(new SendOp());
    rest->source_.hold_bytes(std::move(data));
    rest->comm = comm;
    rest->call = call;
    rest->peer_ = peer_;
    rest->id_ = id_;
    rest->envelope_ = envelope_;
    if (registered_) {
        protocol_state().senders[id_] = rest.get();
        rest->registered_ = true;
        registered_ = false;
    }
    source_ = MessageBuffer{};
    state_ = State::DONE;
    set_status(&status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS, false);
    complete = true;
    MPIACC_COUNT("protocol.send.released_by_cancel");
    return rest;
}

void SendOp::fail(int error_class, const char *what) {
    error = make_error_code(error_class, call, what);
    // Tell the receiver, which has posted chunk receives after its CTS, so it fails too
    // instead of waiting for data that will not come.
    if (state_ == State::DATA && !aborted_to_peer_) {
        std::memset(&abort_msg_, 0, sizeof abort_msg_);
        abort_msg_.magic = kEnvelopeMagic;
        abort_msg_.type = static_cast<std::uint16_t>(ControlType::ABORT);
        abort_msg_.transfer_id = id_;
        abort_msg_.status = static_cast<std::uint16_t>(error_class);
        // The chunk sends posted so far: the receiver takes exactly these (and drops them),
        // so none is left unmatched in MPICH, where it could match a later transfer whose
        // data tag is the same once ids wrap around tag_ub.
        abort_msg_.bytes = next_to_send_;
        if (transport_failed_) abort_msg_.depth = kAbortTransportFailed;
        netmod().send_control(&abort_msg_, sizeof abort_msg_, peer_, &abort_request_);
        aborted_to_peer_ = true;
    }
    // Copies still running into staging slots, and chunk sends the receiver is still to
    // take, keep the op incomplete (progress); nothing is cancelled.
    retire_stopped_chunks(&chunks_);
    set_status(&status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, error, false);
    state_ = State::DONE;
}

void SendOp::progress() {
    if (envelope_request_ != MPI_REQUEST_NULL) {
        int flag = 0;
        matching::test(&envelope_request_, &flag, MPI_STATUS_IGNORE);
    }
    if (state_ == State::AWAIT_REPLY && !have_reply_ && fin_word_ >= 0) read_fin_word();
    if (state_ == State::AWAIT_REPLY && have_reply_) start_data();
    if (state_ == State::DATA) {
        if (data_request_.pending()) {
            if (netmod().test(&data_request_)) finish();
        } else {
            pipeline_step();
        }
    }
    netmod().test(&abort_request_);
    if (state_ == State::DONE && !chunks_.empty()) retire_stopped_chunks(&chunks_);  // failed
    if (state_ == State::DONE && envelope_request_ == MPI_REQUEST_NULL && !abort_request_.pending() && chunks_.empty())
        complete = true;
}

void SendOp::start_data() {
    Context &ctx = context();
    auto type = static_cast<ControlType>(reply_.type);
    const bool small = source_.bytes <= eager_after_decline_max(ctx.knobs);
    if (type == ControlType::FIN) {
        // IPC pull: the receiver copied the data itself. A pull that failed is the
        // receive's error (reply_.status names it): the send completes, as a send in MPICH
        // does whatever becomes of its receive.
        MPIACC_COUNT("protocol.send.ipc");
        // The peer pulls small sends again. (Not news for blocking sends where only
        // they were refused: nonblocking ones kept being offered and pulled.)
        if (small && protocol_state().eager_sends_left &&
            (blocking_ || !protocol_state().eager_blocking_only[peer_].load(std::memory_order_relaxed))) {
            protocol_state().eager_sends_left[peer_].store(0, std::memory_order_relaxed);
            protocol_state().eager_run[peer_].store(0, std::memory_order_relaxed);
        }
        finish();
        return;
    }
    if (type == ControlType::CTS && (envelope_.flags & kEnvelopeHasIpc) && small && protocol_state().eager_sends_left &&
        static_cast<TransferMode>(reply_.mode) == TransferMode::PIPELINE) {
        // Offered a pull, the receiver chose the pipeline (host memory): small sends to it
        // go staged for a while (send_common).
        MPIACC_COUNT("protocol.send.ipc_declined");
        const int run = std::max(kEagerRun, protocol_state().eager_run[peer_].load(std::memory_order_relaxed));
        protocol_state().eager_sends_left[peer_].store(run, std::memory_order_relaxed);
        protocol_state().eager_blocking_only[peer_].store(reply_.status == kCtsDeclinedForBlockingReceive,
                                                          std::memory_order_relaxed);
        protocol_state().eager_run[peer_].store(std::min(2 * run, kEagerRunMax), std::memory_order_relaxed);
    }
    if (type != ControlType::CTS || reply_.bytes > source_.bytes) {
        fail(MPI_ERR_INTERN, "protocol error: unexpected control message from the receiver");
        return;
    }
    send_bytes_ = reply_.bytes;
    auto mode = static_cast<TransferMode>(reply_.mode);
    state_ = State::DATA;
    const int tag = data_tag(id_, ctx.tag_ub);
    if (mode == TransferMode::DIRECT) {
        MPIACC_COUNT("protocol.send.direct");
        if (source_.kind != BufKind::HOST) {
            fail(MPI_ERR_INTERN, "protocol error: direct mode chosen for a device buffer");
            return;
        }
        int rc;
        if (char *contig = source_.contiguous_host()) {
            rc = netmod().send_bytes(contig, send_bytes_, peer_, tag, &data_request_);
        } else if (send_bytes_ == source_.bytes) {
            rc = netmod().send_typed(source_.host, source_.count, source_.type.get(), peer_, tag, &data_request_);
        } else {
            prefix_.resize(send_bytes_);
            rc = pack_range(source_.host, source_.count, source_.type.get(), 0, prefix_.data(), send_bytes_);
            if (rc == MPI_SUCCESS) rc = netmod().send_bytes(prefix_.data(), send_bytes_, peer_, tag, &data_request_);
        }
        if (rc != MPI_SUCCESS) fail(MPI_ERR_OTHER, "sending the data of a direct transfer failed");
        return;
    }
    if (mode == TransferMode::SHARED) {
        if (!(envelope_.flags & kEnvelopeSharedStaging)) {
            fail(MPI_ERR_INTERN, "protocol error: shared mode chosen for a sender that offered no shared staging");
            return;
        }
        shared_ = true;
        MPIACC_COUNT("protocol.send.shared");
    } else if (mode != TransferMode::PIPELINE) {
        fail(MPI_ERR_INTERN, "protocol error: unknown transfer mode in CTS");
        return;
    } else {
        MPIACC_COUNT("protocol.send.pipeline");
        stage_host_chunks_ = source_.kind == BufKind::HOST && same_node(peer_);
        if (!slots_.empty()) {
            one_sided_ = true;
            stage_host_chunks_ = false;
            MPIACC_COUNT("protocol.send.one_sided");
        }
    }
    if (source_.kind == BufKind::HOST && !source_.contiguous_host()) {
        source_.packed.resize(source_.bytes);
        if (pack_range(source_.host, source_.count, source_.type.get(), 0, source_.packed.data(), source_.bytes) !=
            MPI_SUCCESS) {
            fail(MPI_ERR_TYPE, "packing the send buffer failed");
            return;
        }
    }
    chunk_size_ = reply_.chunk_size;
    depth_ = std::max<std::size_t>(1, reply_.depth);
    if (chunk_size_ == 0) {
        fail(MPI_ERR_INTERN, "protocol error: zero chunk size in CTS");
        return;
    }
    nchunks_ = (send_bytes_ + chunk_size_ - 1) / chunk_size_;
    trace_chunk(ChunkEvent::CTS_SEEN, id_, nchunks_);
    pipeline_step();
}

void SendOp::pipeline_step() {
    Context &ctx = context();
    const int tag = data_tag(id_, ctx.tag_ub);
    if (one_sided_ && transport_failed()) return;
    // Device-to-host copies that finished make their chunk ready.
    for (auto &c : chunks_) {
        if (c.stage == ChunkState::Stage::COPYING && c.copy && c.copy->test()) {
            if (c.copy->error() != MPI_SUCCESS) {
                fail(c.copy->error(), "copying a chunk of the device send buffer to host memory failed");
                return;
            }
            c.copy.reset();
            c.stage = ChunkState::Stage::NETWORK;
            trace_chunk(ChunkEvent::SEND_COPY_DONE, id_, c.index);
        }
    }
    if (!post_ready_chunks(tag)) return;
    for (auto it = chunks_.begin(); it != chunks_.end();) {
        if (it->sent && netmod().test(&it->request) && !it->awaiting_ack) {
            // A failed transport ends every write: ended is not written.
            if (one_sided_ && transport_failed()) return;
            trace_chunk(ChunkEvent::SEND_DONE, id_, it->index);
            if (it->staging) it->pool->release(it->staging);
            MPIACC_COUNT("protocol.send.chunks");
            ++chunks_done_;
            it = chunks_.erase(it);
        } else {
            ++it;
        }
    }
    while (chunks_.size() < depth_ && next_chunk_ < nchunks_) {
        ChunkState c = ChunkState::at(next_chunk_, chunk_size_, send_bytes_);
        if (source_.kind == BufKind::HOST && !shared_) {
            if (void *slot = one_sided_ ? one_sided_host_slot(c) : host_chunk_slot(c)) {
                copy_host_chunk(c, slot, host_chunk_pool());
                MPIACC_COUNT("protocol.send.host_chunk_staged");
            }
            c.stage = ChunkState::Stage::NETWORK;
        } else {
            // A device buffer's chunk is copied into a slot of its pool; in SHARED mode a
            // host buffer's goes into one of the host staging pool's, which the receiver
            // maps and its device reads.
            PinnedPool *pool = source_.device ? source_.device->staging_pool() : host_staging_pool();
            void *slot = acquire_slot(pool);
            if (!slot) {
                if (state_ == State::DONE) return;
                MPIACC_COUNT("pool.wait");
                break;  // back-pressure: wait for a slot
            }
            if (!source_.device) {
                copy_host_chunk(c, slot, pool);
            } else {
                c.staging = slot;
                c.pool = pool;
                std::string why;
                int rc = chunk_copy_fault(&why) ? MPI_ERR_OTHER
                                                : source_.device->copy_to_host(c.offset, slot, c.len, &c.copy, &why);
                if (rc != MPI_SUCCESS) {
                    pool->release(slot);
                    fail(rc, ("staging the device send buffer failed: " + why).c_str());
                    return;
                }
                c.stage = ChunkState::Stage::COPYING;
                trace_chunk(ChunkEvent::SEND_COPY_START, id_, c.index);
            }
        }
        chunks_.push_back(std::move(c));
        ++next_chunk_;
        if (ctx.knobs.verbose >= 2)
            std::fprintf(stderr, "[mpiacc %d] id=%llu chunk %zu/%zu\n", ctx.world_rank,
                         static_cast<unsigned long long>(id_), next_chunk_, nchunks_);
        // A host chunk is ready now: it goes out before the CPU copies the next one, which
        // the receiver's copy of this one then overlaps.
        if (!post_ready_chunks(tag)) return;
    }
    if (chunks_done_ == nchunks_) finish();
}

// Posts the chunks that are ready, in order: the receiver matches them by order on one
// tag. False once the op failed.
bool SendOp::post_ready_chunks(int tag) {
    bool posted = true;
    while (posted) {
        posted = false;
        for (auto &c : chunks_) {
            if (c.index == next_to_send_ && c.stage == ChunkState::Stage::NETWORK && !c.sent) {
                if (!post_chunk(c, tag)) return false;
                c.sent = true;
                trace_chunk(ChunkEvent::SEND_POST, id_, c.index);
                ++next_to_send_;
                posted = true;
            }
        }
    }
    return true;
}

// A free slot of `pool` for the next chunk, or null: no slot free (wait), or the op
// failed (state_ DONE: the chunk would not fit a slot, or the pool has no memory at all).
void *SendOp::acquire_slot(PinnedPool *pool) {
    if (chunk_size_ > pool->slot_size()) {
        fail(MPI_ERR_INTERN, "protocol error: chunk size larger than the staging slot");
        return nullptr;
    }
    void *slot = pool->acquire();
    if (!slot && pool->allocations() == 0 && !pool->last_error().empty())
        fail(MPI_ERR_NO_MEM, ("no pinned staging memory: " + pool->last_error()).c_str());
    return slot;
}

// A huge-page slot for host chunk `c` of a pipeline transfer, or null: it goes from the
// user's buffer (host_chunk_staged says which chunks are copied). Never waited for, since
// the chunk can always go as it is.
void *SendOp::host_chunk_slot(const ChunkState &c) {
    if (!stage_host_chunks_ || !host_chunk_staged(c.index, c.len, protocol_state().senders.size())) return nullptr;
    PinnedPool *pool = host_chunk_pool();
    return c.len <= pool->slot_size() ? pool->acquire() : nullptr;
}

// One-sided: true (and the op failed) once the netmod to the receiver failed.
bool SendOp::transport_failed() {
    std::string why;
    if (netmod().peer_failure(peer_, &why) == MPI_SUCCESS) return false;
    transport_failed_ = true;
    fail(MPI_ERR_OTHER, ("writing a pipeline chunk into the receiver's slot failed: " + why).c_str());
    return true;
}

// One-sided: a registered slot for host chunk `c`, or null (it goes from the user's
// buffer, registered for that write by the netmod). Never waited for.
void *SendOp::one_sided_host_slot(const ChunkState &c) {
    PinnedPool *pool = host_chunk_pool();
    return c.len <= pool->slot_size() ? pool->acquire() : nullptr;
}

// Host chunk `c` goes from `slot` of `pool`: its bytes are copied there now.
void SendOp::copy_host_chunk(ChunkState &c, void *slot, PinnedPool *pool) {
    std::memcpy(slot, source_.contiguous_host() + c.offset, c.len);
    c.staging = slot;
    c.pool = pool;
    c.stage = ChunkState::Stage::NETWORK;
}

// Posts chunk `c`'s send: its bytes (pipeline), or a notice of where they are (SHARED).
// False once the op failed.
bool SendOp::post_chunk(ChunkState &c, int tag) {
    int rc;
    if (shared_) {
        c.shared.reset(new SharedChunkMessages());
        ChunkNotice &n = c.shared->notice;
        n.magic = kEnvelopeMagic;
        n.index = static_cast<std::uint32_t>(c.index);
        n.len = c.len;
        if (!c.staging || !c.pool->locate_shared(c.staging, &n.where)) {
            fail(MPI_ERR_INTERN, "a staging slot of a shared transfer is not in shared memory");
            return false;
        }
        // Set before the send: the CHUNK_DONE may be taken in this very progress round.
        c.awaiting_ack = true;
        rc = netmod().send_bytes(&n, sizeof n, peer_, tag, &c.request);
        if (rc != MPI_SUCCESS) c.awaiting_ack = false;
    } else {
        // Into the slot the receiver holds for it; the CTS names none yet, which the
        // two-sided `mpi` netmod does not need (its receiver posts into the slot).
        const void *from = c.staging ? c.staging : source_.contiguous_host() + c.offset;
        RemoteSlot to;
        if (one_sided_) {
            to = slots_[c.index % slots_.size()];
            // The source's segment registered once; else the netmod registers the chunk.
            RemoteSlot ours;
            std::string why;
            if (c.staging) slot_key(c.pool, c.staging, &ours, &why);
        }
        rc = netmod().place(from, c.len, peer_, tag, to, &c.request);
    }
    if (rc != MPI_SUCCESS) {
        fail(MPI_ERR_OTHER, "sending a pipeline chunk failed");
        return false;
    }
    return true;
}

void SendOp::finish() {
    set_status(&status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS, false);
    state_ = State::DONE;
    if (registered_) {
        protocol_state().senders.erase(id_);
        registered_ = false;
    }
}

namespace {

// Context::unposted_payloads changed length: what the entry points read without the lock
// follows it (no host payload goes straight to MPICH while one is queued).
void note_unposted_payloads(Context &ctx) {
    const std::size_t n = protocol_state().unposted_payloads.size();
    protocol_state().unposted_count.store(n, std::memory_order_relaxed);
    ctx.plain_send_below.store(n ? 0 : plain_send_limit(ctx.knobs), std::memory_order_relaxed);
}

}  // namespace

StagedSendOp::StagedSendOp(MessageBuffer &&source, StagingBuffer &&staging, std::unique_ptr<Completion> copy, int dest,
                           int tag, MPI_Comm comm_in, SendMode mode, const char *call_in)
    : source_(std::move(source)),
      staging_(std::move(staging)),
      copy_(std::move(copy)),
      dest_(dest),
      tag_(tag),
      mode_(mode) {
    comm = comm_in;
    call = call_in;
    Context &ctx = context();
    sequence_ = ++protocol_state().payload_sequence;
    protocol_state().unposted_payloads.push_back(this);
    note_unposted_payloads(ctx);
}

StagedSendOp::~StagedSendOp() {
    if (copy_) {
        // Only at finalize, or with the user's request never completed: out of the queue,
        // and the copy into the staging slot ended before the slot goes back.
        Context &ctx = context();
        auto &q = protocol_state().unposted_payloads;
        q.erase(std::remove(q.begin(), q.end(), this), q.end());
        note_unposted_payloads(ctx);
        const double deadline = PMPI_Wtime() + 1.0;
        while (!copy_->test() && PMPI_Wtime() < deadline) copy_->wait_bounded();
    }
    // Only at finalize with the send unfinished: a send only reads its staging buffer,
    // which goes after this.
    if (request_ != MPI_REQUEST_NULL) {
        matching::cancel(&request_);
        matching::release(&request_);
    }
}

bool StagedSendOp::post_when_staged() {
    if (!copy_->test()) return false;
    int err = MPI_SUCCESS;
    if (!cancel_requested_ && copy_->error() != MPI_SUCCESS)
        err = make_error_code(copy_->error(), call,
                              with_detail("copying the device send buffer to host memory failed", copy_->what()));
    copy_.reset();  // out of the queue from here on
    // source_ stays until staging_ goes: the slot's pool may belong to the buffer's
    // context (an OpenCL context without the object cache), freed with its last buffer.
    const std::size_t bytes = source_.bytes;
    if (!cancel_requested_ && err == MPI_SUCCESS) {
        err = matching::post_send(staging_.data(), static_cast<int>(bytes), MPI_BYTE, dest_, tag_, comm, mode_,
                                  &request_);
        if (err == MPI_SUCCESS) {
            MPIACC_COUNT("protocol.send.eager_device_posted_later");
            return true;
        }
    }
    // Never in MPICH: failed, or cancelled for real (as MPICH cancels a send not yet
    // matched).
    staging_.reset();
    error = err;
    set_status(&status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, err, err == MPI_SUCCESS);
    complete = true;
    return true;
}

void StagedSendOp::progress() {
    if (copy_) return;  // unposted: post_staged_payloads() posts it in turn
    int flag = 0;
    MPI_Status st;
    int rc = matching::test(&request_, &flag, &st);
    if (rc != MPI_SUCCESS) {
        error = rc;
        flag = 1;
    }
    if (!flag) return;
    const bool cancelled = rc == MPI_SUCCESS && matching::cancelled(st);
    set_status(&status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, error, cancelled);
    staging_.reset();
    complete = true;
}

// Not posted yet: withdrawn for real (never sent). Posted: left to MPICH, which cannot
// withdraw a send exactly; release_from_user then completes the user's request.
int StagedSendOp::cancel() {
    if (copy_) cancel_requested_ = true;
    return MPI_SUCCESS;
}

// The payload is MPICH's request from our staging memory, which the successor keeps until
// it completes: the user's buffer is not read again.
std::unique_ptr<Op> StagedSendOp::release_from_user(int * /*rc*/) {
    if (complete || copy_ || request_ == MPI_REQUEST_NULL) return nullptr;
    progress();  // an eager payload is usually done already
    if (complete) return nullptr;
    if (mode_ == SendMode::SYNCHRONOUS) return nullptr;  // complete only once matched
    auto *successor = new StagedSendOp(std::move(staging_), request_, mode_);
    successor->source_ = std::move(source_);  // holds the staging slot's pool (post_when_staged)
    std::unique_ptr<Op> rest(successor);
    rest->comm = comm;
    rest->call = call;
    request_ = MPI_REQUEST_NULL;
    set_status(&status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS, false);
    complete = true;
    MPIACC_COUNT("protocol.send.released_by_cancel");
    return rest;
}

// The only op in flight, so the head of the queue: its copy runs on MPI-ACC's own stream
// and ends within its running time.
bool StagedSendOp::wait_for_device() {
    if (!copy_) return false;
    copy_->wait_bounded();
    return true;
}

namespace {

// Posts the payloads from the head of the queue up to `stop` (or all), each once its copy
// has ended; true when it posted any.
bool post_staged_payloads_before(const StagedSendOp *stop) {
    Context &ctx = context();
    auto &q = protocol_state().unposted_payloads;
    const std::size_t before = q.size();
    while (!q.empty() && q.front() != stop && q.front()->post_when_staged()) q.pop_front();
    if (q.size() == before) return false;
    note_unposted_payloads(ctx);
    return true;
}

}  // namespace

void post_staged_payloads() { post_staged_payloads_before(nullptr); }

// Posted only at the wait, a window's two sides took turns: the receiver waited for the
// whole window of calls (docs/performance.md, "Deferred small nonblocking device sends").
// The copies of one device's staged sends share a stream, so the latest one ahead answers
// for all ahead of it, and the others then retire without asking the driver: one query
// for a batch, where a sender-bound window would pay one per send.
void post_staged_payloads_ahead_of(const StagedSendOp *op) {
    auto &q = protocol_state().unposted_payloads;
    if (q.size() <= kStagedPostBatch || q.back() != op) return;
    if (q[q.size() - 2]->copied() && post_staged_payloads_before(op))
        MPIACC_COUNT("protocol.send.eager_device_posted_at_call");
}

namespace {

// Drives progress until every staged payload up to sequence `last` is in MPICH.
void wait_for_payloads_through(std::uint64_t last) {
    MPIACC_COUNT("protocol.send.waited_for_earlier_payloads");
    progress_until([&] {
        StateLock lock;
        return protocol_state().unposted_payloads.empty() ||
               protocol_state().unposted_payloads.front()->sequence() > last;
    });
}

}  // namespace

void keep_send_order(MPI_Comm comm, int dest) {
    if (protocol_state().unposted_count.load(std::memory_order_relaxed) == 0) return;
    std::uint64_t last = 0;
    {
        StateLock lock;
        for (const StagedSendOp *op : protocol_state().unposted_payloads)
            if (op->goes_to(comm, dest)) last = op->sequence();
    }
    if (last != 0) wait_for_payloads_through(last);
}

void keep_send_order() {
    if (protocol_state().unposted_count.load(std::memory_order_relaxed) != 0)
        wait_for_payloads_through(std::numeric_limits<std::uint64_t>::max());
}

}  // namespace mpiacc
