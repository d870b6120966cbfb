// Host nonblocking receives without a RecvOp: the message-rate path (DESIGN.md 2.2, 5).
//
// Any host receive may match an envelope, so MPI-ACC must see every one complete. A
// RecvOp per receive (a heap object plus a hash node and an ordered-map node) cost
// windows several times MPICH's own per-message work (docs/performance.md, "Host receive
// records"). A HostRecv is a slab record found by its MPICH request handle (which is also
// the user's handle) through an open-addressing index; a RecvOp is built only when an
// envelope actually arrives.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "protocol/envelope.h"
#include "protocol/transfer.h"

namespace mpiacc {

// Host buffers with an in-place receive pending. A second receive overlapping one lands
// in a bounce buffer instead, or two envelopes could land in the same bytes before either
// is read (OSU-style windows reuse one buffer). The hull of the live ranges answers the
// common case (windows posted in address order, disjoint) without a scan.
class InPlaceRanges {
public:
    using Token = std::uint32_t;  // 0 = none
    bool overlaps(std::uintptr_t lo, std::uintptr_t hi) const {
        if (live_ == 0 || hi <= min_lo_ || lo >= max_hi_) return false;
        return overlaps_slow(lo, hi);
    }
    Token add(std::uintptr_t lo, std::uintptr_t hi);
    void remove(Token token);

private:
    struct Range {
        std::uintptr_t lo = 0, hi = 0;  // empty when free
    };
    bool overlaps_slow(std::uintptr_t lo, std::uintptr_t hi) const;
    std::vector<Range> ranges_;  // by token - 1
    std::vector<Token> free_;
    std::size_t live_ = 0;
    // Hull of the live ranges: never smaller than their union, reset when none is left.
    std::uintptr_t min_lo_ = UINTPTR_MAX, max_hi_ = 0;
};

// One host MPI_Irecv, reused from a slab. A small receive's post and completion touch its
// first line and, for its bytes, the start of `small` right after: a window of receives
// walks that many records per round, beside MPICH's own requests, and a record that
// spread them over four lines (a BounceBuffer read before `small`) made every message of
// a window of small receives dearer (docs/performance.md, "Host receive records").
struct alignas(64) HostRecv {
    enum class State : std::uint8_t {
        FREE,
        POSTED,     // MPICH's receive is pending, or completed but not yet looked at
        DELIVERED,  // a payload: in the user's buffer, status and error final
    };
    // Where MPICH's receive lands.
    enum class Landing : std::uint8_t {
        SMALL,  // `small`: smaller than an envelope
        LARGE,  // `large`: a bounce past an envelope's size
        USER,   // in place: the user's buffer
    };
    State state = State::FREE;
    Landing lands = Landing::SMALL;
    bool detached = false;                  // MPI_Request_free'd while posted: finished by progress alone
    bool builtin = false;                   // builtin datatype: copy-out is a memcpy
    MPI_Request handle = MPI_REQUEST_NULL;  // MPICH's request, handed to the user as is
    std::uint32_t seen_epoch = 0;           // completion call that is testing it
    InPlaceRanges::Token range = 0;
    void *buf = nullptr;
    std::size_t bytes = 0;       // packed capacity of the user's buffer
    char *contiguous = nullptr;  // the user's bytes as one run, when they are one
    int count = 0;
    MPI_Datatype datatype = MPI_DATATYPE_NULL;  // builtin, or derived_type's duplicate
    MPI_Comm comm = MPI_COMM_NULL;
    int error = MPI_SUCCESS;  // DELIVERED
    const char *call = "";
    // Landing area for receives smaller than an envelope; in place: the user's first
    // bytes (InPlaceHead).
    alignas(64) char small[kEnvelopeBytes];
    // Past the hot lines: what a delivered record keeps, a derived type, a large bounce.
    MPI_Status status{};   // DELIVERED
    TypeRef derived_type;  // keeps a derived type alive past the user's MPI_Type_free
    BounceBuffer large;    // landing area for bounced receives past an envelope's size

