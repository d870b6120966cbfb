#include "protocol/host_recv.h"

#include <algorithm>
#include <cstring>

#include "accel/accel.h"
#include "core/context.h"
#include "util/error.h"
#include "core/progress.h"
#include "datatype/layout.h"
#include "protocol/state.h"

namespace mpiacc {

// ---------------------------------------------------------------- InPlaceRanges

bool InPlaceRanges::overlaps_slow(std::uintptr_t lo, std::uintptr_t hi) const {
    for (const Range &r : ranges_)
        if (r.lo < hi && lo < r.hi) return true;
    return false;
}

InPlaceRanges::Token InPlaceRanges::add(std::uintptr_t lo, std::uintptr_t hi) {
    Token t;
    if (!free_.empty()) {
        t = free_.back();
        free_.pop_back();
    } else {
        ranges_.emplace_back();
        t = static_cast<Token>(ranges_.size());
    }
    ranges_[t - 1] = Range{lo, hi};
    ++live_;
    min_lo_ = std::min(min_lo_, lo);
    max_hi_ = std::max(max_hi_, hi);
    return t;
}

void InPlaceRanges::remove(Token token) {
    if (token == 0) return;
    ranges_[token - 1] = Range{};
    free_.push_back(token);
    if (--live_ == 0) {
        min_lo_ = UINTPTR_MAX;
        max_hi_ = 0;
    }
}

// ---------------------------------------------------------------- HostRecvTable

void HostRecvTable::add_chunk() {
    chunks_.push_back(std::make_unique<HostRecv[]>(kChunk));
    HostRecv *chunk = chunks_.back().get();
    for (std::size_t i = kChunk; i-- > 0;) free_.push_back(&chunk[i]);
}

void HostRecvTable::release(HostRecv *rec) {
    rec->state = HostRecv::State::FREE;
    rec->detached = false;
    rec->handle = MPI_REQUEST_NULL;
    if (!rec->builtin) rec->derived_type = TypeRef();
    if (rec->lands == HostRecv::Landing::LARGE) rec->large = BounceBuffer();
    free_.push_back(rec);
}

void HostRecvTable::collect(std::vector<HostRecv *> *out) const {
    out->clear();
    if (indexed_ != 0)
        for (const Slot &s : slots_)
            if (s.key != MPI_REQUEST_NULL) out->push_back(s.rec);
    out->insert(out->end(), detached_.begin(), detached_.end());
}

void HostRecvTable::detach(HostRecv *rec) {
    unindex(rec);
    rec->detached = true;
    detached_.push_back(rec);
}

void HostRecvTable::undetach(HostRecv *rec) {
    auto it = std::find(detached_.begin(), detached_.end(), rec);
    if (it != detached_.end()) detached_.erase(it);
}

void HostRecvTable::grow() {
    std::vector<Slot> old = std::move(slots_);
    std::size_t cap = old.empty() ? 256 : old.size() * 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    shift_ = 64;
    for (std::size_t c = cap; c > 1; c >>= 1) --shift_;
    for (const Slot &s : old) {
        if (s.key == MPI_REQUEST_NULL) continue;
        std::size_t i = home(s.key);
        while (slots_[i].key != MPI_REQUEST_NULL) i = (i + 1) & mask_;
        slots_[i] = s;
    }
}

void HostRecvTable::unindex(HostRecv *rec) {
    if (indexed_ == 0 || rec->handle == MPI_REQUEST_NULL) return;
    std::size_t i = home(rec->handle);
    while (slots_[i].key != rec->handle) {
        if (slots_[i].key == MPI_REQUEST_NULL) return;
        i = (i + 1) & mask_;
    }
    // Backward-shift deletion: later entries of the run move into the hole when their
    // home allows, so lookups never need tombstones.
    for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
        if (slots_[j].key == MPI_REQUEST_NULL) break;
        std::size_t h = home(slots_[j].key);
        // Entry j may fill hole i unless its home lies cyclically in (i, j].
        bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (stays) continue;
        slots_[i] = slots_[j];
        i = j;
    }
    slots_[i] = Slot{};
    --indexed_;
}

// ---------------------------------------------------------------- receives

