// Communicator constructors keep the progress rule (DESIGN 2.6). Each blocks in MPICH
// until every member has called it, and MPICH gives MPI-ACC no turn meanwhile. A member
// that has an Isend(gpu), or a host message above the rendezvous threshold, in flight
// would sit in MPICH while its receiver, not yet in the call, waits in MPI_Recv for the
// data: neither ever arrives (seen with MPI_Comm_split and MPI_Comm_dup and a 4 MiB host
// MPI_Isend; test/mpi/progress_blocking_calls.c).
//
// So every member first meets the others in a nonblocking barrier on the communicator,
// driving MPI-ACC progress until all have arrived. From then on each member is inside
// the constructor, which needs nothing more of MPI-ACC. The barrier runs every time, not
// only while transfers are in flight, because all members must make the same collective
// calls on the communicator. MPI_Comm_dup and MPI_Comm_dup_with_info have nonblocking
// forms and use those instead.
//
// Two constructors are not collective over one communicator. MPI_Comm_create_group is
// collective over a group: its members meet through the first of them, with empty
// messages on Context::meeting_comm (a private duplicate of MPI_COMM_WORLD) under the
// call's tag. MPI_Intercomm_create is collective over two groups that meet through their
// leaders: each group meets, the leaders exchange an empty message on meeting_comm,
// and each group meets again, so that every member knows both groups are inside.
#include <algorithm>
#include <vector>

#include "binding/binding.h"
#include "coll/issue_order.h"

using namespace mpiacc;

int mpiacc::meet_members(MPI_Comm comm) {
    wait_for_queued_collectives(comm);
    MPI_Request r;
    int rc = PMPI_Ibarrier(comm, &r);
    return rc != MPI_SUCCESS ? rc : wait_mpich_request(&r, MPI_STATUS_IGNORE);
}

namespace {

// An empty message each way with world rank `peer` under `tag` on the meeting channel:
// MPI_SUCCESS once the peer has called too.
int exchange_with(int peer, int tag) {
    const MPI_Comm meet = context().meeting_comm;
    std::vector<MPI_Request> reqs(2);
    int rc = PMPI_Isend(nullptr, 0, MPI_BYTE, peer, tag, meet, &reqs[0]);
    if (rc == MPI_SUCCESS) rc = PMPI_Irecv(nullptr, 0, MPI_BYTE, peer, tag, meet, &reqs[1]);
    return rc != MPI_SUCCESS ? rc : wait_each(reqs);
}

// MPI_SUCCESS once every process of `members` (world ranks; the first leads) has called
// with `tag`: each sends the leader an empty message, the leader answers all once it
// has them.
int meet_through_leader(const std::vector<int> &members, int tag) {
    const Context &ctx = context();
    const int leader = members.front();
    std::vector<MPI_Request> reqs;
    if (ctx.world_rank == leader) {
        reqs.resize(members.size() - 1);
        for (std::size_t i = 1; i < members.size(); ++i) {
            int rc = PMPI_Irecv(nullptr, 0, MPI_BYTE, members[i], tag, ctx.meeting_comm, &reqs[i - 1]);
            if (rc != MPI_SUCCESS) return rc;
        }
        int rc = wait_each(reqs);
        if (rc != MPI_SUCCESS) return rc;
        for (std::size_t i = 1; i < members.size(); ++i) {
            rc = PMPI_Isend(nullptr, 0, MPI_BYTE, members[i], tag, ctx.meeting_comm, &reqs[i - 1]);
            if (rc != MPI_SUCCESS) return rc;
        }
        return wait_each(reqs);
    }
    return exchange_with(leader, tag);
}

// The world ranks of `group`, in group order; empty when one is not in this
// MPI_COMM_WORLD (processes spawned or connected later), where no meeting is possible.
std::vector<int> world_ranks(MPI_Group group) {
    int n = 0;
    if (group == MPI_GROUP_NULL || PMPI_Group_size(group, &n) != MPI_SUCCESS || n <= 0) return {};
    std::vector<int> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n), MPI_UNDEFINED);
    for (int i = 0; i < n; ++i) in[static_cast<std::size_t>(i)] = i;
    MPI_Group world;
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    int rc = PMPI_Group_translate_ranks(group, n, in.data(), world, out.data());
    PMPI_Group_free(&world);
    if (rc != MPI_SUCCESS) return {};
    for (int r : out)
        if (r == MPI_UNDEFINED) return {};
    return out;
}

}  // namespace

// The constructor `made` after the members have met (before MPI_Init, or on MPI_COMM_NULL,
// MPICH's own call, whose error then names it).
#define MPIACC_CONSTRUCTOR(comm, made)                          \
    do {                                                        \
        if (context().initialized && (comm) != MPI_COMM_NULL) { \
            int rc_ = meet_members(comm);                       \
            if (rc_ != MPI_SUCCESS) return rc_;                 \
        }                                                       \
        return made;                                            \
    } while (0)

