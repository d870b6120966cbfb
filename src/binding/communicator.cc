// Communicator constructors keep the progress rule (DESIGN 2.6). Each blocks in MPICH
// until every member has called it, and MPICH gives MPI-ACC no turn meanwhile. A member
// that has an Isend(gpu), or a host message above the rendezvous threshold, in flight
// would sit in MPICH while its receiver, not yet in the call, waits in MPI_Recv for the
// data: neither ever arrives (seen with MPI_Comm_split and MPI_Comm_dup and a 4 MiB host
// MPI_Isend before session 18).
//
// So every member first meets the others in a nonblocking barrier on the communicator,
// driving MPI-ACC progress until all have arrived. From then on each member is inside
// the constructor, which needs nothing more of MPI-ACC. The barrier runs every time, not
// only while transfers are in flight, because all members must make the same collective
// calls on the communicator. MPI_Comm_dup and MPI_Comm_dup_with_info have nonblocking
// forms and use those instead.
//
// Not covered yet: MPI_Comm_create_group (collective over a group, not a communicator)
// and MPI_Intercomm_create (the leaders meet on a peer communicator, which a barrier
// there would wrongly make collective); both need a meeting on a channel of MPI-ACC's own.
#include "binding/binding.h"

using namespace mpiacc;

namespace {

// MPI_SUCCESS once every member of comm (both groups of an intercommunicator) has called;
// MPI-ACC's transfers move meanwhile.
int meet_members(MPI_Comm comm) {
    MPI_Request r;
    int rc = PMPI_Ibarrier(comm, &r);
    return rc != MPI_SUCCESS ? rc : wait_mpich_request(&r, MPI_STATUS_IGNORE);
}

}  // namespace

// The constructor `made` after the members have met (before MPI_Init, or on MPI_COMM_NULL,
// MPICH's own call, whose error then names it).
#define MPIACC_CONSTRUCTOR(comm, made)                    \
    do {                                                  \
        if (context().initialized && (comm) != MPI_COMM_NULL) { \
            int rc_ = meet_members(comm);                 \
            if (rc_ != MPI_SUCCESS) return rc_;           \
        }                                                 \
        return made;                                      \
    } while (0)

extern "C" {

// An invalid communicator is left to MPICH's own call, whose error then names it.
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    if (!context().initialized || comm == MPI_COMM_NULL) return PMPI_Comm_dup(comm, newcomm);
    MPI_Request r;
    int rc = PMPI_Comm_idup(comm, newcomm, &r);
    return rc != MPI_SUCCESS ? rc : wait_mpich_request(&r, MPI_STATUS_IGNORE);
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
    if (!context().initialized || comm == MPI_COMM_NULL) return PMPI_Comm_dup_with_info(comm, info, newcomm);
    MPI_Request r;
    int rc = PMPI_Comm_idup_with_info(comm, info, newcomm, &r);
    return rc != MPI_SUCCESS ? rc : wait_mpich_request(&r, MPI_STATUS_IGNORE);
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

int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int sources[], const int degrees[],
                          const int destinations[], const int weights[], MPI_Info info, int reorder,
                          MPI_Comm *comm_dist_graph) {
    MPIACC_CONSTRUCTOR(comm_old, PMPI_Dist_graph_create(comm_old, n, sources, degrees, destinations, weights, info,
                                                        reorder, comm_dist_graph));
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[], const int sourceweights[],
                                   int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm *comm_dist_graph) {
    MPIACC_CONSTRUCTOR(comm_old, PMPI_Dist_graph_create_adjacent(comm_old, indegree, sources, sourceweights,
                                                                 outdegree, destinations, destweights, info, reorder,
                                                                 comm_dist_graph));
}

}  // extern "C"
