#include "pool/shared_memory.h"

#include <dirent.h>
#include <fcntl.h>
#include <mpi.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {

int create_shared_segment(std::size_t bytes, SharedSegment *out, std::string *why) {
    int fd = memfd_create("mpiacc-staging", MFD_CLOEXEC);
    if (fd < 0) {
        *why = format("memfd_create for a shared staging segment failed: %s", std::strerror(errno));
        return MPI_ERR_NO_MEM;
    }
    // posix_fallocate, not ftruncate alone: pages a tmpfs cannot supply would otherwise
    // fault with SIGBUS at first touch, inside a driver's pinning call.
    int rc = ftruncate(fd, static_cast<off_t>(bytes));
    if (rc == 0) rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0 ? 0 : -1;
    struct stat st;
    if (rc == 0) rc = fstat(fd, &st);
    void *base = rc == 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (base == MAP_FAILED) {
        *why = format("reserving %zu bytes of shared staging memory failed: %s", bytes, std::strerror(errno));
        close(fd);
        return MPI_ERR_NO_MEM;
    }
    out->base = base;
    out->bytes = bytes;
    out->fd = fd;
    out->inode = static_cast<std::uint64_t>(st.st_ino);
    return MPI_SUCCESS;
}

void destroy_shared_segment(SharedSegment *segment) {
    if (segment->base) munmap(segment->base, segment->bytes);
    if (segment->fd >= 0) close(segment->fd);
    *segment = SharedSegment{};
}

SharedLocation shared_location(const SharedSegment &segment) {
    SharedLocation loc{};
    loc.fd = segment.fd;
    loc.inode = segment.inode;
    loc.segment_bytes = segment.bytes;
    return loc;
}

namespace {

struct PeerSegment {
    void *base;
    std::size_t bytes;
    std::uint64_t mapping;   // unique over the process's life
    unsigned users = 0;      // copies reading it now
    std::uint64_t last_use;  // of the mapping clock; the least recent goes first
};
using PeerKey = std::tuple<int, int, int, std::uint64_t>;  // owner rank, pid, fd, inode

struct PeerSegments {
    std::map<PeerKey, PeerSegment> by_key;
    std::unordered_map<void *, PeerKey> by_base;
    std::size_t bytes = 0;
    std::uint64_t clock = 0;
    std::uint64_t mappings = 0;  // ids handed out (PeerSegment::mapping)
    std::size_t max_segments = kMaxPeerSegments;
    std::size_t bytes_kept = kPeerSegmentBytesKept;
};

PeerSegments &peers() {
    static PeerSegments segments;
    return segments;
}

struct UnmapHooks {
    std::mutex mutex;
    std::map<int, std::function<void(void *)>> hooks;
    int next = 1;
};

// Never destroyed: accelerators that live in function-local statics remove their hook
// from their destructors, which may run after this file's statics are gone.
UnmapHooks &unmap_hooks() {
    static UnmapHooks *hooks = new UnmapHooks;
    return *hooks;
}

void unmap_peer(PeerSegments &p, std::map<PeerKey, PeerSegment>::iterator it) {
    {
        UnmapHooks &h = unmap_hooks();
        std::lock_guard<std::mutex> lock(h.mutex);
        for (auto &hook : h.hooks) hook.second(it->second.base);
    }
    munmap(it->second.base, it->second.bytes);
    p.bytes -= it->second.bytes;
    p.by_base.erase(it->second.base);
    p.by_key.erase(it);
    MPIACC_COUNT("pool.peer_segments_unmapped");
}

// Makes room for a mapping of `bytes` of the segment `key` names. False when every
// mapping is in use and the count bound is reached.
bool make_room(PeerSegments &p, const PeerKey &key, std::size_t bytes) {
    // The owner's descriptor number now names another file: the segment it named was
    // closed, and no notice will name it again.
    const auto descriptor = [](const PeerKey &k) {
        return std::make_tuple(std::get<0>(k), std::get<1>(k), std::get<2>(k));
    };
    for (auto it = p.by_key.begin(); it != p.by_key.end();) {
        const bool closed = descriptor(it->first) == descriptor(key) && it->first != key;
        if (closed && it->second.users == 0)
            unmap_peer(p, it++);
        else
            ++it;
    }
    while (p.by_key.size() >= p.max_segments || (!p.by_key.empty() && p.bytes + bytes > p.bytes_kept)) {
        auto oldest = p.by_key.end();
        for (auto it = p.by_key.begin(); it != p.by_key.end(); ++it)
            if (it->second.users == 0 && (oldest == p.by_key.end() || it->second.last_use < oldest->second.last_use))
                oldest = it;
        if (oldest == p.by_key.end()) return p.by_key.size() < p.max_segments;
        unmap_peer(p, oldest);
    }
    return true;
}

}  // namespace

