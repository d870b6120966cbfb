// Blocking collectives on CUDA buffers by MPI-ACC's own algorithms: the data moves over
// MPI-ACC's point-to-point paths (an IPC pull inside a node, the pipeline between nodes)
// and is reduced by the GPU's kernels, where staging through host memory would take two
// copies across PCIe and a reduction on the CPU. Ranks that all work on one GPU leave
// every copy and reduction to one leader that maps their buffers (one_gpu.h). Ranks
// with GPUs of their own hand NCCL what it has (nccl.h), and otherwise send over the
// point-to-point paths: Allreduce as a reduce-scatter plus an allgather, Bcast down a
// binomial tree, Allgather and Reduce_scatter_block each block straight to its owner.
//
// Every rank of a communicator must take the same path, and a rank cannot see the
// others' buffers. So such a collective begins, on every rank alike, with a small
// agreement (an allreduce of six integers) on the communicator: MPI-ACC's algorithms run
// only when every rank's buffers are CUDA memory of a type they take, and the call is at
// least the minimum for where the buffers are (one GPU, or GPUs of their own); otherwise
// all stage (staged.h). Which calls ask is decided from what every rank knows alike: the
// bytes of the call and where the last agreement on that communicator found the buffers.
// The agreement is paid only where some rank of MPI_COMM_WORLD has a CUDA device
// (Context::device_collectives). The algorithms' own messages go over a private
// duplicate of the communicator.
//
// Each function returns false when the call is not for it (below the size, not a
// blocking intracommunicator call of a shape it takes, or a rank said no): the caller
// then goes on as if it had not been called. True means the collective ran, and *rc is
// its outcome, already given to the communicator's error handler.
#pragma once

#include <mpi.h>

#include <cstddef>

namespace mpiacc {

bool device_allreduce(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                      const char *call, int *rc);
bool device_bcast(void *buffer, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm, const char *call, int *rc);
bool device_allgather(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                      MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, const char *call, int *rc);
bool device_reduce_scatter_block(const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype type, MPI_Op op,
                                 MPI_Comm comm, const char *call, int *rc);

// Frees the device scratch the algorithms kept (MPI_Finalize, before the accelerators
// shut down).
void release_device_scratch();

}  // namespace mpiacc
