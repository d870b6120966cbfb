#include "accel/cuda/memtype_cache.h"

#include <algorithm>

namespace mpiacc {

namespace {

constexpr std::size_t kProbe = KnownHostGranules::kProbe;

std::uintptr_t as_addr(const void *p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

MemtypeCache::MemtypeCache(PointerQuery query, std::size_t host_slots, std::size_t max_device_ranges)
    : query_(std::move(query)), max_device_ranges_(std::max<std::size_t>(1, max_device_ranges)) {
    std::size_t n = 8;
    unsigned bits = 3;
    while (n < host_slots) {
        n <<= 1;
        ++bits;
    }
    host_slots_ = std::make_unique<std::atomic<std::uintptr_t>[]>(n);
    for (std::size_t i = 0; i < n; ++i) host_slots_[i].store(0, std::memory_order_relaxed);
    known_host_.slots = host_slots_.get();
    known_host_.mask = n - 1;
    known_host_.hash_shift = 64 - bits;
}

void MemtypeCache::remember_host(std::uintptr_t granule) {
    const std::uintptr_t key = granule + 1;
    const std::size_t h = known_host_.home(granule);
    for (std::size_t i = 0; i < kProbe; ++i) {
        auto &slot = host_slots_[(h + i) & known_host_.mask];
        std::uintptr_t v = slot.load(std::memory_order_relaxed);
        if (v == key) return;
        if (v == 0) {
            slot.store(key, std::memory_order_relaxed);
            return;
        }
    }
    // Window full: overwrite in turn, so a bounded table never refuses a new hot buffer.
    host_slots_[(h + (next_victim_++ % kProbe)) & known_host_.mask].store(key, std::memory_order_relaxed);
}

void MemtypeCache::drop_host_granules(std::uintptr_t first, std::uintptr_t last) {
    const std::size_t count = last - first + 1;
    if (count <= (known_host_.mask + 1) / kProbe) {
        for (std::uintptr_t g = first; g <= last; ++g) {
            const std::size_t h = known_host_.home(g);
            for (std::size_t i = 0; i < kProbe; ++i) {
                auto &slot = host_slots_[(h + i) & known_host_.mask];
                if (slot.load(std::memory_order_relaxed) == g + 1) slot.store(0, std::memory_order_relaxed);
            }
        }
        return;
    }
    for (std::size_t i = 0; i <= known_host_.mask; ++i) {
        std::uintptr_t v = host_slots_[i].load(std::memory_order_relaxed);
        if (v != 0 && v - 1 >= first && v - 1 <= last) host_slots_[i].store(0, std::memory_order_relaxed);
    }
}

std::map<std::uintptr_t, PointerInfo>::iterator MemtypeCache::find_device(std::uintptr_t addr) {
    auto it = device_.upper_bound(addr);
    if (it == device_.begin()) return device_.end();
    --it;
    return it->second.contains(addr) ? it : device_.end();
}

void MemtypeCache::remember_device(const PointerInfo &info) {
    const std::uintptr_t end = info.base + info.size;
    // Allocations never overlap, so whatever the new range overlaps was freed.
    auto it = device_.lower_bound(info.base);
    if (it != device_.begin()) {
        auto prev = std::prev(it);
        if (prev->second.base + prev->second.size > info.base) it = prev;
    }
    while (it != device_.end() && it->first < end) it = device_.erase(it);
    // Programs keep few live allocations; running past the bound means many were freed
    // unseen, so start over rather than keep an eviction order on the hot path.
    if (device_.size() >= max_device_ranges_) device_.clear();
    device_.emplace(info.base, info);
    drop_host_granules(info.base >> kGranuleShift, (end - 1) >> kGranuleShift);
}

bool MemtypeCache::query_and_remember(const void *addr, PointerInfo *info, std::string *why,
                                      bool remember_host_answer) {
    queries_.fetch_add(1, std::memory_order_relaxed);
    PointerInfo fresh;
    if (!query_.query(addr, &fresh, why)) return false;
    if (fresh.is_cuda()) {
        // A range the driver could not bound is answered but not cached.
        if (fresh.size != 0 && fresh.contains(as_addr(addr))) remember_device(fresh);
    } else if (remember_host_answer && fresh.kind == MemoryKind::HOST) {
        // Only pageable memory is remembered as host. Pinned memory lives in the driver's
        // own address range, which cudaMalloc reuses once it is freed (seen on the H200
        // machine: a cudaMallocHost buffer freed, then a cudaMalloc at the same address).
        remember_host(as_addr(addr) >> kGranuleShift);
    }
    *info = fresh;
    return true;
}

bool MemtypeCache::is_cuda(const void *addr, PointerInfo *info) {
    const std::uintptr_t a = as_addr(addr);
    if (known_host_.contains_granule(a >> kGranuleShift)) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = find_device(a);
    if (it != device_.end()) {
        device_hits_.fetch_add(1, std::memory_order_relaxed);
        *info = it->second;
        return true;
    }
    PointerInfo fresh;
    std::string why;
    // A failed query reads as host: autodetection must never turn a host send into an
    // error; an explicitly tagged buffer goes through resolve() and reports it.
    if (!query_and_remember(addr, &fresh, &why, true) || !fresh.is_cuda()) return false;
    *info = fresh;
    return true;
}

bool MemtypeCache::resolve(const void *addr, PointerInfo *info, PointerInfo *stale, std::string *why) {
    const std::uintptr_t a = as_addr(addr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = find_device(a);
    // A buffer tagged as device memory that is not (typically freed) must not be
    // remembered as host: the driver may hand the address out again (found on the GPU
    // suite's fake runtime: a later cudaMalloc at that address read as host).
    if (it == device_.end()) return query_and_remember(addr, info, why, false);

    const PointerInfo cached = it->second;
    std::uint64_t id = 0;
    if (query_.buffer_id && query_.buffer_id(addr, &id) && id == cached.buffer_id) {
        device_hits_.fetch_add(1, std::memory_order_relaxed);
        *info = cached;
        return true;
    }
    // Freed, reallocated, or no cheap recheck available: a full query decides.
    device_.erase(it);
    if (!query_and_remember(addr, info, why, false)) return false;
    if (stale && !(info->is_cuda() && info->buffer_id == cached.buffer_id && info->base == cached.base))
        *stale = cached;
    return true;
}

void MemtypeCache::forget(const void *addr, std::size_t len) {
    if (len == 0) return;
    const std::uintptr_t a = as_addr(addr);
    const std::uintptr_t end = a + len;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = device_.lower_bound(a);
    if (it != device_.begin()) {
        auto prev = std::prev(it);
        if (prev->second.base + prev->second.size > a) it = prev;
    }
    while (it != device_.end() && it->first < end) it = device_.erase(it);
    drop_host_granules(a >> kGranuleShift, (end - 1) >> kGranuleShift);
}

void MemtypeCache::clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    device_.clear();
    for (std::size_t i = 0; i <= known_host_.mask; ++i) host_slots_[i].store(0, std::memory_order_relaxed);
}

std::size_t MemtypeCache::device_ranges() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return device_.size();
}

}  // namespace mpiacc
