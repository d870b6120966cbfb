// Collectives. Three rules hold for every one of them:
//
// - Progress (DESIGN 2.6). A blocking collective runs as its nonblocking form plus MPI-ACC
//   progress, so a rank blocked in one still answers its peers' CTS and chunks: Isend(gpu)
//   followed by MPI_Barrier must not hang. Every time, not only while this rank has
//   transfers in flight: MPI does not match a blocking collective with a nonblocking one,
//   and another rank may have chosen differently. MPICH offers no hook into its own
//   progress loop (checked: generalized-request poll functions are not called from a
//   blocking MPI_Barrier in 4.0.2).
// - Device buffers are staged through host memory (coll/staged.h); MPI_Reduce_local
//   reduces them on the device (reduce_on_device). Only the arguments significant at this
//   rank are looked at (a non-root's receive type may be anything).
// - Order (coll/issue_order.h): a collective called while an earlier one on its
//   communicator waits for its inputs queues behind it, host data or not.
#include <climits>

#include "accel/reduce_op.h"
#include "binding/binding.h"
#include "coll/describe.h"
#include "coll/device_algorithms.h"
#include "coll/issue_order.h"
#include "coll/staged.h"

using namespace mpiacc;

int mpiacc::require_host_buffer(const void *buf, MPI_Datatype type, const char *arg, const char *refusal,
                                std::string *why) {
    BufferAttrs attrs;
    int rc = classify_buffer(buf, type, &attrs, why, arg);
    if (rc != MPI_SUCCESS) {
        if (why->rfind(std::string(arg) + ": ", 0) != 0) *why = format("%s: %s", arg, why->c_str());
        return rc;
    }
    if (attrs.kind == BufKind::HOST) return MPI_SUCCESS;
    *why = format(
        "%s: not supported on device buffers: %s is %s memory, and %s; move the data through host memory, or "
        "use point-to-point",
        arg, arg, buf_kind_word(attrs.kind), refusal);
    return MPI_ERR_UNSUPPORTED_OPERATION;
}

