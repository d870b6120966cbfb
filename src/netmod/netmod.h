// Moving protocol bytes between ranks after the envelope: CTS/FIN control messages and
// data chunks, addressed by world rank and a per-transfer tag (DESIGN.md 2.3). The `mpi`
// netmod uses PMPI on the private communicator and works wherever MPICH does, InfiniBand
// through UCX included. An `ib` netmod (ROADMAP 5) will add one-sided placement: the
// receiver's CTS naming where each chunk lands.
#pragma once

#include <mpi.h>

#include <cstddef>

namespace mpiacc {

class Netmod {
public:
    virtual ~Netmod() = default;
    virtual const char *name() const = 0;
    // Nonblocking byte transfers; `request` completes through test().
    virtual int send_bytes(const void *buf, std::size_t len, int peer, int tag, MPI_Request *request) = 0;
    virtual int recv_bytes(void *buf, std::size_t len, int peer, int tag, MPI_Request *request) = 0;
    // Typed transfers straight between user buffers (direct mode, host to host).
    virtual int send_typed(const void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Request *request) = 0;
    virtual int recv_typed(void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Request *request) = 0;
    // True once `request` completed (and it is then reset). Never blocks.
    virtual bool test(MPI_Request *request) = 0;
    // Abandons a posted transfer (cancel + free).
    virtual void abandon(MPI_Request *request) = 0;
};

// The netmod in use (the `mpi` netmod over the private communicator).
Netmod &netmod();

}  // namespace mpiacc
