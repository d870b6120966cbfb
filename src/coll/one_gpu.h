// Collectives whose ranks all work on one GPU of one node (device_algorithms.h finds it
// in the agreement). Without MPS the GPU runs one process's context at a time, and work
// of two processes close together costs a switch between their contexts: on one H100 a
// 2-rank exchange in which both ranks copied took 340 us at any size, where a single
// pull took 20 us (docs/performance.md, "Device collectives"). So one rank, the leader,
// maps every other rank's buffers (CUDA IPC) and makes every copy and reduction in its
// own context; the others only hand it their buffers and wait for its word.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>

#include "accel/accel.h"

namespace mpiacc {

// One buffer argument as this rank hands it over: captured, and exported for the
// leader's mapping where this rank is not the leader.
struct OneGpuRegion {
    std::unique_ptr<DeviceBuffer> buffer;  // null: no bytes here
    IpcExport handle{};
    std::size_t bytes = 0;
    // `attrs`: what classify_buffer found for `buf` (CUDA memory). MPI_SUCCESS, or an
    // error class with *why: then the call stages (the agreement hears of it), so the
    // message is not shown.
    int capture(const void *buf, BufferAttrs attrs, std::size_t bytes, bool exported, std::string *why);
};

// A rank's arguments: slot 0 the send buffer (absent in place), slot 1 the receive
// buffer.
struct OneGpuArgs {
    OneGpuRegion region[2];
};

// The collectives, called on every rank of `priv` (the private duplicate) once the
// agreement chose this path. `leader` is rank 0, or the root of a Bcast. Each returns the
// leader's outcome on every rank: a peer's buffers are written only by the leader.
int one_gpu_allreduce(OneGpuArgs &args, MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm priv, int me, int p,
                      std::string *why);
int one_gpu_bcast(OneGpuArgs &args, int root, MPI_Comm priv, int me, int p, std::string *why);
int one_gpu_allgather(OneGpuArgs &args, bool in_place, MPI_Comm priv, int me, int p, std::string *why);
// `scratch`: device memory of the leader's for the whole reduced vector (send bytes).
int one_gpu_reduce_scatter_block(OneGpuArgs &args, MPI_Count recvcount, MPI_Datatype type, MPI_Op op, char *scratch,
                                 MPI_Comm priv, int me, int p, std::string *why);

}  // namespace mpiacc
