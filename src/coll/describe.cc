#include "coll/describe.h"

namespace mpiacc {

CommShape comm_shape(MPI_Comm comm, bool neighbourhood) {
    CommShape s;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    s.inter = inter != 0;
    PMPI_Comm_rank(comm, &s.rank);
    PMPI_Comm_size(comm, &s.size);
    s.remote = s.size;
    if (s.inter) PMPI_Comm_remote_size(comm, &s.remote);
    if (!neighbourhood) return s;
    // A communicator without a topology has no neighbours: MPICH reports the error.
    int topo = MPI_UNDEFINED;
    PMPI_Topo_test(comm, &topo);
    if (topo == MPI_CART) {
        int ndims = 0;
        PMPI_Cartdim_get(comm, &ndims);
        s.in_degree = s.out_degree = 2 * ndims;
    } else if (topo == MPI_GRAPH) {
        PMPI_Graph_neighbors_count(comm, s.rank, &s.in_degree);
        s.out_degree = s.in_degree;
    } else if (topo == MPI_DIST_GRAPH) {
        int weighted = 0;
        PMPI_Dist_graph_neighbors_count(comm, &s.in_degree, &s.out_degree, &weighted);
    }
    return s;
}

Rooted rooted(const CommShape &shape, int root) {
    if (shape.inter) return Rooted{root == MPI_ROOT, root != MPI_ROOT && root != MPI_PROC_NULL};
    return Rooted{shape.rank == root, true};
}

std::int64_t type_extent(MPI_Datatype type) {
    MPI_Count lb = 0, extent = 0;
    if (type == MPI_DATATYPE_NULL || PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS) return 0;
    return static_cast<std::int64_t>(extent);
}

namespace describe_detail {

int slot(CollCall &c, int s, const void *user, bool significant, bool in, bool out,
         const std::vector<CollPiece> &pieces, std::string *why) {
    c.name(s, s == 0 ? "sendbuf" : "recvbuf", user);
    if (!significant || user == MPI_IN_PLACE) return MPI_SUCCESS;
    return c.describe(s, in, out, pieces, why);
}

}  // namespace describe_detail

int describe_bcast(CollCall &c, const void *buffer, std::int64_t count, MPI_Datatype type, int root, std::string *why) {
    const Rooted at = rooted(comm_shape(c.comm()), root);
    c.name(0, "buffer", buffer);
    if (!at.root && !at.member) return MPI_SUCCESS;
    return c.describe(0, at.root, !at.root, describe_detail::one(count, type), why);
}

int describe_reduce(CollCall &c, const void *sendbuf, const void *recvbuf, std::int64_t count, MPI_Datatype type,
                    int root, std::string *why) {
    using namespace describe_detail;
    const Rooted at_ = rooted(comm_shape(c.comm()), root);
    const bool in_place = sendbuf == MPI_IN_PLACE;
    int rc = slot(c, 0, sendbuf, at_.member && !in_place, true, false, one(count, type), why);
    if (rc != MPI_SUCCESS) return rc;
    return slot(c, 1, recvbuf, at_.root, in_place, true, one(count, type), why);
}

int describe_allreduce(CollCall &c, const void *sendbuf, const void *recvbuf, std::int64_t count, MPI_Datatype type,
                       Prefix prefix, std::string *why) {
    using namespace describe_detail;
    const bool in_place = sendbuf == MPI_IN_PLACE;
    int rc = slot(c, 0, sendbuf, !in_place, true, false, one(count, type), why);
    if (rc != MPI_SUCCESS) return rc;
    // Rank 0 of an exscan gets nothing: its receive buffer keeps what it held.
    bool keeps = in_place;
    if (prefix == Prefix::EXCLUSIVE) {
        int rank = 0;
        PMPI_Comm_rank(c.comm(), &rank);
        keeps = keeps || rank == 0;
    }
    return slot(c, 1, recvbuf, true, keeps, true, one(count, type), why);
}

int describe_reduce_scatter_block(CollCall &c, const void *sendbuf, const void *recvbuf, std::int64_t recvcount,
                                  MPI_Datatype type, std::string *why) {
    using namespace describe_detail;
    const CommShape sh = comm_shape(c.comm());
    const bool in_place = sendbuf == MPI_IN_PLACE;
    int rc = slot(c, 0, sendbuf, !in_place, true, false, one(recvcount * sh.size, type), why);
    if (rc != MPI_SUCCESS) return rc;
    return slot(c, 1, recvbuf, true, in_place, true, one(in_place ? recvcount * sh.size : recvcount, type), why);
}

}  // namespace mpiacc
