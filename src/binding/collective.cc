// Collectives. Two rules hold for every one of them:
//
// - Progress (DESIGN 2.6). A blocking collective runs as its nonblocking form plus MPI-ACC
//   progress, so a rank blocked in one still answers its peers' CTS and chunks: Isend(gpu)
//   followed by MPI_Barrier must not hang. Every time, not only while this rank has
//   transfers in flight: MPI does not match a blocking collective with a nonblocking one,
//   and another rank may have chosen differently. MPICH offers no hook into its own
//   progress loop (checked: generalized-request poll functions are not called from a
//   blocking MPI_Barrier in 4.0.2).
// - Host data only, but for MPI_Reduce_local (reduced on the device, reduce_on_device).
//   Device buffers in the other collectives are future work. Until then a buffer that
//   is tagged with a device MPIX_ACC_BUF_TYPE, or found to be CUDA memory, gets
//   MPI_ERR_UNSUPPORTED_OPERATION before MPICH sees it: MPICH would read a cl_mem handle
//   or a device pointer as host memory. Only the arguments significant at this rank are
//   looked at (a non-root's receive type may be anything).
#include <climits>

#include "accel/reduce_op.h"
#include "binding/binding.h"

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

// MPI_SUCCESS, or the error raised on comm for argument `arg`: a device buffer, or MPI-ACC
// attributes that do not describe a buffer.
int require_host(const void *buf, MPI_Datatype type, MPI_Comm comm, const char *call, const char *arg) {
    if (buf == MPI_IN_PLACE) return MPI_SUCCESS;
    std::string why;
    int rc = require_host_buffer(buf, type, arg, "collectives on device buffers are not supported yet", &why);
    return rc == MPI_SUCCESS ? rc : raise_error(comm, rc, call, why);
}

// The same for a buffer described by one type per peer (the "w" collectives).
int require_host(const void *buf, const MPI_Datatype types[], int ntypes, MPI_Comm comm, const char *call,
                 const char *arg) {
    if (buf == MPI_IN_PLACE || types == nullptr) return MPI_SUCCESS;
    for (int i = 0; i < ntypes; ++i) {
        int rc = require_host(buf, types[i], comm, call, arg);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

// Which of a rooted collective's buffers are significant at this rank: `root` for the
// root's side (its receive buffer in a gather, its send buffer in a scatter), `member`
// for the side every other participant has. In an intracommunicator the root is a
// member too; in an intercommunicator the root passes MPI_ROOT, the rest of its group
// MPI_PROC_NULL (nothing significant), and the other group the root's rank.
struct Rooted {
    bool root = false, member = false;
};
Rooted rooted(MPI_Comm comm, int root) {
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) return Rooted{root == MPI_ROOT, root != MPI_ROOT && root != MPI_PROC_NULL};
    int rank = MPI_PROC_NULL;
    PMPI_Comm_rank(comm, &rank);
    return Rooted{rank == root, true};
}

// Entries in an alltoallw type array: one per process of the (remote) group.
int peers(MPI_Comm comm) {
    int inter = 0, n = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter)
        PMPI_Comm_remote_size(comm, &n);
    else
        PMPI_Comm_size(comm, &n);
    return n;
}

// In- and out-degree of a communicator with a topology (the neighbour collectives' type
// arrays); 0 and 0 without one (MPICH then reports the error itself).
void neighbours(MPI_Comm comm, int *in, int *out) {
    *in = *out = 0;
    int topo = MPI_UNDEFINED;
    PMPI_Topo_test(comm, &topo);
    if (topo == MPI_CART) {
        int ndims = 0;
        PMPI_Cartdim_get(comm, &ndims);
        *in = *out = 2 * ndims;
    } else if (topo == MPI_GRAPH) {
        int rank = 0;
        PMPI_Comm_rank(comm, &rank);
        PMPI_Graph_neighbors_count(comm, rank, in);
        *out = *in;
    } else if (topo == MPI_DIST_GRAPH) {
        int weighted = 0;
        PMPI_Dist_graph_neighbors_count(comm, in, out, &weighted);
    }
}

// A blocking collective as its nonblocking form, waited for with MPI-ACC progress.
int finish(int rc, MPI_Request *r) { return rc != MPI_SUCCESS ? rc : wait_mpich_request(r, MPI_STATUS_IGNORE); }

// The buffers of each family of collectives, where significant: MPI_SUCCESS, or the error
// raised on comm for the first that is not host memory.
int check_bcast(const void *buf, MPI_Datatype type, int root, MPI_Comm comm, const char *call) {
    Rooted at = rooted(comm, root);
    return at.root || at.member ? require_host(buf, type, comm, call, "buffer") : MPI_SUCCESS;
}

enum class Direction { TO_ROOT, FROM_ROOT };  // gather and reduce; scatter
int check_rooted(const void *sbuf, MPI_Datatype stype, const void *rbuf, MPI_Datatype rtype, int root, MPI_Comm comm,
                 const char *call, Direction d) {
    Rooted at = rooted(comm, root);
    const bool send_side = d == Direction::TO_ROOT ? at.member : at.root;
    const bool recv_side = d == Direction::TO_ROOT ? at.root : at.member;
    int rc = send_side ? require_host(sbuf, stype, comm, call, "sendbuf") : MPI_SUCCESS;
    return rc == MPI_SUCCESS && recv_side ? require_host(rbuf, rtype, comm, call, "recvbuf") : rc;
}

int check_all(const void *sbuf, MPI_Datatype stype, const void *rbuf, MPI_Datatype rtype, MPI_Comm comm,
              const char *call) {
    int rc = require_host(sbuf, stype, comm, call, "sendbuf");
    return rc == MPI_SUCCESS ? require_host(rbuf, rtype, comm, call, "recvbuf") : rc;
}

int check_all_w(const void *sbuf, const MPI_Datatype stypes[], const void *rbuf, const MPI_Datatype rtypes[],
                MPI_Comm comm, const char *call) {
    const int n = peers(comm);
    int rc = require_host(sbuf, stypes, n, comm, call, "sendbuf");
    return rc == MPI_SUCCESS ? require_host(rbuf, rtypes, n, comm, call, "recvbuf") : rc;
}

int check_neighbour_w(const void *sbuf, const MPI_Datatype stypes[], const void *rbuf, const MPI_Datatype rtypes[],
                      MPI_Comm comm, const char *call) {
    int in = 0, out = 0;
    neighbours(comm, &in, &out);
    int rc = require_host(sbuf, stypes, out, comm, call, "sendbuf");
    return rc == MPI_SUCCESS ? require_host(rbuf, rtypes, in, comm, call, "recvbuf") : rc;
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
    (void)call
// Returns from the calling wrapper with the error of a buffer check.
#define MPIACC_CHECK(expr)                      \
    do {                                        \
        if (check) {                            \
            int rc_ = (expr);                   \
            if (rc_ != MPI_SUCCESS) return rc_; \
        }                                       \
    } while (0)

extern "C" {

int MPI_Barrier(MPI_Comm comm) {
    if (!context().initialized) return PMPI_Barrier(comm);
    MPI_Request r;
    return finish(PMPI_Ibarrier(comm, &r), &r);
}

// Every other collective (blocking, nonblocking, persistent, large-count) and
// MPI_Reduce_local.
#include "binding/collective_wrappers.inc"

}  // extern "C"
