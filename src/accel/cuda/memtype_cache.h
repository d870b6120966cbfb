// Which memory an address belongs to, remembered so that pointer autodetection costs
// almost nothing for host buffers (DESIGN.md: with autodetection on, host messages stay
// within 10% of plain MPICH's latency, a budget one driver query a message would nearly
// use up: docs/performance.md, 'CUDA driver call costs'). UCX's memtype cache
// (ucs/memory/memtype_cache.c) is the model: an interval map of known device
// allocations, plus, unlike UCX (which hooks munmap), a bounded negative cache of host
// granules that the hot path reads without a lock.
//
// Nothing here names CUDA: the driver is reached through the injected PointerQuery, so
// the data structure is unit-tested without a GPU.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "accel/known_host.h"

namespace mpiacc {

enum class MemoryKind : std::uint8_t {
    HOST,         // pageable host memory, unknown to the driver
    HOST_PINNED,  // cudaMallocHost / cudaHostRegister: still host memory for MPI-ACC
    DEVICE,       // device memory (cudaMalloc and friends)
    MANAGED,      // cudaMallocManaged: counts as CUDA memory
};

// What the driver said about one address.
struct PointerInfo {
    MemoryKind kind = MemoryKind::HOST;
    int ordinal = -1;             // device of the allocation (DEVICE, MANAGED)
    std::uintptr_t base = 0;      // allocation start; 0 with size 0 when unknown
    std::size_t size = 0;         // allocation length in bytes
    std::uint64_t buffer_id = 0;  // process-unique allocation identity (0 when unknown)

    bool is_cuda() const { return kind == MemoryKind::DEVICE || kind == MemoryKind::MANAGED; }
    bool contains(std::uintptr_t addr) const { return addr >= base && addr - base < size; }
};

// The driver calls the cache is built on; CudaAccel supplies real ones, tests fakes.
struct PointerQuery {
    // Full query of `addr`. False when the query itself failed (*why says why); the
    // answer is then not cached.
    std::function<bool(const void *addr, PointerInfo *info, std::string *why)> query;
    // The buffer id of the live allocation holding `addr`, false when there is none
    // (freed). Cheaper than `query`; used to recheck a cached device range. May be empty,
    // in which case a recheck is a full query.
    std::function<bool(const void *addr, std::uint64_t *buffer_id)> buffer_id;
};

class MemtypeCache {
public:
    static constexpr unsigned kGranuleShift = KnownHostGranules::kGranuleShift;
    static constexpr std::size_t kDefaultHostSlots = 4096;     // 256 MiB of host VA covered
    static constexpr std::size_t kDefaultDeviceRanges = 4096;  // live device allocations

    // `host_slots` is rounded up to a power of two (at least 8).
    explicit MemtypeCache(PointerQuery query, std::size_t host_slots = kDefaultHostSlots,
                          std::size_t max_device_ranges = kDefaultDeviceRanges);
    MemtypeCache(const MemtypeCache &) = delete;
    MemtypeCache &operator=(const MemtypeCache &) = delete;

    // The hot path (every host send/receive with autodetection on). True when `addr` is
    // CUDA memory (device or managed), with *info filled. A known host granule answers
    // without a lock or a driver call; a known device range answers under the mutex;
    // anything else is queried once and remembered.
    bool is_cuda(const void *addr, PointerInfo *info);

    // The capture path: an answer checked against the driver now. A cached device range
    // is trusted only if the allocation at `addr` still has the cached buffer id;
    // otherwise (freed, or freed and the range reused) the range is dropped, copied to
    // *stale when stale is non-null (so the caller can say "freed"), and `addr` is
    // queried afresh. False when the driver query failed (*why set).
    bool resolve(const void *addr, PointerInfo *info, PointerInfo *stale, std::string *why);

    // Drop whatever is cached about [addr, addr+len): device ranges overlapping it and host
    // granules inside it.
    void forget(const void *addr, std::size_t len);
    void clear();

    // For tests and counters.
    std::uint64_t queries() const { return queries_.load(std::memory_order_relaxed); }
    std::uint64_t device_hits() const { return device_hits_.load(std::memory_order_relaxed); }
    std::size_t device_ranges() const;
    std::size_t host_slots() const { return known_host_.mask + 1; }

    // The host granule table as a lock-free view, valid as long as this cache: it is what
    // is_cuda() reads first, and what the bindings read inline (known_host.h).
    const KnownHostGranules &known_host() const { return known_host_; }

private:
    // The following need mutex_ held.
    bool query_and_remember(const void *addr, PointerInfo *info, std::string *why, bool remember_host_answer);
    void remember_host(std::uintptr_t granule);
    void remember_device(const PointerInfo &info);
    void drop_host_granules(std::uintptr_t first, std::uintptr_t last);
    std::map<std::uintptr_t, PointerInfo>::iterator find_device(std::uintptr_t addr);

    PointerQuery query_;
    std::size_t max_device_ranges_;

    // Host granules, open addressing: each slot holds granule+1 (0 = empty). Readers only
    // load; writers hold mutex_. A stale read is harmless: a slot holds either a granule
    // that was host when stored, or nothing.
    //
    // The one staleness risk: a host granule is cached, the program unmaps that host
    // memory, and the driver later maps device memory at the same virtual addresses (it
    // grows its VA reservations with mmap). Until the slot is overwritten, a device
    // pointer there reads as host. We cannot see munmap without hooking it (UCX does, via
    // ucm). It needs host memory freed back to the kernel inside the VA window the driver
    // grows into; a buffer tagged MPIX_ACC_BUF_CUDA never consults this table, and any
    // capture of a device range there drops the overlapping granules.
    std::unique_ptr<std::atomic<std::uintptr_t>[]> host_slots_;
    KnownHostGranules known_host_;  // reads host_slots_
    std::size_t next_victim_ = 0;

    // Known device allocations by base address; ranges never overlap (a new one evicts
    // what it overlaps, which must have been freed).
    std::map<std::uintptr_t, PointerInfo> device_;

    std::atomic<std::uint64_t> queries_{0};
    std::atomic<std::uint64_t> device_hits_{0};
    mutable std::mutex mutex_;
};

}  // namespace mpiacc
