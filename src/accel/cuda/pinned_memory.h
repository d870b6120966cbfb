// Pinned host memory of the CUDA component: the staging pools' allocator, and the record
// of every range known to be pinned, so that a copy from or to one needs no driver query.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "accel/cuda/driver.h"
#include "pool/pinned_pool.h"

namespace mpiacc {
namespace cuda {

// The pinned ranges our staging pools hold, and registered host memory (register_host,
// peers' staging segments). All of it is mapped into every device, so a resident copier
// may read or write it at its host address (DeviceState::host_at_own_address).
class PinnedRanges {
public:
    void add(const void *p, std::size_t n) {
        std::lock_guard<std::mutex> lock(mutex_);
        ranges_[as_addr(p)] = n;
    }
    void remove(const void *p) {
        std::lock_guard<std::mutex> lock(mutex_);
        ranges_.erase(as_addr(p));
    }
    bool contains(const void *p, std::size_t n) const {
        const std::uintptr_t a = as_addr(p);
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = ranges_.upper_bound(a);
        if (it == ranges_.begin()) return false;
        --it;
        return a - it->first < it->second && n <= it->second - (a - it->first);
    }

private:
    mutable std::mutex mutex_;
    std::map<std::uintptr_t, std::size_t> ranges_;
};

// Staging memory on the device's NUMA node (BRIEF P5: wrong-socket staging costs up to
// half the copy bandwidth), in transparent huge pages page-locked with cudaHostRegister:
// MPICH's copy between two ranks of a node reads 2 MiB pages faster than cudaMallocHost
// memory (docs/performance.md, 'Staging in huge pages'). cudaMallocHost where that fails.
class CudaPinnedAllocator final : public PinnedAllocator {
public:
    CudaPinnedAllocator(int device, std::string pci_bus_id, std::shared_ptr<const DriverApi> driver,
                        std::shared_ptr<PinnedRanges> ranges);

    void *allocate(std::size_t bytes, std::string *why) override;
    void release(void *ptr) override;

private:
    int device_;
    std::string pci_bus_id_;
    std::shared_ptr<const DriverApi> driver_;
    std::shared_ptr<PinnedRanges> ranges_;
    std::atomic<std::int64_t> &allocations_;
    std::mutex mapped_mutex_;
    std::map<void *, std::size_t> mapped_;  // allocations of map_staging_memory: their lengths
};

}  // namespace cuda
}  // namespace mpiacc
