// Shared pieces of the MPI_* entry points. Bindings are thin: argument checks, the host
// fast path, and a hand-off to the protocol.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "core/buffer_desc.h"
#include "core/context.h"
#include "util/error.h"
#include "core/progress.h"
#include "datatype/layout.h"
#include "protocol/envelope.h"
#include "protocol/transfer.h"

namespace mpiacc {

// Host data this size goes as the plain payload (DESIGN 2.2): not the envelope's length,
// and under the host rendezvous threshold.
inline bool host_payload_size(long long bytes) {
    const std::size_t threshold = context().knobs.host_rndv_threshold;
    return bytes >= 0 && static_cast<std::size_t>(bytes) != kEnvelopeBytes &&
           (threshold == 0 || static_cast<std::size_t>(bytes) < threshold);
}

// Host data this size goes from the entry points straight to MPICH as the plain payload:
// host_payload_size, and under any size a receiver may ask to get by RTS/CTS
// (Context::plain_send_below). Larger ones take send_common, which asks.
inline bool plain_payload_size(const Context &ctx, std::size_t bytes) {
    return bytes != kEnvelopeBytes && bytes < ctx.plain_send_below.load(std::memory_order_relaxed);
}

// Whether host data to (comm, dest) goes as the plain payload: host_payload_size, unless
// its receiver asked for RTS/CTS (host_rndv_hinted) and the send is nonblocking. The hint
// serves windows, whose payloads would each land in a bounce buffer of their own; a
// blocking send has none behind it, and RTS/CTS would only add its round trip
// (docs/performance.md, "Rendezvous hint for host payloads"). One send asks at most once,
// so its checks agree with each other though a hint may arrive in between.
class HostPayloadRoute {
public:
    HostPayloadRoute(MPI_Comm comm, int dest, bool blocking) : comm_(comm), dest_(dest), blocking_(blocking) {}
    bool eager(long long bytes) {
        if (!host_payload_size(bytes)) return false;
        if (blocking_ || !host_rndv_hint_size(context().knobs, static_cast<std::size_t>(bytes))) return true;
        if (hinted_ < 0) hinted_ = host_rndv_hinted(comm_, dest_, static_cast<std::size_t>(bytes)) ? 1 : 0;
        return hinted_ == 0;
    }

private:
    MPI_Comm comm_;
    int dest_;
    bool blocking_;
    int hinted_ = -1;  // not asked yet
};

// Drives `op` (not in any table) to completion from a blocking call.
int run_to_completion(Op *op);

// An inactive MPICH persistent request that stands in as the user's handle of an
// MPI-ACC persistent op (Op::Handle::PERSISTENT).
MPI_Request placeholder_request();

// Waits for an MPICH request while keeping MPI-ACC transfers moving.
int wait_mpich_request(MPI_Request *req, MPI_Status *status);
// Waits for MPICH requests `reqs` one after another (statuses ignored), the same way.
int wait_each(std::vector<MPI_Request> &reqs);

// (count, type) of a large-count call in the form an int entry point takes: a count that
// fits an int as it is, a larger one as one element of a contiguous type of `count`
// elements that carries the original type's MPI-ACC attributes (freed with this object;
// pending operations keep their own reference). Same bytes, same type signature.
class IntCount {
public:
    IntCount(MPI_Count count, MPI_Datatype type);
    ~IntCount();
    IntCount(const IntCount &) = delete;
    IntCount &operator=(const IntCount &) = delete;
    // False when the contiguous type could not be made (an invalid type, say): the caller
    // then lets MPICH's large-count entry point report the error as its own.
    bool ok() const { return ok_; }
    int count() const { return count_; }
    MPI_Datatype type() const { return type_; }

private:
    static bool copy_attributes(MPI_Datatype from, MPI_Datatype to);
    MPI_Datatype type_;
    MPI_Datatype made_ = MPI_DATATYPE_NULL;
    int count_ = 0;
    bool ok_ = true;
};

// MPI_SUCCESS once every member of comm (both groups of an intercommunicator) has called
// it, MPI-ACC's transfers moving meanwhile (a nonblocking barrier). Before a call that
// blocks in MPICH until all members are in it: from then on it needs nothing of MPI-ACC.
int meet_members(MPI_Comm comm);

// MPI_SUCCESS when (buf, type) is host memory. Otherwise the error class, with *why
// naming argument `arg`: MPI_ERR_UNSUPPORTED_OPERATION for a device buffer (a tagged
// type, or CUDA memory found by pointer query), followed by `refusal` (what does not take
// one yet), or the class for MPI-ACC attributes that describe no buffer.
int require_host_buffer(const void *buf, MPI_Datatype type, const char *arg, const char *refusal, std::string *why);

// Copies the whole device buffer of `mb` to host memory at `out` now, and waits (with
// progress) for the copy.
int stage_device_data(MessageBuffer &mb, void *out, const char *call, std::string *why);

// Copies the send data of a send-and-replace call (MPI_Sendrecv_replace,
// MPI_Isendrecv_replace) into `copy`, packed: host data by packing, device data staged
// now. Errors carry their message in *why.
int copy_outgoing_data(void *buf, int count, MPI_Datatype type, const char *call, std::vector<char> *copy,
                       std::string *why);

// The common send path for every mode, blocking (request == nullptr) or not.
int send_common(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, SendMode mode,
                const char *call, MPI_Request *request);
int recv_common(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, const char *call,
                MPI_Status *status, MPI_Request *request);

// Receives a message that probe already matched (stashed envelope), into (buf,count,type).
int recv_stashed(void *buf, int count, MPI_Datatype type, std::unique_ptr<StashedEnvelope> stashed, const char *call,
                 MPI_Status *status, MPI_Request *request);
// Whether a stashed envelope is one a receive or probe for (source, tag, comm) matches.
bool stash_matches(const StashedEnvelope &s, int source, int tag, MPI_Comm comm);
// The first stashed envelope matching (source, tag, comm), removed from the stash.
std::unique_ptr<StashedEnvelope> take_stashed(int source, int tag, MPI_Comm comm);

}  // namespace mpiacc
