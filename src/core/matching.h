// The user's messages (DESIGN.md 2.1-2.2): every user send puts exactly one message on the
// user's communicator, the envelope or the plain payload, and every receive posts one
// receive there. Those always go through MPICH, which does all matching (order,
// wildcards, cancel); the protocol and the host receive records reach MPICH's
// point-to-point only through here. The requests are MPICH's own, since a user may hold
// one as its handle. Inline: they sit on the message-rate path.
#pragma once

#include <mpi.h>

namespace mpiacc {

enum class SendMode { STANDARD, BUFFERED, SYNCHRONOUS, READY };

namespace matching {

// MPICH's nonblocking send of `mode`: MPI_Isend, MPI_Ibsend, MPI_Issend or MPI_Irsend.
inline int post_send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, SendMode mode,
                     MPI_Request *request) {
    switch (mode) {
        case SendMode::BUFFERED: return PMPI_Ibsend(buf, count, type, dest, tag, comm, request);
        case SendMode::SYNCHRONOUS: return PMPI_Issend(buf, count, type, dest, tag, comm, request);
        case SendMode::READY: return PMPI_Irsend(buf, count, type, dest, tag, comm, request);
        default: return PMPI_Isend(buf, count, type, dest, tag, comm, request);
    }
}
inline int post_recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                     MPI_Request *request) {
    return PMPI_Irecv(buf, count, type, source, tag, comm, request);
}
// A blocking receive, for a blocking call with nothing else in flight.
inline int recv_now(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status) {
    return PMPI_Recv(buf, count, type, source, tag, comm, status);
}
// Completes and frees `request` once done (*flag), as MPI_Test does.
inline int test(MPI_Request *request, int *flag, MPI_Status *status) { return PMPI_Test(request, flag, status); }
// Looks at `request` without freeing it: a user's handle stays valid.
inline int peek(MPI_Request request, int *flag, MPI_Status *status) {
    return PMPI_Request_get_status(request, flag, status);
}
inline int wait(MPI_Request *request, MPI_Status *status) { return PMPI_Wait(request, status); }
inline int cancel(MPI_Request *request) { return PMPI_Cancel(request); }
inline int release(MPI_Request *request) { return PMPI_Request_free(request); }
inline bool cancelled(const MPI_Status &status) {
    int flag = 0;
    PMPI_Test_cancelled(&status, &flag);
    return flag != 0;
}

}  // namespace matching
}  // namespace mpiacc