namespace {

// MPICH keeps the cancelled flag in the status's low count bit (see received_bytes);
// reading it there keeps PMPI_Test_cancelled off the message-rate path.
bool status_cancelled(const MPI_Status &st) { return (st.count_hi_and_cancelled & 1) != 0; }

// Gives the record's in-place bytes back and leaves the pending count.
void settle_record(HostRecv *rec) {
    Context &ctx = context();
    if (rec->range) {
        protocol_state().in_place_ranges.remove(rec->range);
        rec->range = 0;
    }
    if (rec->state == HostRecv::State::POSTED) ctx.pending.remove();
}

// What the record's matching receive brought: true for an envelope; otherwise the payload
// is delivered into the user's buffer with its final status and error (as RecvOp's
// on_matched/deliver_payload do for host memory).
bool take_matched(HostRecv *rec, MPI_Status st) {
    const std::size_t len = received_bytes(st);
    if (status_cancelled(st)) {
        set_status(&st, st.MPI_SOURCE, st.MPI_TAG, 0, MPI_SUCCESS, true);
        rec->status = st;
        rec->error = MPI_SUCCESS;
        return false;
    }
    if (len == kEnvelopeBytes && looks_like_envelope(rec->landing(), len)) return true;
    std::size_t n = len;
    int err = st.MPI_ERROR;
    if (is_truncation(err) || (err == MPI_SUCCESS && len > rec->bytes)) {
        // Nothing of it reaches the buffer (truncated_receive); MPICH's own truncation
        // (past our landing buffer) leaves the size unknown.
        err = truncated_receive(&st, rec->call, is_truncation(err) ? 0 : len, rec->bytes);
        n = 0;
    } else if (err != MPI_SUCCESS) {
        // MPICH's own status is already exact for a payload that fit.
        set_status(&st, st.MPI_SOURCE, st.MPI_TAG, n, err, false);
    }
    if (!rec->in_place() && n > 0) {
        if (rec->builtin) {
            copy_bounced_payload(rec->buf, rec->landing(), n);
        } else if (unpack_range(rec->landing(), n, rec->buf, rec->count, rec->datatype, 0) != MPI_SUCCESS &&
                   err == MPI_SUCCESS) {
            err = make_error_code(MPI_ERR_TYPE, rec->call, "unpacking the message into the receive buffer failed");
            set_status(&st, st.MPI_SOURCE, st.MPI_TAG, n, err, false);
        }
    }
    rec->status = st;
    rec->error = err;
    return false;
}

// The RecvOp that continues from the envelope in rec's landing area. `held` is the MPICH
// request behind the user's handle when it is still allocated; the op frees it.
std::unique_ptr<RecvOp> envelope_op(HostRecv *rec, const MPI_Status &st, MPI_Request held) {
    MessageBuffer mb;
    std::string why;
    // Host memory with a type the post already accepted: this cannot fail.
    make_message_buffer(rec->buf, rec->count, rec->datatype, BufferAttrs{}, &mb, &why);
    const char *envelope = rec->landing();
    alignas(16) char copy[kEnvelopeBytes];
    if (rec->in_place()) {
        // The envelope read, the user's first bytes go back (InPlaceHead) before any data.
        std::memcpy(copy, rec->contiguous, kEnvelopeBytes);
        std::memcpy(rec->contiguous, rec->small, kEnvelopeBytes);
        envelope = copy;
    }
    std::unique_ptr<RecvOp> op;
    RecvOp::from_host_receive(std::move(mb), envelope, st, rec->comm, rec->call, held, &op);
    return op;
}

// A detached record's request completed (PMPI_Test freed it): finish it for nobody.
void finish_detached(HostRecv *rec, const MPI_Status &st) {
    std::unique_ptr<RecvOp> op;
    if (take_matched(rec, st)) op = envelope_op(rec, st, MPI_REQUEST_NULL);
    settle_record(rec);
    protocol_state().host_recvs.undetach(rec);
    protocol_state().host_recvs.release(rec);
    if (op) add_detached_op(std::move(op));
}

}  // namespace

