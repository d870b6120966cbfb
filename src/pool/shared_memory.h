// Host memory that another process on this node can map: the staging segments of a
// shared pool (memfd), and the cache of peers' segments mapped here. A pipeline between
// two ranks of one node then moves each chunk with two DMAs, the sender's device-to-host
// copy into its slot and the receiver's host-to-device copy out of the same slot, and no
// CPU copy between them (MPICH's transport makes one; on the H200 machine it held the
// staged path near MPICH's own host-to-host bandwidth, 5-9 GB/s).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mpiacc {

// A segment this process made: memfd-backed, its pages reserved up front (a shortage is
// an error here, not a SIGBUS later) and mapped shared.
struct SharedSegment {
    void *base = nullptr;
    std::size_t bytes = 0;
    int fd = -1;
    std::uint64_t inode = 0;  // tells the segment from another that reuses its fd number
};
// Returns MPI_SUCCESS, or an MPI error class with *why.
int create_shared_segment(std::size_t bytes, SharedSegment *out, std::string *why);
void destroy_shared_segment(SharedSegment *segment);

// Where a slot of a shared segment is, as the owner's pipeline tells its peer. Fixed
// layout: it travels in a chunk notice.
struct SharedLocation {
    std::int32_t fd;
    std::uint32_t reserved;
    std::uint64_t inode;
    std::uint64_t segment_bytes;
    std::uint64_t offset;  // of the slot within the segment
};
static_assert(sizeof(SharedLocation) == 32, "SharedLocation is part of the wire format");

// Maps the segment `loc` names, owned by process `pid` of this node (world rank
// `owner_rank`), into this process, or finds it mapped already; returns its base. Null
// with *why when it cannot be opened (another PID namespace, no permission) or is not the
// segment named (inode). Mappings are kept until unmap_peer_segments, at most
// kMaxPeerSegments of them. Callers hold the StateLock.
void *map_peer_segment(int owner_rank, int pid, const SharedLocation &loc, std::string *why);
constexpr std::size_t kMaxPeerSegments = 1024;
// Whether this process may open process `pid`'s descriptors (the same test the kernel
// makes for each segment): asked once per (rank, pid).
bool peer_segments_reachable(int owner_rank, int pid);
// MPI_Finalize, once nothing can copy from them any more (after the accelerators have let
// go of their registrations).
void unmap_peer_segments();
std::size_t peer_segments_mapped();

}  // namespace mpiacc
