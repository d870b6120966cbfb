// Host memory that another process on this node can map: the staging segments of a
// shared pool (memfd), and the cache of peers' segments mapped here. A pipeline between
// two ranks of one node then moves each chunk with two DMAs, the sender's device-to-host
// copy into its slot and the receiver's host-to-device copy out of the same slot, and no
// CPU copy between them (MPICH's transport makes one, which held the staged path near
// MPICH's own host-to-host bandwidth: docs/performance.md, 'Shared staging').
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
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
// Where `segment` is, from its start (offset 0).
SharedLocation shared_location(const SharedSegment &segment);

// Maps the segment `loc` names, owned by process `pid` of this node (world rank
// `owner_rank`), into this process, or finds it mapped already, and counts one use of it
// (a copy that reads it) until release_peer_segment(base). Returns its base, and in
// *mapping an id no other mapping of this process's life has: a device registration of
// an earlier mapping that happened to get the same address is told apart by it. Null
// with *why when it cannot be opened (another PID namespace, no permission) or is not
// the segment named (inode). Callers hold the StateLock.
//
// Mappings no copy uses are kept for the next chunk, but not forever: an owner that
// destroys a segment (its cache entry was evicted, or the cache is off) cannot say so,
// and each mapping keeps its pages alive. One is unmapped when its owner's descriptor
// turns out to name another file now (the segment was closed and the number reused),
// and least recently used ones go when more than kPeerSegmentBytesKept bytes or
// kMaxPeerSegments mappings would be held. Only the count bound refuses, when every
// mapping is in use.
void *map_peer_segment(int owner_rank, int pid, const SharedLocation &loc, std::uint64_t *mapping, std::string *why);
void release_peer_segment(void *base);
constexpr std::size_t kMaxPeerSegments = 1024;
constexpr std::size_t kPeerSegmentBytesKept = std::size_t{1} << 30;
// Runs, with the base, just before a mapping is unmapped to make room, so that a device
// registration of it (an OpenCL buffer over it) goes first. Returns a handle for
// remove_peer_segment_unmap_hook.
int add_peer_segment_unmap_hook(std::function<void(void *base)> hook);
void remove_peer_segment_unmap_hook(int handle);
// Tests: other bounds than the two above (0 restores them).
void set_peer_segment_limits(std::size_t max_segments, std::size_t bytes_kept);

// One device kind's registrations of peers' segments mapped here (what lets its DMA read
// them), at most one per base address, each remembered with the mapping it was made for:
// a registration left from an earlier mapping at the same address, whose pages are gone,
// is replaced rather than reused. The kind supplies its register and unregister calls
// and its two counters; callers serialise (the kind's own lock).
class PeerSegmentPins {
public:
    using Register = std::function<bool(void *base, std::size_t bytes, std::string *why)>;
    using Unregister = std::function<void(void *base)>;
    PeerSegmentPins(Register reg, Unregister unreg, std::atomic<std::int64_t> &pins, std::atomic<std::int64_t> &unpins);
    // [base, base + bytes) registered for `mapping`: already, or now. False with *why.
    bool pin(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why);
    // Drops the registration at `base`, if any (its mapping is about to be unmapped).
    void unpin(void *base);
    // Drops them all (the kind shuts down before the mappings go).
    void unpin_all();

private:
    Register register_;
    Unregister unregister_;
    std::atomic<std::int64_t> &pins_;
    std::atomic<std::int64_t> &unpins_;
    std::map<void *, std::uint64_t> mapping_at_;  // base -> the mapping registered there
};
// Why this process may not open the descriptors of process `pid` (world rank
// `owner_rank`), in PID namespace `their_namespace` (0: unknown) where ours is
// `our_namespace` (a pid names the same process only within one namespace), as the end
// of a sentence about that rank; null when it may. The kernel's own test for each segment
// (may /proc/PID/fd be opened) is asked once per (rank, pid).
const char *peer_process_unreachable(int owner_rank, int pid, std::uint64_t their_namespace,
                                     std::uint64_t our_namespace);
// MPI_Finalize, once nothing can copy from them any more (after the accelerators have let
// go of their registrations).
void unmap_peer_segments();
std::size_t peer_segments_mapped();

}  // namespace mpiacc
