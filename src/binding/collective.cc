// Collectives. Two rules hold for every one of them:
//
// - Progress (DESIGN 2.6). A blocking collective runs as its nonblocking form plus MPI-ACC
//   progress, so a rank blocked in one still answers its peers' CTS and chunks: Isend(gpu)
//   followed by MPI_Barrier must not hang. Every time, not only while this rank has
//   transfers in flight: MPI does not match a blocking collective with a nonblocking one,
//   and another rank may have chosen differently. MPICH offers no hook into its own
//   progress loop (checked: generalized-request poll functions are not called from a
//   blocking MPI_Barrier in 4.0.2).
// - Host data only. Device buffers in collectives are ROADMAP 2. Until then a buffer that
//   is tagged with a device MPIX_ACC_BUF_TYPE, or found to be CUDA memory, gets
//   MPI_ERR_UNSUPPORTED_OPERATION before MPICH sees it: MPICH would read a cl_mem handle
//   or a device pointer as host memory. Only the arguments significant at this rank are
//   looked at (a non-root's receive type may be anything).
#include "binding/binding.h"

using namespace mpiacc;

int mpiacc::require_host_buffer(const void *buf, MPI_Datatype type, const char *arg, const char *refusal,
                                std::string *why) {
    BufferAttrs attrs;
    int rc = classify_buffer(buf, type, &attrs, why);
    if (rc != MPI_SUCCESS) {
        *why = format("%s: %s", arg, why->c_str());
        return rc;
    }
    if (attrs.kind == BufKind::HOST) return MPI_SUCCESS;
    *why = format("%s is a %s buffer: %s; move the data through host memory, or use point-to-point", arg,
                  buf_kind_name(attrs.kind), refusal);
    return MPI_ERR_UNSUPPORTED_OPERATION;
}

namespace {

// No buffer can be a device buffer: no type carries an MPI-ACC attribute and CUDA
// pointers are not looked for. Then nothing needs classifying.
bool only_host_buffers(const Context &ctx) {
    return ctx.tagged_type_count.load(std::memory_order_relaxed) == 0 && !ctx.cuda_autodetect_active;
}

// MPI_SUCCESS, or the error raised on comm for argument `arg`: a device buffer, or MPI-ACC
// attributes that do not describe a buffer.
int require_host(const void *buf, MPI_Datatype type, MPI_Comm comm, const char *call, const char *arg) {
    if (buf == MPI_IN_PLACE) return MPI_SUCCESS;
    std::string why;
    int rc = require_host_buffer(buf, type, arg, "collectives on device buffers are not supported yet (ROADMAP 2)",
                                 &why);
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

}  // namespace

// Returns from the calling wrapper when argument `arg` is not host memory.
#define MPIACC_REQUIRE_HOST(significant, buf, type, arg)                                        \
    do {                                                                                       \
        if (significant) {                                                                     \
            int rc_ = require_host(buf, type, comm, call, arg);                                \
            if (rc_ != MPI_SUCCESS) return rc_;                                                \
        }                                                                                      \
    } while (0)
#define MPIACC_REQUIRE_HOST_W(buf, types, ntypes, arg)                                          \
    do {                                                                                       \
        int rc_ = require_host(buf, types, ntypes, comm, call, arg);                           \
        if (rc_ != MPI_SUCCESS) return rc_;                                                    \
    } while (0)
// The wrappers' common head: before MPI_Init (or after MPI_Finalize) MPICH has it all,
// and with no possible device buffer there is nothing to look at.
#define MPIACC_COLLECTIVE_ENTRY(name, passthrough) \
    const char *call = name;                       \
    Context &ctx = context();                      \
    if (!ctx.initialized) return passthrough;      \
    const bool check = !only_host_buffers(ctx);    \
    (void)call

extern "C" {

// ------------------------------------------------------------------ blocking

int MPI_Barrier(MPI_Comm comm) {
    if (!context().initialized) return PMPI_Barrier(comm);
    MPI_Request r;
    return finish(PMPI_Ibarrier(comm, &r), &r);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Bcast", PMPI_Bcast(buf, count, type, root, comm));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.root || at.member, buf, type, "buffer");
    }
    MPI_Request r;
    return finish(PMPI_Ibcast(buf, count, type, root, comm, &r), &r);
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Reduce", PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.member, sbuf, type, "sendbuf");
        MPIACC_REQUIRE_HOST(at.root, rbuf, type, "recvbuf");
    }
    MPI_Request r;
    return finish(PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, &r), &r);
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Allreduce", PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, type, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, type, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, &r), &r);
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
               MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Gather", PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.member, sbuf, stype, "sendbuf");
        MPIACC_REQUIRE_HOST(at.root, rbuf, rtype, "recvbuf");
    }
    MPI_Request r;
    return finish(PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &r), &r);
}

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
                MPI_Datatype rtype, int root, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Gatherv", PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.member, sbuf, stype, "sendbuf");
        MPIACC_REQUIRE_HOST(at.root, rbuf, rtype, "recvbuf");
    }
    MPI_Request r;
    return finish(PMPI_Igatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, &r), &r);
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
                MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Scatter", PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.root, sbuf, stype, "sendbuf");
        MPIACC_REQUIRE_HOST(at.member, rbuf, rtype, "recvbuf");
    }
    MPI_Request r;
    return finish(PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &r), &r);
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Scatterv",
                            PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.root, sbuf, stype, "sendbuf");
        MPIACC_REQUIRE_HOST(at.member, rbuf, rtype, "recvbuf");
    }
    MPI_Request r;
    return finish(PMPI_Iscatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, &r), &r);
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Allgather", PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, &r), &r);
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                   const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Allgatherv", PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, &r), &r);
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                 MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Alltoall", PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, &r), &r);
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
                  const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Alltoallv",
                            PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, &r), &r);
}

