#include "pool/pinned_pool.h"

#include <hwloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "util/error.h"

namespace mpiacc {

StagingBuffer::StagingBuffer(PinnedPool *pool, std::size_t bytes) {
    if (pool && bytes <= pool->slot_size()) slot_ = pool->acquire();
    if (slot_)
        pool_ = pool;
    else
        heap_.resize(bytes ? bytes : 1);
}

StagingBuffer &StagingBuffer::operator=(StagingBuffer &&other) noexcept {
    if (this != &other) {
        reset();
        pool_ = other.pool_;
        slot_ = other.slot_;
        heap_ = std::move(other.heap_);
        other.pool_ = nullptr;
        other.slot_ = nullptr;
        other.heap_.clear();
    }
    return *this;
}

void StagingBuffer::reset() {
    if (slot_) pool_->release(slot_);
    slot_ = nullptr;
    pool_ = nullptr;
    std::vector<char>().swap(heap_);
}

namespace {
constexpr std::size_t kHugePage = 2u << 20;
}

void *map_staging_memory(std::size_t bytes, std::size_t *mapped_bytes, std::string *why) {
    const std::size_t len = (std::max<std::size_t>(bytes, 1) + kHugePage - 1) / kHugePage * kHugePage;
    // One huge page more than asked, so that an aligned run of `len` lies inside; the
    // ends outside it go back at once.
    void *raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        *why = format("mmap(%zu bytes) for staging memory: %s", len + kHugePage, std::strerror(errno));
        return nullptr;
    }
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    const std::uintptr_t tail = aligned + len, end = start + len + kHugePage;
    if (end > tail) munmap(reinterpret_cast<void *>(tail), end - tail);
    void *p = reinterpret_cast<void *>(aligned);
    // Advice only: without THP the memory still works, in 4 KiB pages.
    madvise(p, len, MADV_HUGEPAGE);
    madvise(p, len, MADV_DONTFORK);
    *mapped_bytes = len;
    return p;
}

void unmap_staging_memory(void *p, std::size_t mapped_bytes) {
    if (p) munmap(p, mapped_bytes);
}

PinnedPool::PinnedPool(std::unique_ptr<PinnedAllocator> allocator, std::size_t slot_size, std::size_t capacity_bytes,
                       std::size_t segment_bytes)
    : allocator_(std::move(allocator)), slot_size_(slot_size) {
    // At least two slots: one chunk can be in the network while the next is copied.
    max_slots_ = std::max<std::size_t>(2, capacity_bytes / slot_size_);
    slots_per_segment_ = std::max<std::size_t>(1, segment_bytes / slot_size_);
}

namespace {
void (*segment_release_hook)(void *base) = nullptr;
}  // namespace

void set_segment_release_hook(void (*hook)(void *base)) { segment_release_hook = hook; }

PinnedPool::~PinnedPool() {
    for (void *s : segments_) {
        if (segment_release_hook) segment_release_hook(s);
        allocator_->release(s);
    }
}

bool PinnedPool::grow() {
    if (carved_ >= max_slots_) return false;
    std::size_t n = std::min(slots_per_segment_, max_slots_ - carved_);
    void *seg = allocator_->allocate(n * slot_size_, &last_error_);
    if (!seg) return false;
    segments_.push_back(seg);
    segment_bytes_.push_back(n * slot_size_);
    for (std::size_t i = 0; i < n; ++i) free_.push_back(static_cast<char *>(seg) + i * slot_size_);
    carved_ += n;
    return true;
}

void *PinnedPool::acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty() && !grow()) {
        ++exhausted_;
        return nullptr;
    }
    void *slot = free_.back();
    free_.pop_back();
    ++in_use_;
    return slot;
}

void PinnedPool::release(void *slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(slot);
    --in_use_;
}

std::size_t PinnedPool::slots_in_use() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return in_use_;
}

std::size_t PinnedPool::allocations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return segments_.size();
}

