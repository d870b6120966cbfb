// Blocking collectives run as their nonblocking form plus MPI-ACC progress, so a rank
// blocked in a collective still answers its peers' CTS and chunks (DESIGN 2.6: Isend(gpu)
// followed by MPI_Barrier must not hang). It has to be every time, not only while this
// rank has transfers in flight: MPI does not match a blocking collective with a
// nonblocking one, and another rank may have chosen differently. MPICH offers no hook
// into its own progress loop (checked: generalized-request poll functions are not called
// from a blocking MPI_Barrier in 4.0.2). Device buffers in collectives are ROADMAP 2.
#include "binding/binding.h"

using namespace mpiacc;

#define MPIACC_COLLECTIVE(blocking_call, nonblocking_call) \
    do {                                                   \
        if (!context().initialized) return blocking_call;  \
        MPI_Request r_;                                    \
        int rc_ = nonblocking_call;                        \
        if (rc_ != MPI_SUCCESS) return rc_;                \
        return wait_mpich_request(&r_, MPI_STATUS_IGNORE); \
    } while (0)

extern "C" {

int MPI_Barrier(MPI_Comm comm) { MPIACC_COLLECTIVE(PMPI_Barrier(comm), PMPI_Ibarrier(comm, &r_)); }

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Bcast(buf, count, type, root, comm), PMPI_Ibcast(buf, count, type, root, comm, &r_));
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm),
                      PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, &r_));
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Allreduce(sbuf, rbuf, count, type, op, comm),
                      PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, &r_));
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
               MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm),
                      PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &r_));
}

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
                MPI_Datatype rtype, int root, MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm),
                      PMPI_Igatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, &r_));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
                MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm),
                      PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &r_));
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm),
                      PMPI_Iscatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, &r_));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm),
                      PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, &r_));
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                   const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm),
                      PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, &r_));
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                 MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm),
                      PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, &r_));
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
                  const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm),
                      PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, &r_));
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm),
                      PMPI_Ireduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, &r_));
}

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Scan(sbuf, rbuf, count, type, op, comm), PMPI_Iscan(sbuf, rbuf, count, type, op, comm, &r_));
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    MPIACC_COLLECTIVE(PMPI_Exscan(sbuf, rbuf, count, type, op, comm),
                      PMPI_Iexscan(sbuf, rbuf, count, type, op, comm, &r_));
}

}  // extern "C"
