// Staging slots for host send buffers. In SHARED mode a host sender to a device receiver
// on its node copies each chunk into one of these (shared memory, shared_memory.h) and
// the receiver's device copies it out by DMA, where through MPICH the chunk would cost a
// rendezvous and a CMA copy into the receiver's own slot before the same DMA. Through
// the pipeline, huge-page slots (HugePageHostAllocator) make that CMA copy faster.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "pool/pinned_pool.h"
#include "pool/shared_memory.h"

namespace mpiacc {

// Memfd segments, mapped here: page-locked only by the peer's device registration, which
// is all the DMA that reads them needs.
class SharedHostAllocator : public PinnedAllocator {
public:
    ~SharedHostAllocator() override;
    void *allocate(std::size_t bytes, std::string *why) override;
    void release(void *ptr) override;
    bool shares() const override { return true; }
    bool shared_identity(const void *allocation, SharedLocation *out) const override;

private:
    std::map<void *, SharedSegment> segments_;  // by base; calls are serialised by the pool
};

// A pool of `capacity_bytes` in slots of `slot_size` bytes over SharedHostAllocator.
std::unique_ptr<PinnedPool> make_host_staging_pool(std::size_t slot_size, std::size_t capacity_bytes);

// Anonymous memory in transparent huge pages (map_staging_memory), not page-locked: the
// staging of a host buffer's pipeline chunks to a receiver on this node, whose MPICH reads
// each with one CMA copy. That copy walks the sender's pages, and runs faster out of
// 2 MiB pages than out of the 4 KiB ones of a malloc buffer (docs/performance.md, 'Host
// chunk staging').
class HugePageHostAllocator : public PinnedAllocator {
public:
    ~HugePageHostAllocator() override;
    void *allocate(std::size_t bytes, std::string *why) override;
    void release(void *ptr) override;

private:
    std::map<void *, std::size_t> mapped_;  // base -> mapped bytes; calls are serialised by the pool
};

// A pool of `capacity_bytes` in slots of `slot_size` bytes over HugePageHostAllocator.
std::unique_ptr<PinnedPool> make_host_chunk_pool(std::size_t slot_size, std::size_t capacity_bytes);

}  // namespace mpiacc