bool PinnedPool::shared() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!allocator_->shares()) return false;
    if (segments_.empty() && !grow()) return false;
    return allocator_->shares();
}

bool PinnedPool::locate_shared(const void *slot, SharedLocation *out) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const char *p = static_cast<const char *>(slot);
    for (std::size_t i = 0; i < segments_.size(); ++i) {
        const char *seg = static_cast<const char *>(segments_[i]);
        if (p < seg || p >= seg + segment_bytes_[i]) continue;
        if (!allocator_->shared_identity(seg, out)) return false;
        out->offset = static_cast<std::uint64_t>(p - seg);
        return true;
    }
    return false;
}

bool PinnedPool::segment_of(const void *slot, void **base, std::size_t *bytes) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const char *p = static_cast<const char *>(slot);
    for (std::size_t i = 0; i < segments_.size(); ++i) {
        char *seg = static_cast<char *>(segments_[i]);
        if (p < seg || p >= seg + segment_bytes_[i]) continue;
        *base = seg;
        *bytes = segment_bytes_[i];
        return true;
    }
    return false;
}

std::size_t PinnedPool::exhausted_count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return exhausted_;
}

namespace {

// Loading a topology with I/O devices takes tens of milliseconds; it is read-only once
// loaded, so one copy serves every allocation of the process.
hwloc_topology_t shared_topology() {
    static std::once_flag once;
    static hwloc_topology_t topo = nullptr;
    std::call_once(once, [] {
        hwloc_topology_t t;
        if (hwloc_topology_init(&t) != 0) return;
        hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
        if (hwloc_topology_load(t) != 0) {
            hwloc_topology_destroy(t);
            return;
        }
        topo = t;
    });
    return topo;
}

}  // namespace

NumaAllocationScope::NumaAllocationScope(const std::string &pci_bus_id) {
    hwloc_topology_t topo = shared_topology();
    if (!topo) return;
    topology_ = topo;
    if (hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) < 2) return;  // nothing to choose

    hwloc_nodeset_t want = hwloc_bitmap_alloc();
    unsigned dom = 0, bus = 0, dev = 0, func = 0;
    hwloc_obj_t pci = nullptr;
    if (!pci_bus_id.empty() && std::sscanf(pci_bus_id.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &func) == 4)
        pci = hwloc_get_pcidev_by_busid(topo, dom, bus, dev, func);
    if (pci) {
        hwloc_obj_t host = hwloc_get_non_io_ancestor_obj(topo, pci);
        if (host && host->nodeset) hwloc_bitmap_copy(want, host->nodeset);
    } else {
        hwloc_cpuset_t cpus = hwloc_bitmap_alloc();
        if (hwloc_get_cpubind(topo, cpus, HWLOC_CPUBIND_PROCESS) == 0) hwloc_cpuset_to_nodeset(topo, cpus, want);
        hwloc_bitmap_free(cpus);
    }
    if (!hwloc_bitmap_iszero(want)) {
        hwloc_nodeset_t saved = hwloc_bitmap_alloc();
        hwloc_membind_policy_t policy;
        if (hwloc_get_membind(topo, saved, &policy, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) == 0 &&
            hwloc_set_membind(topo, want, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) == 0) {
            saved_nodeset_ = saved;
            saved_policy_ = policy;
            bound_ = true;
            node_ = hwloc_bitmap_first(want);
        } else {
            hwloc_bitmap_free(saved);
        }
    }
    hwloc_bitmap_free(want);
}

NumaAllocationScope::~NumaAllocationScope() {
    auto topo = static_cast<hwloc_topology_t>(topology_);
    if (bound_) {
        auto saved = static_cast<hwloc_nodeset_t>(saved_nodeset_);
        hwloc_set_membind(topo, saved, static_cast<hwloc_membind_policy_t>(saved_policy_),
                          HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET);
        hwloc_bitmap_free(saved);
    }
}

}  // namespace mpiacc
