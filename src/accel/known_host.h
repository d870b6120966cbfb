// Host memory that pointer autodetection has already ruled out, as a view the bindings
// probe inline. The table belongs to the CUDA memory-kind cache (memtype_cache.h), which
// writes it under its own lock; this view only reads, without one. The bindings keep a
// copy in the Context so that a host send or receive with autodetection on answers "host"
// without asking the accelerator: through Accel::owns_pointer the answer took a virtual
// call, two more calls and a PointerInfo, several times the cost of this inline read
// (docs/performance.md, "Host fast path and idle receives"). It is read one tail call
// after the entry points, in buffer_is_plain_host, so that calls with autodetection off
// pay nothing for it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace mpiacc {

// Stands in for a table until there is one: its only slot is empty, so nothing is known.
inline const std::atomic<std::uintptr_t> kNoKnownHostSlots[1] = {};

struct KnownHostGranules {
    // 64 KiB: host allocators and the CUDA driver never share a granule (the driver
    // reserves device VA in 2 MiB-aligned chunks), and one granule covers a typical
    // small-message buffer and its neighbours.
    static constexpr unsigned kGranuleShift = 16;
    // Slots probed per granule: short enough that a miss costs a few loads, long enough
    // that a handful of colliding hot buffers do not evict each other.
    static constexpr std::size_t kProbe = 4;

    // Open addressing; a slot holds granule+1, 0 when empty. Slots `mask`+1 (a power of two).
    const std::atomic<std::uintptr_t> *slots = kNoKnownHostSlots;
    std::size_t mask = 0;
    unsigned hash_shift = 63;  // 64 - log2(slots)

    static std::uintptr_t granule_of(const void *p) { return reinterpret_cast<std::uintptr_t>(p) >> kGranuleShift; }

    // First slot to probe for `granule`. Fibonacci hashing: neighbouring granules (one
    // large buffer, a stack) land far apart.
    std::size_t home(std::uintptr_t granule) const {
        return static_cast<std::size_t>((static_cast<std::uint64_t>(granule) * 0x9E3779B97F4A7C15ull) >> hash_shift);
    }

    bool contains_granule(std::uintptr_t granule) const {
        const std::uintptr_t key = granule + 1;
        const std::size_t h = home(granule);
        for (std::size_t i = 0; i < kProbe; ++i)
            if (slots[(h + i) & mask].load(std::memory_order_relaxed) == key) return true;
        return false;
    }

    // True only for memory known to be host memory; false says nothing.
    bool contains(const void *p) const { return contains_granule(granule_of(p)); }
};

}  // namespace mpiacc
