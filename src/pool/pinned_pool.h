// Pinned staging pool: fixed-size slots carved from a few large pinned allocations
// made on first use and kept until finalize (dissertation 5.1). Its size is
// bounded; when every slot is taken, acquire() returns null and the transfer waits
// (back-pressure, DESIGN.md 2.7) instead of allocating more.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pool/shared_memory.h"

namespace mpiacc {

// How one device kind makes pinned host memory (cudaMallocHost, a mapped
// CL_MEM_ALLOC_HOST_PTR buffer, ...). Implemented by the accel components.
class PinnedAllocator {
public:
    virtual ~PinnedAllocator() = default;
    // Returns host-addressable pinned memory of `bytes`, or null (sets *why).
    virtual void *allocate(std::size_t bytes, std::string *why) = 0;
    virtual void release(void *ptr) = 0;
    // Whether every allocation is shared memory a peer process can map (shared_memory.h).
    virtual bool shares() const { return false; }
    // For an allocation of a sharing allocator: its segment's fd, inode and size.
    virtual bool shared_identity(const void * /*allocation*/, SharedLocation * /*out*/) const { return false; }
};

// Anonymous memory for staging slots that an allocator then page-locks itself
// (cudaHostRegister): `bytes` rounded up to whole 2 MiB, aligned to 2 MiB and advised for
// transparent huge pages (MADV_HUGEPAGE; 4 KiB pages where the kernel has THP off), and
// kept out of any child the process forks (MADV_DONTFORK: a copy-on-write fault in the
// parent would otherwise move a page away from under the device's DMA, as verbs' fork
// support also prevents). Pages are not touched here, so a NUMA binding around the
// registration decides where they come from. Null with *why set when mmap fails.
void *map_staging_memory(std::size_t bytes, std::size_t *mapped_bytes, std::string *why);
void unmap_staging_memory(void *p, std::size_t mapped_bytes);

// Called with each segment's base before a pool frees it, so that a registration of it
// (a netmod's) never outlives the memory and names a later allocation at that address.
void set_segment_release_hook(void (*hook)(void *base));

class PinnedPool {
public:
    PinnedPool(std::unique_ptr<PinnedAllocator> allocator, std::size_t slot_size, std::size_t capacity_bytes,
               std::size_t segment_bytes = 4u << 20);
    ~PinnedPool();
    PinnedPool(const PinnedPool &) = delete;
    PinnedPool &operator=(const PinnedPool &) = delete;

    // A free slot of slot_size() bytes, or null when the pool is exhausted (wait and
    // retry) or the allocator failed (then last_error() says why).
    void *acquire();
    void release(void *slot);

    std::size_t slot_size() const { return slot_size_; }
    std::size_t slots_total() const { return max_slots_; }
    std::size_t slots_in_use() const;
    std::size_t allocations() const;      // underlying pinned allocations made so far
    std::size_t exhausted_count() const;  // times acquire() found no slot
    const std::string &last_error() const { return last_error_; }
    // Whether slots are in shared memory that a peer on this node can map (the staging
    // of a shared pipeline). Makes the first allocation if none was made yet, so that
    // the answer holds for every slot; false when it failed.
    bool shared();
    // The segment (one allocation) holding `slot`, as a netmod registers it once.
    bool segment_of(const void *slot, void **base, std::size_t *bytes) const;
    // Where `slot` (from acquire) is, for a peer: false when the pool is not shared.
    bool locate_shared(const void *slot, SharedLocation *out) const;

private:
    bool grow();  // one more segment; false when at capacity or allocation failed

    std::unique_ptr<PinnedAllocator> allocator_;
    std::size_t slot_size_;
    std::size_t max_slots_;
    std::size_t slots_per_segment_;
    std::vector<void *> segments_;
    std::vector<std::size_t> segment_bytes_;
    std::vector<void *> free_;
    std::size_t carved_ = 0;
    std::size_t in_use_ = 0;
    std::size_t exhausted_ = 0;
    std::string last_error_;
    mutable std::mutex mutex_;
};

// Host memory for one staged payload: a slot of the pool when the payload fits one and a
// slot is free, else memory of its own (a payload is never kept waiting for a slot). The
// slot goes back to its pool when the buffer is reset or destroyed; moving hands it on.
class StagingBuffer {
public:
    StagingBuffer() = default;
    StagingBuffer(PinnedPool *pool, std::size_t bytes);
    StagingBuffer(StagingBuffer &&other) noexcept { *this = std::move(other); }
    StagingBuffer &operator=(StagingBuffer &&other) noexcept;
    StagingBuffer(const StagingBuffer &) = delete;
    StagingBuffer &operator=(const StagingBuffer &) = delete;
    ~StagingBuffer() { reset(); }

    void *data() { return slot_ ? slot_ : static_cast<void *>(heap_.data()); }
    bool pinned() const { return slot_ != nullptr; }
    void reset();

private:
    PinnedPool *pool_ = nullptr;
    void *slot_ = nullptr;
    std::vector<char> heap_;
};

// Whether a cached buffer of `capacity` bytes should serve a request for `bytes`: it fits
// and is at most twice the size. A larger one would be page-locked whole for a small
// payload, a cost per message far above the copy's (docs/performance.md, 'Receive
// bounce buffers'), and kept from the requests of its own size. The bounce caches of
// host (BounceBuffer) and OpenCL (ReceiveBounces) receives both choose by it.
inline bool reusable_for(std::size_t capacity, std::size_t bytes) { return capacity >= bytes && capacity / 2 <= bytes; }

// Binds this thread's memory allocations to the NUMA node nearest a PCI device (by bus
// id, "0000:3b:00.0"), or to the nodes the process runs on when the id is empty or
// unknown, for as long as the object lives: the wrong socket costs GPU-CPU bandwidth
// (docs/performance.md, 'Staging memory placement'). Uses hwloc; a no-op where the
// topology has no NUMA information.
class NumaAllocationScope {
public:
    explicit NumaAllocationScope(const std::string &pci_bus_id);
    ~NumaAllocationScope();
    NumaAllocationScope(const NumaAllocationScope &) = delete;
    NumaAllocationScope &operator=(const NumaAllocationScope &) = delete;
    // The NUMA node chosen (-1 when none).
    int node() const { return node_; }

private:
    void *topology_ = nullptr;
    void *saved_nodeset_ = nullptr;
    int saved_policy_ = 0;
    bool bound_ = false;
    int node_ = -1;
};

}  // namespace mpiacc
