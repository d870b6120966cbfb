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
#include <tuple>
#include <utility>

#include "core/counters.h"
#include "core/error.h"

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

namespace {

struct PeerSegment {
    void *base;
    std::size_t bytes;
};
using PeerKey = std::tuple<int, int, int, std::uint64_t>;  // owner rank, pid, fd, inode

std::map<PeerKey, PeerSegment> &peer_segments() {
    static std::map<PeerKey, PeerSegment> segments;
    return segments;
}

}  // namespace

void *map_peer_segment(int owner_rank, int pid, const SharedLocation &loc, std::string *why) {
    auto &segments = peer_segments();
    const PeerKey key{owner_rank, pid, loc.fd, loc.inode};
    auto found = segments.find(key);
    if (found != segments.end()) {
        if (found->second.bytes != loc.segment_bytes) {
            *why = "a peer's staging segment changed size";
            return nullptr;
        }
        return found->second.base;
    }
    if (segments.size() >= kMaxPeerSegments) {
        *why = format("already %zu peers' staging segments mapped (the bound)", segments.size());
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
    segments.emplace(key, PeerSegment{base, static_cast<std::size_t>(loc.segment_bytes)});
    MPIACC_COUNT("pool.peer_segments");
    return base;
}

bool peer_segments_reachable(int owner_rank, int pid) {
    static std::map<std::pair<int, int>, bool> known;
    auto found = known.find({owner_rank, pid});
    if (found != known.end()) return found->second;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *dir = opendir(path);
    if (dir) closedir(dir);
    known[{owner_rank, pid}] = dir != nullptr;
    return dir != nullptr;
}

void unmap_peer_segments() {
    for (auto &kv : peer_segments()) munmap(kv.second.base, kv.second.bytes);
    peer_segments().clear();
}

std::size_t peer_segments_mapped() { return peer_segments().size(); }

}  // namespace mpiacc