extern "C" {

// An invalid communicator is left to MPICH's own call, whose error then names it.
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    if (!context().initialized || comm == MPI_COMM_NULL) return PMPI_Comm_dup(comm, newcomm);
    wait_for_queued_collectives(comm);
    MPI_Request r;
    int rc = PMPI_Comm_idup(comm, newcomm, &r);
    return rc != MPI_SUCCESS ? rc : wait_mpich_request(&r, MPI_STATUS_IGNORE);
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
    if (!context().initialized || comm == MPI_COMM_NULL) return PMPI_Comm_dup_with_info(comm, info, newcomm);
    wait_for_queued_collectives(comm);
    MPI_Request r;
    int rc = PMPI_Comm_idup_with_info(comm, info, newcomm, &r);
    return rc != MPI_SUCCESS ? rc : wait_mpich_request(&r, MPI_STATUS_IGNORE);
}

// The nonblocking duplicates are collectives MPICH orders with the others (issue_order.h).
int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request) {
    if (context().initialized && comm != MPI_COMM_NULL) wait_for_queued_collectives(comm);
    return PMPI_Comm_idup(comm, newcomm, request);
}

int MPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, MPI_Request *request) {
    if (context().initialized && comm != MPI_COMM_NULL) wait_for_queued_collectives(comm);
    return PMPI_Comm_idup_with_info(comm, info, newcomm, request);
}

// A collective still waiting for its turn names the communicator, and the op it reduces
// with: MPI lets the user free both while it is pending, so it is issued first.
int MPI_Comm_free(MPI_Comm *comm) {
    if (context().initialized && comm && *comm != MPI_COMM_NULL) wait_for_queued_collectives(*comm);
    return PMPI_Comm_free(comm);
}

int MPI_Op_free(MPI_Op *op) {
    if (context().initialized) wait_for_queued_collectives(MPI_COMM_NULL);
    return PMPI_Op_free(op);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
    MPIACC_CONSTRUCTOR(comm, PMPI_Comm_create(comm, group, newcomm));
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    MPIACC_CONSTRUCTOR(comm, PMPI_Comm_split(comm, color, key, newcomm));
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm) {
    MPIACC_CONSTRUCTOR(comm, PMPI_Comm_split_type(comm, split_type, key, info, newcomm));
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm) {
    if (context().initialized && comm != MPI_COMM_NULL) {
        const std::vector<int> members = world_ranks(group);
        // (A caller outside the group is erroneous; MPICH reports it, without a meeting.)
        if (std::find(members.begin(), members.end(), context().world_rank) != members.end()) {
            int rc = meet_through_leader(members, tag);
            if (rc != MPI_SUCCESS) return raise_error(comm, rc, "MPI_Comm_create_group", "meeting the group's members");
        }
    }
    return PMPI_Comm_create_group(comm, group, tag, newcomm);
}

int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag,
                         MPI_Comm *newintercomm) {
    if (context().initialized && local_comm != MPI_COMM_NULL) {
        int rc = meet_members(local_comm);
        int rank = MPI_PROC_NULL;
        if (rc == MPI_SUCCESS) rc = PMPI_Comm_rank(local_comm, &rank);
        if (rc == MPI_SUCCESS && rank == local_leader && peer_comm != MPI_COMM_NULL) {
            const int remote = world_rank_of(peer_comm, remote_leader);
            if (remote >= 0 && remote != MPI_UNDEFINED) rc = exchange_with(remote, tag);
        }
        if (rc == MPI_SUCCESS) rc = meet_members(local_comm);
        if (rc != MPI_SUCCESS) return rc;
    }
    return PMPI_Intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag, newintercomm);
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm) {
    MPIACC_CONSTRUCTOR(intercomm, PMPI_Intercomm_merge(intercomm, high, newintracomm));
}

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm *comm_cart) {
    MPIACC_CONSTRUCTOR(comm_old, PMPI_Cart_create(comm_old, ndims, dims, periods, reorder, comm_cart));
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
    MPIACC_CONSTRUCTOR(comm, PMPI_Cart_sub(comm, remain_dims, newcomm));
}

int MPI_Graph_create(MPI_Comm comm_old, int nnodes, const int indx[], const int edges[], int reorder,
                     MPI_Comm *comm_graph) {
    MPIACC_CONSTRUCTOR(comm_old, PMPI_Graph_create(comm_old, nnodes, indx, edges, reorder, comm_graph));
}

int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int sources[], const int degrees[], const int destinations[],
                          const int weights[], MPI_Info info, int reorder, MPI_Comm *comm_dist_graph) {
    MPIACC_CONSTRUCTOR(comm_old, PMPI_Dist_graph_create(comm_old, n, sources, degrees, destinations, weights, info,
                                                        reorder, comm_dist_graph));
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[], const int sourceweights[],
                                   int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm *comm_dist_graph) {
    MPIACC_CONSTRUCTOR(
        comm_old, PMPI_Dist_graph_create_adjacent(comm_old, indegree, sources, sourceweights, outdegree, destinations,
                                                  destweights, info, reorder, comm_dist_graph));
}

}  // extern "C"
