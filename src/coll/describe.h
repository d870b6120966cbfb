// What each collective reads and writes at the calling rank, as CollCall buffers: the
// arguments significant here (a rooted collective's root side, MPI_IN_PLACE, the two
// groups of an intercommunicator), in or out, and their pieces. Each returns MPI_SUCCESS
// or an MPI error class with *why naming the argument. Count and displacement types are
// templates: the large-count (_c) forms take MPI_Count and MPI_Aint.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "coll/coll_call.h"

namespace mpiacc {

// The calling rank's place in a communicator.
struct CommShape {
    bool inter = false;
    int rank = 0;
    int size = 0;                       // local group
    int remote = 0;                     // the group a rank's rooted or all-to-all peers are in
    int in_degree = 0, out_degree = 0;  // neighbourhood collectives: of a topology
};
CommShape comm_shape(MPI_Comm comm, bool neighbourhood = false);

// Which side of a rooted collective this rank is on: `root` for the root's buffers (its
// receive buffer in a gather, its send buffer in a scatter), `member` for the side every
// other participant has. In an intracommunicator the root is a member too; in an
// intercommunicator the root passes MPI_ROOT, the rest of its group MPI_PROC_NULL
// (nothing significant), and the other group the root's rank.
struct Rooted {
    bool root = false, member = false;
};
Rooted rooted(const CommShape &shape, int root);

std::int64_t type_extent(MPI_Datatype type);

namespace describe_detail {

template <class C>
std::int64_t at(const C *a, int i) {
    return a ? static_cast<std::int64_t>(a[i]) : 0;
}
// `n` blocks of counts[i] elements at displs[i] extents (or bytes, for the "w" forms).
template <class C, class D>
std::vector<CollPiece> blocks(int n, const C *counts, const D *displs, MPI_Datatype type, bool bytes,
                              const MPI_Datatype *types = nullptr) {
    std::vector<CollPiece> p;
    p.reserve(static_cast<std::size_t>(n > 0 ? n : 0));
    const std::int64_t unit = bytes ? 1 : type_extent(type);
    for (int i = 0; i < n; ++i) p.push_back(CollPiece{at(displs, i) * unit, at(counts, i), types ? types[i] : type});
    return p;
}
inline std::vector<CollPiece> one(std::int64_t count, MPI_Datatype type) { return {CollPiece{0, count, type}}; }
// Notes a v form's count and displacement arrays of `n` entries (CollCall::kept).
template <class C, class D>
void note(CollCall &c, int n, const C *counts, const D *displs) {
    if (n <= 0) return;
    c.note_array(counts, sizeof(C) * static_cast<std::size_t>(n));
    c.note_array(displs, sizeof(D) * static_cast<std::size_t>(n));
}

int slot(CollCall &c, int s, const void *user, bool significant, bool in, bool out,
         const std::vector<CollPiece> &pieces, std::string *why);

}  // namespace describe_detail

int describe_bcast(CollCall &c, const void *buffer, std::int64_t count, MPI_Datatype type, int root, std::string *why);

int describe_reduce(CollCall &c, const void *sendbuf, const void *recvbuf, std::int64_t count, MPI_Datatype type,
                    int root, std::string *why);

enum class Prefix { NONE, INCLUSIVE, EXCLUSIVE };  // allreduce; scan; exscan
int describe_allreduce(CollCall &c, const void *sendbuf, const void *recvbuf, std::int64_t count, MPI_Datatype type,
                       Prefix prefix, std::string *why);

int describe_reduce_scatter_block(CollCall &c, const void *sendbuf, const void *recvbuf, std::int64_t recvcount,
                                  MPI_Datatype type, std::string *why);

template <class C>
int describe_reduce_scatter(CollCall &c, const void *sendbuf, const void *recvbuf, const C *recvcounts,
                            MPI_Datatype type, std::string *why) {
    using namespace describe_detail;
    const CommShape sh = comm_shape(c.comm());
    std::int64_t total = 0;
    for (int i = 0; i < sh.size; ++i) total += at(recvcounts, i);
    c.note_array(recvcounts, sizeof(C) * static_cast<std::size_t>(sh.size));
    const bool in_place = sendbuf == MPI_IN_PLACE;
    int rc = slot(c, 0, sendbuf, !in_place, true, false, one(total, type), why);
    if (rc != MPI_SUCCESS) return rc;
    return slot(c, 1, recvbuf, true, in_place, true, one(in_place ? total : at(recvcounts, sh.rank), type), why);
}

// Gather (to_root) and scatter (from the root), with one count or per-peer counts and
// displacements (the v forms: counts and displs non-null).
template <class C, class D>
int describe_gather(CollCall &c, const void *sendbuf, std::int64_t sendcount, MPI_Datatype sendtype,
                    const void *recvbuf, std::int64_t recvcount, const C *recvcounts, const D *displs,
                    MPI_Datatype recvtype, int root, std::string *why) {
    using namespace describe_detail;
    const CommShape sh = comm_shape(c.comm());
    const Rooted at_ = rooted(sh, root);
    if (at_.root) note(c, sh.remote, recvcounts, displs);
    const bool in_place = sendbuf == MPI_IN_PLACE;
    int rc = slot(c, 0, sendbuf, at_.member && !in_place, true, false, one(sendcount, sendtype), why);
    if (rc != MPI_SUCCESS) return rc;
    return slot(
        c, 1, recvbuf, at_.root, in_place, true,
        recvcounts ? blocks(sh.remote, recvcounts, displs, recvtype, false) : one(recvcount * sh.remote, recvtype),
        why);
}

template <class C, class D>
int describe_scatter(CollCall &c, const void *sendbuf, std::int64_t sendcount, const C *sendcounts, const D *displs,
                     MPI_Datatype sendtype, const void *recvbuf, std::int64_t recvcount, MPI_Datatype recvtype,
                     int root, std::string *why) {
    using namespace describe_detail;
    const CommShape sh = comm_shape(c.comm());
    const Rooted at_ = rooted(sh, root);
    if (at_.root) note(c, sh.remote, sendcounts, displs);
    int rc =
        slot(c, 0, sendbuf, at_.root, true, false,
             sendcounts ? blocks(sh.remote, sendcounts, displs, sendtype, false) : one(sendcount * sh.remote, sendtype),
             why);
    if (rc != MPI_SUCCESS) return rc;
    return slot(c, 1, recvbuf, at_.member && recvbuf != MPI_IN_PLACE, false, true, one(recvcount, recvtype), why);
}

// Allgather(v) and the neighbourhood allgather(v): one send block, a receive block per peer.
template <class C, class D>
int describe_allgather(CollCall &c, const void *sendbuf, std::int64_t sendcount, MPI_Datatype sendtype,
                       const void *recvbuf, std::int64_t recvcount, const C *recvcounts, const D *displs,
                       MPI_Datatype recvtype, bool neighbourhood, std::string *why) {
    using namespace describe_detail;
    const CommShape sh = comm_shape(c.comm(), neighbourhood);
    const int peers = neighbourhood ? sh.in_degree : sh.remote;
    note(c, peers, recvcounts, displs);
    const bool in_place = sendbuf == MPI_IN_PLACE;
    int rc = slot(c, 0, sendbuf, !in_place, true, false, one(sendcount, sendtype), why);
    if (rc != MPI_SUCCESS) return rc;
    return slot(c, 1, recvbuf, true, in_place, true,
                recvcounts ? blocks(peers, recvcounts, displs, recvtype, false) : one(recvcount * peers, recvtype),
                why);
}

// Alltoall(v,w) and the neighbourhood alltoall(v,w): a block per peer each way. The w
// forms pass per-peer types and byte displacements.
template <class C, class D>
int describe_alltoall(CollCall &c, const void *sendbuf, std::int64_t sendcount, const C *sendcounts, const D *sdispls,
                      MPI_Datatype sendtype, const MPI_Datatype *sendtypes, const void *recvbuf, std::int64_t recvcount,
                      const C *recvcounts, const D *rdispls, MPI_Datatype recvtype, const MPI_Datatype *recvtypes,
                      bool neighbourhood, std::string *why) {
    using namespace describe_detail;
    const CommShape sh = comm_shape(c.comm(), neighbourhood);
    const int out_peers = neighbourhood ? sh.out_degree : sh.remote;
    const int in_peers = neighbourhood ? sh.in_degree : sh.remote;
    const bool in_place = sendbuf == MPI_IN_PLACE;
    const bool w = sendtypes || recvtypes;
    note(c, out_peers, sendcounts, sdispls);
    note(c, in_peers, recvcounts, rdispls);
    if (sendtypes && !in_place) c.set_type_array(0, sendtypes, out_peers);
    if (recvtypes) c.set_type_array(1, recvtypes, in_peers);
    int rc = slot(c, 0, sendbuf, !in_place, true, false,
                  sendcounts ? blocks(out_peers, sendcounts, sdispls, sendtype, w, sendtypes)
                             : one(sendcount * out_peers, sendtype),
                  why);
    if (rc != MPI_SUCCESS) return rc;
    return slot(c, 1, recvbuf, true, in_place, true,
                recvcounts ? blocks(in_peers, recvcounts, rdispls, recvtype, w, recvtypes)
                           : one(recvcount * in_peers, recvtype),
                why);
}

}  // namespace mpiacc
