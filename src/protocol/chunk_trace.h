// MPIACC_VERBOSE=3: when each pipeline chunk reached each stage, on both sides, printed
// at MPI_Finalize. The question it answers is where a staged transfer waits: a device
// copy, the network send, or a slot. Times are CLOCK_MONOTONIC, which the processes of one
// host share, so two ranks' lines merge into one timeline (sort -n on the time column).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/context.h"

namespace mpiacc {

// For the two CTS events the chunk field is the transfer's number of chunks.
enum class ChunkEvent : std::uint8_t {
    CTS_SENT,         // receiver: CTS sent (pipeline mode; its first receives are posted)
    CTS_SEEN,         // sender: CTS seen, the pipeline starts
    SEND_COPY_START,  // sender: device-to-host copy into a slot enqueued
    SEND_COPY_DONE,   // sender: that copy seen complete
    SEND_POST,        // sender: the chunk's network send posted
    SEND_DONE,        // sender: that send seen complete (its slot is free)
    RECV_POST,        // receiver: the chunk's network receive posted
    RECV_DONE,        // receiver: that receive seen complete (host-to-device copy enqueued)
    RECV_COPY_DONE,   // receiver: the host-to-device copy seen complete (slot free)
};

void record_chunk_event(ChunkEvent e, std::uint64_t transfer, std::size_t chunk);

inline void trace_chunk(ChunkEvent e, std::uint64_t transfer, std::size_t chunk) {
    if (context().knobs.verbose >= 3) record_chunk_event(e, transfer, chunk);
}

// Prints what was recorded to stderr and forgets it (MPI_Finalize).
void print_chunk_trace();

}  // namespace mpiacc