int post_host_recv(void *buf, int count, MPI_Datatype type, std::size_t bytes, int source, int tag, MPI_Comm comm,
                   const char *call, MPI_Request *request) {
    Context &ctx = context();
    const bool builtin = is_builtin_type(type);
    char *contiguous = nullptr;
    if (builtin) {
        contiguous = static_cast<char *>(buf);
    } else {
        Layout l = describe_layout(count, type);
        if (l.contiguous) contiguous = typed_address(buf, l.true_lb);
    }
    StateLock lock;
    HostRecv *rec = protocol_state().host_recvs.acquire();
    rec->buf = buf;
    rec->count = count;
    rec->builtin = builtin;
    if (builtin) {
        rec->datatype = type;
    } else {
        rec->derived_type = TypeRef(type);
        rec->datatype = rec->derived_type.get();
    }
    rec->comm = comm;
    rec->call = call;
    rec->bytes = bytes;
    rec->contiguous = contiguous;
    const auto lo = reinterpret_cast<std::uintptr_t>(contiguous);
    // A buffer that can hold an envelope, laid out contiguously, receives in place.
    // Others land in a bounce buffer first: smaller ones because an envelope must fit,
    // non-contiguous ones because MPICH refuses a 200-byte envelope into a typemap whose
    // elements it does not fill ("message truncated" in 4.0.2).
    const bool in_place =
        contiguous && bytes >= kEnvelopeBytes && !protocol_state().in_place_ranges.overlaps(lo, lo + bytes);
    int rc;
    if (in_place) {
        rec->lands = HostRecv::Landing::USER;
        // `small` lands nothing here: it keeps the buffer's first bytes (envelope_op).
        std::memcpy(rec->small, contiguous, kEnvelopeBytes);
        rc = matching::post_recv(buf, count, type, source, tag, comm, &rec->handle);
    } else {
        const std::size_t n = std::max(std::min(bytes, largest_payload(ctx.knobs)), kEnvelopeBytes);
        if (n > kEnvelopeBytes) {
            rec->large = BounceBuffer(n);
            rec->lands = HostRecv::Landing::LARGE;
        } else {
            rec->lands = HostRecv::Landing::SMALL;
        }
        rc = matching::post_recv(rec->landing(), static_cast<int>(n), MPI_BYTE, source, tag, comm, &rec->handle);
    }
    if (rc != MPI_SUCCESS) {
        protocol_state().host_recvs.release(rec);
        call_errhandler(comm, rc);
        return rc;
    }
    if (in_place) rec->range = protocol_state().in_place_ranges.add(lo, lo + bytes);
    rec->state = HostRecv::State::POSTED;
    rec->error = MPI_SUCCESS;
    rec->seen_epoch = protocol_state().host_recvs.epoch - 1;  // not tested by any sweep yet: polled
    protocol_state().host_recvs.index(rec);
    ctx.pending.add();
    *request = rec->handle;
    return MPI_SUCCESS;
}

std::unique_ptr<RecvOp> complete_host_recv(HostRecv *rec, const MPI_Status &mpich_status, int mpich_rc,
                                           MPI_Status *status, int *error, MPI_Comm *comm) {
    std::unique_ptr<RecvOp> op;
    *comm = rec->comm;
    if (rec->state == HostRecv::State::POSTED) {
        MPI_Status st = mpich_status;
        if (mpich_rc != MPI_SUCCESS && mpich_rc != MPI_ERR_IN_STATUS) st.MPI_ERROR = mpich_rc;
        if (take_matched(rec, st)) {
            op = envelope_op(rec, st, MPI_REQUEST_NULL);
            mark_pending(op.get());
        }
    }
    if (!op && status != MPI_STATUS_IGNORE) {
        const int keep = status->MPI_ERROR;
        *status = rec->status;
        status->MPI_ERROR = keep;
    }
    *error = op ? MPI_SUCCESS : rec->error;
    protocol_state().host_recvs.unindex(rec);
    settle_record(rec);
    protocol_state().host_recvs.release(rec);
    return op;
}

bool complete_host_recv_fast(HostRecv *rec, const MPI_Status &mpich_status, int mpich_rc, MPI_Status *status) {
    const std::size_t len = received_bytes(mpich_status);
    if (rec->state != HostRecv::State::POSTED || !rec->builtin || mpich_rc != MPI_SUCCESS || len == kEnvelopeBytes ||
        len > rec->bytes || status_cancelled(mpich_status))
        return false;
    if (!rec->in_place()) copy_bounced_payload(rec->buf, rec->landing(), len);
    *status = mpich_status;
    protocol_state().host_recvs.unindex(rec);
    settle_record(rec);
    protocol_state().host_recvs.release(rec);
    return true;
}

namespace {

int envelope_op_result(RecvOp *op, MPI_Status *status) {
    settle_pending(op);
    if (status != MPI_STATUS_IGNORE) {
        const int keep = status->MPI_ERROR;
        *status = op->status;
        status->MPI_ERROR = keep;
    }
    return op->error;
}

}  // namespace

int finish_envelope_op(std::unique_ptr<RecvOp> op, MPI_Status *status) {
    progress_until([&] {
        StateLock lock;
        if (!op->complete) op->progress();
        return op->complete;
    });
    return envelope_op_result(op.get(), status);
}