    bool in_place() const { return lands == Landing::USER; }
    char *landing() { return lands == Landing::USER ? contiguous : lands == Landing::LARGE ? large.data() : small; }
};
static_assert(offsetof(HostRecv, small) == 64, "a small receive's fields share one cache line");

// The records: a slab (stable addresses) with a free list, and an index from MPICH
// request handle to record (linear probing, backward-shift deletion) that progress also
// walks to poll them. Records the user freed while posted leave the index for a list.
class HostRecvTable {
public:
    HostRecv *acquire() {
        if (free_.empty()) add_chunk();
        HostRecv *rec = free_.back();
        free_.pop_back();
        return rec;
    }
    // Back to the free list; the caller has unindexed it and settled its MPICH request.
    void release(HostRecv *rec);
    void index(HostRecv *rec) {
        // At most half full, so probe runs stay short.
        if (2 * (indexed_ + 1) > slots_.size()) grow();
        std::size_t i = home(rec->handle);
        while (slots_[i].key != MPI_REQUEST_NULL) i = (i + 1) & mask_;
        slots_[i] = Slot{rec->handle, rec};
        ++indexed_;
    }
    void unindex(HostRecv *rec);
    HostRecv *find(MPI_Request handle) const {
        if (indexed_ == 0) return nullptr;
        for (std::size_t i = home(handle);; i = (i + 1) & mask_) {
            const Slot &s = slots_[i];
            if (s.key == handle) return s.rec;
            if (s.key == MPI_REQUEST_NULL) return nullptr;
        }
    }
    bool empty() const { return indexed_ == 0 && detached_.empty(); }
    // Every record in use, indexed first, then detached ones.
    void collect(std::vector<HostRecv *> *out) const;
    void detach(HostRecv *rec);    // unindexes it and keeps it on the detached list
    void undetach(HostRecv *rec);  // off the detached list (before release)
    bool any_detached() const { return !detached_.empty(); }
    // Bumped when a completion call sorts its requests (records it will test are marked
    // with it, and progress rounds meanwhile do not poll them) and when the call ends.
    std::uint32_t epoch = 0;
    // Bumped when a record changes outside a completion call's own PMPI_Testsome (a poll
    // delivered or promoted it): such calls must sort their requests again.
    std::uint32_t changes = 0;

private:
    struct Slot {
        MPI_Request key = MPI_REQUEST_NULL;
        HostRecv *rec = nullptr;
    };
    // Fibonacci hashing: MPICH handles differ in their low bits, the product's high bits
    // spread them over the table.
    std::size_t home(MPI_Request h) const {
        return static_cast<std::size_t>(
            (static_cast<std::uint64_t>(static_cast<std::uint32_t>(h)) * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    void grow();
    void add_chunk();

    static constexpr std::size_t kChunk = 64;
    std::vector<std::unique_ptr<HostRecv[]>> chunks_;
    std::vector<HostRecv *> free_;
    std::vector<HostRecv *> detached_;
    std::vector<Slot> slots_;
    std::size_t mask_ = 0, indexed_ = 0;
    unsigned shift_ = 63;
};

// MPI_Irecv (and MPI_Sendrecv's receive) into host memory: (buf, count, type) is valid,
// `bytes` its packed size. Returns an MPI error code, already raised.
int post_host_recv(void *buf, int count, MPI_Datatype type, std::size_t bytes, int source, int tag, MPI_Comm comm,
                   const char *call, MPI_Request *request);

// The outcome of a record whose MPICH request a completion call has just completed (and
// MPICH freed): *status (MPI_ERROR untouched), *error and *comm for a payload; for an
// envelope, the RecvOp to drive instead (counted pending, in no table). The record is
// released either way. Caller holds the StateLock.
std::unique_ptr<RecvOp> complete_host_recv(HostRecv *rec, const MPI_Status &mpich_status, int mpich_rc,
                                           MPI_Status *status, int *error, MPI_Comm *comm);

// The common case of the above, for completion calls to try first: a posted receive of a
// builtin type whose payload fit and whose MPICH status is already exact. Copies a bounced
// payload out, fills *status (all of it) and releases the record; false, touching
// nothing, for anything else. Caller holds the StateLock.
bool complete_host_recv_fast(HostRecv *rec, const MPI_Status &mpich_status, int mpich_rc, MPI_Status *status);

// Drives a RecvOp from complete_host_recv to its end: *status (MPI_ERROR untouched) and
// the error. Not under the StateLock: the rendezvous may wait for another thread's send.
int finish_envelope_op(std::unique_ptr<RecvOp> op, MPI_Status *status);

// The same for every RecvOp one completion call got from its envelopes: all of them are
// driven in each round until the last one ends (see the definition for why), then each
// result goes to statuses[i] and errors[i], i the op's index in the user's array.
void finish_envelope_ops(std::vector<std::pair<int, std::unique_ptr<RecvOp>>> &ops, MPI_Status statuses[],
                         int errors[]);

// Looks at a posted record without completing the user's handle. A payload is delivered
// (DELIVERED); an envelope turns the record into a RecvOp registered under the user's
// handle (PROMOTED: the record is gone). Caller holds the StateLock.
enum class HostRecvPoll { PENDING, DELIVERED, PROMOTED };
HostRecvPoll poll_host_recv(HostRecv *rec);

// The progress rule: every record no completion sweep tested this round, detached ones
// included. Caller holds the StateLock.
void poll_host_recvs();

// MPI_Request_free and MPI_Cancel of a record's handle. Caller holds the StateLock.
int free_host_recv(HostRecv *rec);
int cancel_host_recv(HostRecv *rec);

// MPI_Finalize: detached records still posted are cancelled (as detached RecvOps are)
// and finished by progress; this releases what is left.
void cancel_detached_host_recvs();
bool detached_host_recvs_left();
void release_all_host_recvs();

}  // namespace mpiacc