void *map_peer_segment(int owner_rank, int pid, const SharedLocation &loc, std::uint64_t *mapping, std::string *why) {
    PeerSegments &p = peers();
    const PeerKey key{owner_rank, pid, loc.fd, loc.inode};
    auto found = p.by_key.find(key);
    if (found != p.by_key.end()) {
        if (found->second.bytes != loc.segment_bytes) {
            *why = "a peer's staging segment changed size";
            return nullptr;
        }
        ++found->second.users;
        found->second.last_use = ++p.clock;
        if (mapping) *mapping = found->second.mapping;
        return found->second.base;
    }
    if (!make_room(p, key, static_cast<std::size_t>(loc.segment_bytes))) {
        *why = format("already %zu peers' staging segments mapped, all in use (the bound)", p.by_key.size());
        return nullptr;
    }
    // The owner's descriptor, through /proc: the same check as reading its memory (same
    // user, ptrace-readable). Its inode tells whether this is the segment meant, not a
    // file of another process that has that PID in this namespace.
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, static_cast<int>(loc.fd));
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        *why = format("opening rank %d's staging segment (%s) failed: %s", owner_rank, path, std::strerror(errno));
        return nullptr;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_ino) != loc.inode ||
        static_cast<std::uint64_t>(st.st_size) < loc.segment_bytes) {
        close(fd);
        *why = format("%s is not rank %d's staging segment (another PID namespace?)", path, owner_rank);
        return nullptr;
    }
    void *base = mmap(nullptr, loc.segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        *why = format("mapping rank %d's staging segment failed: %s", owner_rank, std::strerror(errno));
        return nullptr;
    }
    PeerSegment segment{base, static_cast<std::size_t>(loc.segment_bytes), ++p.mappings, 1, ++p.clock};
    p.by_key.emplace(key, segment);
    p.by_base.emplace(base, key);
    p.bytes += segment.bytes;
    MPIACC_COUNT("pool.peer_segments");
    if (mapping) *mapping = segment.mapping;
    return base;
}

void release_peer_segment(void *base) {
    PeerSegments &p = peers();
    auto key = p.by_base.find(base);
    if (key == p.by_base.end()) return;
    PeerSegment &segment = p.by_key.at(key->second);
    if (segment.users > 0) --segment.users;
}

int add_peer_segment_unmap_hook(std::function<void(void *base)> hook) {
    UnmapHooks &h = unmap_hooks();
    std::lock_guard<std::mutex> lock(h.mutex);
    h.hooks.emplace(h.next, std::move(hook));
    return h.next++;
}

void remove_peer_segment_unmap_hook(int handle) {
    UnmapHooks &h = unmap_hooks();
    std::lock_guard<std::mutex> lock(h.mutex);
    h.hooks.erase(handle);
}

void set_peer_segment_limits(std::size_t max_segments, std::size_t bytes_kept) {
    PeerSegments &p = peers();
    p.max_segments = max_segments ? max_segments : kMaxPeerSegments;
    p.bytes_kept = bytes_kept ? bytes_kept : kPeerSegmentBytesKept;
}

PeerSegmentPins::PeerSegmentPins(Register reg, Unregister unreg, std::atomic<std::int64_t> &pins,
                                 std::atomic<std::int64_t> &unpins)
    : register_(std::move(reg)), unregister_(std::move(unreg)), pins_(pins), unpins_(unpins) {}

bool PeerSegmentPins::pin(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why) {
    auto at = mapping_at_.find(base);
    if (at != mapping_at_.end()) {
        if (at->second == mapping) return true;
        unpin(base);  // an earlier mapping had this address
    }
    if (!register_(base, bytes, why)) return false;
    mapping_at_[base] = mapping;
    pins_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void PeerSegmentPins::unpin(void *base) {
    if (mapping_at_.erase(base) == 0) return;
    unregister_(base);
    unpins_.fetch_add(1, std::memory_order_relaxed);
}

void PeerSegmentPins::unpin_all() {
    while (!mapping_at_.empty()) unpin(mapping_at_.begin()->first);
}

const char *peer_process_unreachable(int owner_rank, int pid, std::uint64_t their_namespace,
                                     std::uint64_t our_namespace) {
    if (their_namespace == 0 || their_namespace != our_namespace) return "is in another PID namespace";
    static std::map<std::pair<int, int>, bool> known;
    auto found = known.find({owner_rank, pid});
    if (found == known.end()) {
        char path[64];
        std::snprintf(path, sizeof path, "/proc/%d/fd", pid);
        DIR *dir = opendir(path);
        if (dir) closedir(dir);
        found = known.emplace(std::make_pair(owner_rank, pid), dir != nullptr).first;
    }
    return found->second ? nullptr : "has descriptors this process cannot open";
}

void unmap_peer_segments() {
    PeerSegments &p = peers();
    for (auto &kv : p.by_key) munmap(kv.second.base, kv.second.bytes);
    p.by_key.clear();
    p.by_base.clear();
    p.bytes = 0;
}

std::size_t peer_segments_mapped() { return peers().by_key.size(); }

}  // namespace mpiacc