namespace {

// Whether the buffer arguments are host memory, found as cheaply as point-to-point finds
// it (no tagged type anywhere; autodetection's host table): a host collective then goes
// to MPICH without being described.
inline bool plain_host_args(const Context &ctx, const void *a, const void *b = nullptr) {
    auto plain = [&ctx](const void *p) { return p == nullptr || p == MPI_IN_PLACE || buffer_is_plain_host(ctx, p); };
    return plain(a) && plain(b);
}

// The count and displacement arrays of a collective that has none (describe.h).
constexpr const int *kNoCounts = nullptr;

// A blocking collective as its nonblocking form, waited for with MPI-ACC progress.
int finish(int rc, MPI_Request *r) { return rc != MPI_SUCCESS ? rc : wait_mpich_request(r, MPI_STATUS_IGNORE); }

// A collective through a StagedCollective: run to completion (BLOCKING, request null),
// or registered under *request (a generalized request for NONBLOCKING, an inactive
// placeholder for PERSISTENT, as persistent point-to-point requests have).
int run_staged(CollCall &&c, CollIssue issue, StagedCollective::Form form, MPI_Request *request) {
    const MPI_Comm comm = c.comm();
    const char *call = c.call();
    auto op = std::make_unique<StagedCollective>(std::make_unique<CollCall>(std::move(c)), std::move(issue), form);
    std::string why;
    int rc = op->begin(&why);
    if (rc != MPI_SUCCESS) return why.empty() ? rc : raise_error(comm, rc, call, why);
    switch (form) {
        case StagedCollective::Form::BLOCKING: {
            Op *o = op.get();
            rc = run_to_completion(o);
            if (rc != MPI_SUCCESS) call_errhandler(comm, rc);
            retire_later(std::move(op));
            return rc;
        }
        case StagedCollective::Form::NONBLOCKING:
            *request = register_user_op(std::move(op), Op::Handle::GREQUEST, MPI_REQUEST_NULL);
            return MPI_SUCCESS;
        case StagedCollective::Form::PERSISTENT:
            *request = register_user_op(std::move(op), Op::Handle::PERSISTENT, placeholder_request());
            return MPI_SUCCESS;
    }
    return MPI_ERR_INTERN;
}

// MPI_Reduce_local. Host buffers go to MPICH (false). Device buffers of one kind are
// reduced there by the kind's kernels, and *rc is the outcome (true). A host buffer with a
// device one is refused: the call would stage a whole buffer behind the user's back, and
// copying it to the device first says where the cost is.
bool reduce_on_device(const void *inbuf, void *inoutbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                      const char *call, int *rc) {
    std::string why;
    BufferAttrs in_attrs, io_attrs;
    const char *arg = "inbuf";
    *rc = classify_buffer(inbuf, type, &in_attrs, &why, arg);
    if (*rc == MPI_SUCCESS) *rc = classify_buffer(inoutbuf, type, &io_attrs, &why, arg = "inoutbuf");
    if (*rc != MPI_SUCCESS) {
        if (why.rfind(std::string(arg) + ": ", 0) != 0) why = format("%s: %s", arg, why.c_str());
        *rc = raise_error(comm, *rc, call, why);
        return true;
    }
    if (in_attrs.kind == BufKind::HOST && io_attrs.kind == BufKind::HOST) return false;
    if (in_attrs.kind != io_attrs.kind) {
        why = format(
            "inbuf is %s memory and inoutbuf is %s memory: a device reduction takes both on the same kind; "
            "copy the host side to the device first",
            buf_kind_word(in_attrs.kind), buf_kind_word(io_attrs.kind));
        *rc = raise_error(comm, MPI_ERR_UNSUPPORTED_OPERATION, call, why);
        return true;
    }
    ReduceSpec spec;
    *rc = classify_reduction(op, type, &spec, &why);
    if (*rc == MPI_SUCCESS && (count < 0 || count > INT_MAX)) {
        why = format("count %lld: %s", static_cast<long long>(count),
                     count < 0 ? "negative" : "device reductions take at most INT_MAX elements");
        *rc = count < 0 ? MPI_ERR_COUNT : MPI_ERR_UNSUPPORTED_OPERATION;
    }
    if (*rc != MPI_SUCCESS) {
        *rc = raise_error(comm, *rc, call, why);
        return true;
    }
    // Captured as plain bytes: a pair type with padding (MPI_DOUBLE_INT) is not
    // contiguous, and would be captured for packing, which a kernel does not want.
    const MPI_Count bytes = count * static_cast<MPI_Count>(spec.extent);
    if (bytes > INT_MAX) {
        why = format("%lld elements of %s take more than INT_MAX bytes, too many for a device reduction",
                     static_cast<long long>(count), spec.type_name.c_str());
        *rc = raise_error(comm, MPI_ERR_UNSUPPORTED_OPERATION, call, why);
        return true;
    }
    in_attrs.within_call = io_attrs.within_call = true;
    MessageBuffer in, inout;
    *rc = make_message_buffer(const_cast<void *>(inbuf), static_cast<int>(bytes), MPI_BYTE, in_attrs, &in, &why);
    if (*rc != MPI_SUCCESS) why = "inbuf: " + why;
    if (*rc == MPI_SUCCESS) {
        *rc = make_message_buffer(inoutbuf, static_cast<int>(bytes), MPI_BYTE, io_attrs, &inout, &why);
        if (*rc != MPI_SUCCESS) why = "inoutbuf: " + why;
    }
    if (*rc == MPI_SUCCESS && (!in.device || !inout.device)) {
        if (count == 0) return true;
        why = "a device buffer was captured without its device";
        *rc = MPI_ERR_INTERN;
    }
    if (*rc == MPI_SUCCESS) *rc = inout.device->reduce_local(*in.device, spec, count, &why);
    if (*rc != MPI_SUCCESS) *rc = raise_error(comm, *rc, call, why);
    return true;
}

}  // namespace

// The wrappers' common head: before MPI_Init (or after MPI_Finalize) MPICH has it all, and
// with no possible device buffer there is nothing to look at.
#define MPIACC_COLLECTIVE_ENTRY(name, passthrough) \
    const char *call = name;                       \
    Context &ctx = context();                      \
    if (!ctx.initialized) return passthrough;      \
    const bool check = !only_host_buffers(ctx);    \
    (void)call;                                    \
    (void)check
// Returns from the calling wrapper with the error of a describe_* call (its message in
// why_).
#define MPIACC_DESCRIBE(expr)                                              \
    do {                                                                   \
        std::string why_;                                                  \
        int rc_ = (expr);                                                  \
        if (rc_ != MPI_SUCCESS) return raise_error(comm, rc_, call, why_); \
    } while (0)

extern "C" {

// Every collective (blocking, nonblocking, persistent, large-count) and MPI_Reduce_local.
#include "binding/collective_wrappers.inc"

}  // extern "C"