int MPI_Alltoallw(const void *sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[], void *rbuf,
                  const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Alltoallw",
                            PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm));
    if (check) {
        const int n = peers(comm);
        MPIACC_REQUIRE_HOST_W(sbuf, stypes, n, "sendbuf");
        MPIACC_REQUIRE_HOST_W(rbuf, rtypes, n, "recvbuf");
    }
    MPI_Request r;
    return finish(PMPI_Ialltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, &r), &r);
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Reduce_scatter", PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, type, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, type, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Ireduce_scatter(sbuf, rbuf, rcounts, type, op, comm, &r), &r);
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Reduce_scatter_block", PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, type, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, type, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Ireduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, &r), &r);
}

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Scan", PMPI_Scan(sbuf, rbuf, count, type, op, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, type, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, type, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Iscan(sbuf, rbuf, count, type, op, comm, &r), &r);
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Exscan", PMPI_Exscan(sbuf, rbuf, count, type, op, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, type, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, type, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Iexscan(sbuf, rbuf, count, type, op, comm, &r), &r);
}

int MPI_Neighbor_allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                           MPI_Datatype rtype, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Neighbor_allgather",
                            PMPI_Neighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Ineighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, &r), &r);
}

int MPI_Neighbor_allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                            const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Neighbor_allgatherv",
                            PMPI_Neighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Ineighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, &r), &r);
}

int MPI_Neighbor_alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                          MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Neighbor_alltoall",
                            PMPI_Neighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    MPI_Request r;
    return finish(PMPI_Ineighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, &r), &r);
}

int MPI_Neighbor_alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
                           const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Neighbor_alltoallv", PMPI_Neighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf,
                                                                             rcounts, rdispls, rtype, comm));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    MPI_Request r;
    return finish(
        PMPI_Ineighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, &r), &r);
}

int MPI_Neighbor_alltoallw(const void *sbuf, const int scounts[], const MPI_Aint sdispls[],
                           const MPI_Datatype stypes[], void *rbuf, const int rcounts[], const MPI_Aint rdispls[],
                           const MPI_Datatype rtypes[], MPI_Comm comm) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Neighbor_alltoallw", PMPI_Neighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf,
                                                                             rcounts, rdispls, rtypes, comm));
    if (check) {
        int in = 0, out = 0;
        neighbours(comm, &in, &out);
        MPIACC_REQUIRE_HOST_W(sbuf, stypes, out, "sendbuf");
        MPIACC_REQUIRE_HOST_W(rbuf, rtypes, in, "recvbuf");
    }
    MPI_Request r;
    return finish(
        PMPI_Ineighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, &r), &r);
}

// Local, but MPICH reads both buffers as host memory all the same. Errors without a
// communicator go to MPI_COMM_WORLD's handler, as MPICH's own do.
int MPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype type, MPI_Op op) {
    MPI_Comm comm = MPI_COMM_WORLD;
    MPIACC_COLLECTIVE_ENTRY("MPI_Reduce_local", PMPI_Reduce_local(inbuf, inoutbuf, count, type, op));
    MPIACC_REQUIRE_HOST(check, inbuf, type, "inbuf");
    MPIACC_REQUIRE_HOST(check, inoutbuf, type, "inoutbuf");
    return PMPI_Reduce_local(inbuf, inoutbuf, count, type, op);
}

// ------------------------------------------------------------------ nonblocking
// Only the buffer check; MPI_Wait and friends drive progress while they wait.

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ibcast", PMPI_Ibcast(buf, count, type, root, comm, req));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.root || at.member, buf, type, "buffer");
    }
    return PMPI_Ibcast(buf, count, type, root, comm, req);
}