void finish_envelope_ops(std::vector<std::pair<int, std::unique_ptr<RecvOp>>> &ops, MPI_Status statuses[],
                         int errors[]) {
    // Together, not one after another: each op has sent its CTS, so its sender is
    // filling staging slots for it, and an op nobody drives stops receiving after its
    // first `depth` chunks while its sender keeps those slots. Finishing a window of
    // 16 MiB cl_mem -> host receives one by one hung as soon as the parked ones held
    // the sender's whole pool (MPIACC_PIPELINE_TRANSFERS=0, or a pool under about
    // MPIACC_PIPELINE_TRANSFERS transfers' depth of slots).
    progress_until([&] {
        StateLock lock;
        CopyBatch batch;  // the pulls these envelopes start go to the device together
        bool all = true;
        for (auto &e : ops) {
            if (!e.second->complete) e.second->progress();
            all = all && e.second->complete;
        }
        return all;
    });
    for (auto &e : ops) errors[e.first] = envelope_op_result(e.second.get(), &statuses[e.first]);
}

HostRecvPoll poll_host_recv(HostRecv *rec) {
    if (rec->state == HostRecv::State::DELIVERED) return HostRecvPoll::DELIVERED;
    MPI_Status st;
    st.MPI_ERROR = MPI_SUCCESS;
    int flag = 0;
    int rc = matching::peek(rec->handle, &flag, &st);
    if (!flag) return HostRecvPoll::PENDING;
    if (rc != MPI_SUCCESS) st.MPI_ERROR = rc;
    ++protocol_state().host_recvs.changes;
    if (!take_matched(rec, st)) {
        settle_record(rec);
        rec->state = HostRecv::State::DELIVERED;
        return HostRecvPoll::DELIVERED;
    }
    // An envelope whose sender waits for our CTS: the rendezvous starts now, and the
    // user's handle (MPICH's request, still allocated) stands for the RecvOp from here on.
    MPI_Request handle = rec->handle;
    std::unique_ptr<RecvOp> op = envelope_op(rec, st, handle);
    protocol_state().host_recvs.unindex(rec);
    settle_record(rec);
    protocol_state().host_recvs.release(rec);
    register_user_op(std::move(op), Op::Handle::WATCHED, handle);
    return HostRecvPoll::PROMOTED;
}

void poll_host_recvs() {
    HostRecvTable &t = protocol_state().host_recvs;
    const std::uint32_t epoch = t.epoch;
    // A copy: polling changes the index (promotions) and the detached list.
    static thread_local std::vector<HostRecv *> recs;
    t.collect(&recs);
    for (HostRecv *rec : recs) {
        if (rec->state != HostRecv::State::POSTED || rec->seen_epoch == epoch) continue;
        if (rec->detached) {
            // Nobody holds the handle: complete (and free) MPICH's request here.
            MPI_Status st;
            st.MPI_ERROR = MPI_SUCCESS;
            int flag = 0;
            int rc = matching::test(&rec->handle, &flag, &st);
            if (!flag) continue;
            if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) st.MPI_ERROR = rc;
            finish_detached(rec, st);
            continue;
        }
        poll_host_recv(rec);
    }
}

int free_host_recv(HostRecv *rec) {
    ++protocol_state().host_recvs.changes;
    if (rec->state == HostRecv::State::DELIVERED) {
        protocol_state().host_recvs.unindex(rec);
        matching::release(&rec->handle);
        protocol_state().host_recvs.release(rec);
        return MPI_SUCCESS;
    }
    // MPI_Request_free on an active receive: it still completes (and may hold an
    // envelope whose sender waits); progress finishes it.
    protocol_state().host_recvs.detach(rec);
    return MPI_SUCCESS;
}

int cancel_host_recv(HostRecv *rec) {
    if (rec->state != HostRecv::State::POSTED) return MPI_SUCCESS;
    return matching::cancel(&rec->handle);
}

void cancel_detached_host_recvs() {
    std::vector<HostRecv *> recs;
    protocol_state().host_recvs.collect(&recs);
    for (HostRecv *rec : recs)
        if (rec->detached) matching::cancel(&rec->handle);
}

bool detached_host_recvs_left() { return protocol_state().host_recvs.any_detached(); }

void release_all_host_recvs() {
    HostRecvTable &t = protocol_state().host_recvs;
    std::vector<HostRecv *> recs;
    t.collect(&recs);
    for (HostRecv *rec : recs) {
        if (rec->detached)
            t.undetach(rec);
        else
            t.unindex(rec);
        if (rec->state == HostRecv::State::POSTED) matching::cancel(&rec->handle);
        matching::release(&rec->handle);
        settle_record(rec);
        t.release(rec);
    }
}

}  // namespace mpiacc