int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ireduce", PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, req));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.member, sbuf, type, "sendbuf");
        MPIACC_REQUIRE_HOST(at.root, rbuf, type, "recvbuf");
    }
    return PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, req);
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Iallreduce", PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, type, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, type, "recvbuf");
    return PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req);
}

int MPI_Igather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
                MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Igather", PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.member, sbuf, stype, "sendbuf");
        MPIACC_REQUIRE_HOST(at.root, rbuf, rtype, "recvbuf");
    }
    return PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);
}

int MPI_Igatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Igatherv",
                            PMPI_Igatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.member, sbuf, stype, "sendbuf");
        MPIACC_REQUIRE_HOST(at.root, rbuf, rtype, "recvbuf");
    }
    return PMPI_Igatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req);
}

int MPI_Iscatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                 int root, MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Iscatter", PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.root, sbuf, stype, "sendbuf");
        MPIACC_REQUIRE_HOST(at.member, rbuf, rtype, "recvbuf");
    }
    return PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);
}

int MPI_Iscatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf,
                  int rcount, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Iscatterv",
                            PMPI_Iscatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req));
    if (check) {
        Rooted at = rooted(comm, root);
        MPIACC_REQUIRE_HOST(at.root, sbuf, stype, "sendbuf");
        MPIACC_REQUIRE_HOST(at.member, rbuf, rtype, "recvbuf");
    }
    return PMPI_Iscatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req);
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                   MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Iallgather", PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    return PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

int MPI_Iallgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                    const int displs[], MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Iallgatherv",
                            PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    return PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req);
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ialltoall", PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    return PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

int MPI_Ialltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ialltoallv",
                            PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    return PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req);
}

int MPI_Ialltoallw(const void *sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[],
                   void *rbuf, const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm,
                   MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ialltoallw", PMPI_Ialltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls,
                                                             rtypes, comm, req));
    if (check) {
        const int n = peers(comm);
        MPIACC_REQUIRE_HOST_W(sbuf, stypes, n, "sendbuf");
        MPIACC_REQUIRE_HOST_W(rbuf, rtypes, n, "recvbuf");
    }
    return PMPI_Ialltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, req);
}

int MPI_Ireduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op,
                        MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ireduce_scatter", PMPI_Ireduce_scatter(sbuf, rbuf, rcounts, type, op, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, type, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, type, "recvbuf");
    return PMPI_Ireduce_scatter(sbuf, rbuf, rcounts, type, op, comm, req);
}

int MPI_Ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                              MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ireduce_scatter_block",
                            PMPI_Ireduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, type, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, type, "recvbuf");
    return PMPI_Ireduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, req);
}

int MPI_Iscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Iscan", PMPI_Iscan(sbuf, rbuf, count, type, op, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, type, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, type, "recvbuf");
    return PMPI_Iscan(sbuf, rbuf, count, type, op, comm, req);
}

int MPI_Iexscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Iexscan", PMPI_Iexscan(sbuf, rbuf, count, type, op, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, type, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, type, "recvbuf");
    return PMPI_Iexscan(sbuf, rbuf, count, type, op, comm, req);
}

int MPI_Ineighbor_allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                            MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ineighbor_allgather",
                            PMPI_Ineighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    return PMPI_Ineighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

int MPI_Ineighbor_allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                             const int displs[], MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ineighbor_allgatherv",
                            PMPI_Ineighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    return PMPI_Ineighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req);
}

int MPI_Ineighbor_alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                           MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ineighbor_alltoall",
                            PMPI_Ineighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    return PMPI_Ineighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

int MPI_Ineighbor_alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                            void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                            MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ineighbor_alltoallv", PMPI_Ineighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf,
                                                                               rcounts, rdispls, rtype, comm, req));
    MPIACC_REQUIRE_HOST(check, sbuf, stype, "sendbuf");
    MPIACC_REQUIRE_HOST(check, rbuf, rtype, "recvbuf");
    return PMPI_Ineighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req);
}

int MPI_Ineighbor_alltoallw(const void *sbuf, const int scounts[], const MPI_Aint sdispls[],
                            const MPI_Datatype stypes[], void *rbuf, const int rcounts[], const MPI_Aint rdispls[],
                            const MPI_Datatype rtypes[], MPI_Comm comm, MPI_Request *req) {
    MPIACC_COLLECTIVE_ENTRY("MPI_Ineighbor_alltoallw", PMPI_Ineighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf,
                                                                               rcounts, rdispls, rtypes, comm, req));
    if (check) {
        int in = 0, out = 0;
        neighbours(comm, &in, &out);
        MPIACC_REQUIRE_HOST_W(sbuf, stypes, out, "sendbuf");
        MPIACC_REQUIRE_HOST_W(rbuf, rtypes, in, "recvbuf");
    }
    return PMPI_Ineighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, req);
}

}  // extern "C"
