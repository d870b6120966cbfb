// The OpenCL object cache: per (cl_context, cl_device_id), the objects a transfer needs
// and that are costly to make per message: two internal in-order queues, the pinned
// staging pool and compiled programs. Reusing them is the dissertation's object caching,
// which cut small-message latency most (docs/performance.md, 'OpenCL object cache').
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pool/pinned_pool.h"
#include "pool/shared_memory.h"

namespace mpiacc {
namespace opencl {

// One reference on a cl_* object, released when the holder dies.
template <typename Handle, cl_int(CL_API_CALL *Retain)(Handle), cl_int(CL_API_CALL *Release)(Handle)>
class ClRef {
public:
    ClRef() = default;
    // Takes over the reference a clCreate* / clEnqueue* call returned.
    static ClRef adopt(Handle handle) { return ClRef(handle); }
    // Adds a reference of our own to a handle someone else owns.
    static ClRef retain(Handle handle) {
        if (handle) Retain(handle);
        return ClRef(handle);
    }
    ~ClRef() { reset(); }
    ClRef(ClRef &&other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
    ClRef &operator=(ClRef &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = other.handle_;
            other.handle_ = nullptr;
        }
        return *this;
    }
    ClRef(const ClRef &) = delete;
    ClRef &operator=(const ClRef &) = delete;

    Handle get() const { return handle_; }
    explicit operator bool() const { return handle_ != nullptr; }
    void reset() {
        if (handle_) Release(handle_);
        handle_ = nullptr;
    }

private:
    explicit ClRef(Handle handle) : handle_(handle) {}
    Handle handle_ = nullptr;
};

using ContextRef = ClRef<cl_context, clRetainContext, clReleaseContext>;
using QueueRef = ClRef<cl_command_queue, clRetainCommandQueue, clReleaseCommandQueue>;
using MemRef = ClRef<cl_mem, clRetainMemObject, clReleaseMemObject>;
using EventRef = ClRef<cl_event, clRetainEvent, clReleaseEvent>;
using ProgramRef = ClRef<cl_program, clRetainProgram, clReleaseProgram>;
using KernelRef = ClRef<cl_kernel, clRetainKernel, clReleaseKernel>;

// "CL_INVALID_MEM_OBJECT" for -38; "CL error -N" for codes not in the table.
std::string cl_error_name(cl_int code);

// The component's named counters (util/counters.def), bumped per capture.
struct OpenClCounters {
    std::atomic<std::int64_t> &cache_hit;
    std::atomic<std::int64_t> &cache_miss;
    std::atomic<std::int64_t> &cache_evicted;
    std::atomic<std::int64_t> &queue_created;
    std::atomic<std::int64_t> &pinned_alloc;
    std::atomic<std::int64_t> &program_built;
    std::atomic<std::int64_t> &peer_pin;    // pins of peers' staging segments made (SHARED mode)
    std::atomic<std::int64_t> &peer_unpin;  // and let go (the segment unmapped, or a stale pin replaced)
};
const OpenClCounters &opencl_counters();
// The counters above as "name=value" lines, sorted by name.
std::string opencl_counters_text();

// "dddd:bb:dd.f" of an NVIDIA (cl_nv_device_attribute_query) or AMD
// (cl_amd_device_attribute_query) device, "" for others: where to put its staging memory.
std::string device_pci_bus_id(cl_device_id device);

// The references on a cl_context that our own objects hold. Why: every internal queue,
// pinned buffer and program we make keeps the user's context alive, so
// clSetContextDestructorCallback can never fire while the entry exists. We therefore
// compare CL_CONTEXT_REFERENCE_COUNT with what we hold.
//
// What PoCL 3.1 reports: CL_CONTEXT_REFERENCE_COUNT counts
// the user's handle plus one per cl_command_queue, cl_mem, user event and cl_program
// made in the context (markers and other enqueued events add nothing), and the
// destructor callback fires only when the last of them is released. The OpenCL spec
// leaves open whether child objects show up in the count, so we do not assume: each
// object we create is charged with the increase it actually caused (0 or 1).
class ContextReferences {
public:
    explicit ContextReferences(cl_context context) : context_(context) {}
    // CL_CONTEXT_REFERENCE_COUNT now; 0 when the query fails.
    cl_uint current() const;
    // Charges to us the references added since `before` (taken with current() just
    // before creating one object). Clamped to 0..1: a user thread creating or releasing
    // objects at the same moment can skew one reading, and then we err towards a late or
    // an early eviction, both harmless (an early one only costs a rebuild).
    // Returns what was charged, for discharge() when that object goes again.
    cl_uint charge_since(cl_uint before);
    void charge(cl_uint references) { ours_ += references; }
    void discharge(cl_uint references);
    cl_uint ours() const { return ours_.load(std::memory_order_relaxed); }
    // True when nobody but us keeps the context alive: the user has released it and
    // everything made in it.
    bool only_ours_remain() const;

private:
    cl_context context_;
    std::atomic<cl_uint> ours_{0};
};

// (context, device) entries kept. An application rarely works in more than a few
// contexts at once, and the paper's single entry thrashed with two (BRIEF P7).
constexpr long kObjectCacheEntries = 4;

// ReceiveBounces budget per entry: as much as the registered bounce buffers CUDA
// receives may keep (a window of 32 receives of 4 MiB).
constexpr std::size_t kReceiveBounceBytes = std::size_t{128} << 20;

struct EntrySettings {
    std::size_t slot_size = 256 << 10;   // AccelSettings::slot_size
    std::size_t pool_bytes = 64u << 20;  // AccelSettings::pool_bytes
    std::size_t receive_bounce_bytes = kReceiveBounceBytes;
    // The pool's slots in memory peers on this node can map (AccelSettings::shared_staging).
    bool share_pool = true;
};

// Pinned staging memory for one (context, device): buffers mapped once, persistently, so
// their host pointers are the fast path for clEnqueueRead/Write. A sharing allocator
// makes each one a CL_MEM_USE_HOST_PTR buffer over a shared segment (shared_memory.h),
// which NVIDIA's OpenCL reads and writes at the pinned rate, several times that of
// shared memory no such buffer covers (docs/performance.md, 'Shared staging');
// the others use CL_MEM_ALLOC_HOST_PTR. wrap()
// pins memory it did not make (a peer's segment that copies read from) by a
// USE_HOST_PTR buffer alone, never mapped. Calls are serialised by the owner
// (PinnedPool, or the cache entry's lock).
class OpenClPinnedAllocator : public PinnedAllocator {
public:
    // `context` and `references` belong to the cache entry, which outlives its pool.
    OpenClPinnedAllocator(cl_context context, cl_device_id device, std::string pci_bus_id,
                          ContextReferences *references, bool share = false);
    ~OpenClPinnedAllocator() override;
    void *allocate(std::size_t bytes, std::string *why) override;
    void release(void *ptr) override;
    // A sharing allocator whose first allocation could not be shared makes the rest
    // unshared (ALLOC_HOST_PTR); once one was shared, all of them are.
    bool shares() const override { return share_ && !share_failed_; }
    bool shared_identity(const void *allocation, SharedLocation *out) const override;
    // Makes the driver take [host, host + bytes), memory of the caller's that another
    // process may be writing, as pinned: a USE_HOST_PTR buffer over it, kept until
    // release(host) or destruction. Returns host, or null with *why.
    void *wrap(void *host, std::size_t bytes, std::string *why);

private:
    bool ensure_map_queue(std::string *why);
    void *map(MemRef buffer, std::size_t bytes, SharedSegment segment, std::string *why);
    void unmap_and_release(void *ptr);  // also run by the destructor, where release() is not virtual

    cl_context context_;
    cl_device_id device_;
    std::string pci_bus_id_;
    ContextReferences *references_;
    bool share_;
    bool share_failed_ = false;
    // Maps and unmaps run on a queue of their own: a blocking map on a copy queue would
    // wait behind copies that wait on a user event, which may never be set while this
    // thread is inside MPI (deadlock). Made on the first allocation.
    QueueRef map_queue_;
    struct Mapping {
        MemRef buffer;
        cl_uint charged;        // context references this buffer added (ContextReferences)
        SharedSegment segment;  // a shared allocation's own segment (freed after the buffer)
        bool mapped = true;     // false for a wrap (see wrap())
    };
    std::map<void *, Mapping> buffers_;  // host pointer -> its buffer (mapped, or a wrap)
};

// Pinned buffers that receives into one entry's device post their matching receive
// into, so that a payload sent as plain bytes (a host sender under the rendezvous
// threshold) reaches the device by DMA, several times faster than from pageable memory
// on NVIDIA's OpenCL (docs/performance.md, 'OpenCL receive bounces'). Offered
// only once a receive of the entry got a payload of at least 64 KiB in pageable memory,
// so that device-to-device traffic (envelopes only) never pays for them. Reused, the
// smallest fit first; bounded in bytes, and past the bound receives use pageable memory.
// Collectives staged through host memory take their scratch from here too, unoffered:
// they always stage, and a non-blocking read into pageable memory is what NVIDIA's OpenCL
// does slowest (docs/performance.md, 'OpenCL collective scratch').
class ReceiveBounces {
public:
    ReceiveBounces(std::unique_ptr<PinnedAllocator> allocator, std::size_t budget_bytes);
    ~ReceiveBounces();
    ReceiveBounces(const ReceiveBounces &) = delete;
    ReceiveBounces &operator=(const ReceiveBounces &) = delete;
    // At least `bytes` of pinned memory, or null: not offered yet, over the budget, or
    // an allocation failed (not tried again).
    void *acquire(std::size_t bytes);
    // The same whether offered or not, for a caller that stages every time.
    void *acquire_for_scratch(std::size_t bytes);
    void release(void *bounce);
    void offer() { offered_.store(true, std::memory_order_relaxed); }
    std::size_t allocated_bytes() const;

private:
    struct Buffer {
        void *data;
        std::size_t capacity;
    };
    std::atomic<bool> offered_{false};
    mutable std::mutex mutex_;
    std::unique_ptr<PinnedAllocator> allocator_;
    const std::size_t budget_;
    std::size_t allocated_ = 0;
    bool failed_ = false;
    std::vector<Buffer> free_;              // oldest first
    std::map<void *, std::size_t> in_use_;  // data -> capacity
};

// Everything cached for one (context, device). Shared: a DeviceBuffer and each copy's
// Completion hold it, so an evicted entry lives on until the last of them is gone.
class CacheEntry {
    struct CreateKey {};  // only create() builds entries (make_shared needs a public constructor)

public:
    CacheEntry(CreateKey, cl_context context, cl_device_id device);
    // Retains `context`, makes the two copy queues and the (still empty) pinned pool.
    // Null with *why on failure.
    static std::shared_ptr<CacheEntry> create(cl_context context, cl_device_id device, const EntrySettings &settings,
                                              std::string *why);
    ~CacheEntry();
    CacheEntry(const CacheEntry &) = delete;
    CacheEntry &operator=(const CacheEntry &) = delete;

    cl_context context() const { return context_.get(); }
    cl_device_id device() const { return device_; }
    // The copy queues in turn: consecutive chunks overlap (double buffering).
    cl_command_queue next_copy_queue();
    PinnedPool &pinned_pool() { return *pinned_pool_; }
    ReceiveBounces &receive_bounces() { return *receive_bounces_; }
    // Makes copies between this entry's buffers and host memory [base, base + bytes) (a
    // peer's staging segment, mapped here as `mapping`) run at the pinned rate; kept
    // until unpin_peer_segment(base) or the entry's end. A pin of an earlier mapping at
    // the same address is replaced. False with *why when OpenCL refuses.
    bool pin_peer_segment(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why);
    void unpin_peer_segment(void *base);
    // The program `name` built for this device from `source`, built on first use and
    // kept for the entry's life; valid while the caller holds the entry. Null with *why
    // (including the build log) when it does not build.
    cl_program program(const std::string &name, const std::string &source, std::string *why);
    // Kernel `kernel_name` of program `program_name` (built by program() on first use),
    // to launch on `queue`. One made once serves launches on this entry's own queues; for
    // any other queue a fresh one is made, to be dropped after the launch, because a
    // kernel keeps the last queue it ran on alive on PoCL 3.1 (a user's released queue,
    // and with it the context, lived until the entry went). A cl_kernel's arguments are
    // shared state: set them and enqueue while holding the result. `max_group` is its
    // CL_KERNEL_WORK_GROUP_SIZE on this device.
    struct LockedKernel {
        cl_kernel kernel = nullptr;
        std::size_t max_group = 1;
        std::unique_lock<std::mutex> lock;  // for a cached kernel
        KernelRef own;                      // for a fresh one
    };
    LockedKernel kernel(const std::string &program_name, const std::string &source, const std::string &kernel_name,
                        cl_command_queue queue, std::string *why);

    // A read-only buffer in this context holding a copy of [host, host + bytes): a
    // datatype's work units, kept by the FlatType (device_copy) under device_copy_key().
    // Its context reference is charged to this entry, and it is released when the entry
    // goes if not before, so a long-lived datatype never keeps a destroyed context alive.
    // Null with *why.
    std::shared_ptr<void> make_constant_buffer(const void *host, std::size_t bytes, std::string *why);
    // The cl_mem of such a buffer; null once its entry has gone.
    static cl_mem constant_buffer_mem(const std::shared_ptr<void> &buffer);
    // Key for FlatType::device_copy. Not the entry's address, which a later entry may
    // reuse: this token lives as long as any copy made under it.
    const void *device_copy_key() const { return copy_key_.get(); }
    const std::string &pci_bus_id() const { return pci_bus_id_; }
    bool only_our_references_remain() const { return references_->only_ours_remain(); }

private:
    // Declaration order is teardown order reversed: the pool unmaps its buffers before
    // the queues go, and our context reference is dropped last.
    ContextRef context_;
    cl_device_id device_;
    std::string pci_bus_id_;
    std::shared_ptr<ContextReferences> references_;  // shared with constant buffers, which may outlive us
    QueueRef copy_queues_[2];
    std::atomic<unsigned> next_queue_{0};
    std::mutex programs_mutex_;
    std::map<std::string, ProgramRef> programs_;
    struct KernelSlot {
        KernelRef kernel;
        std::size_t max_group = 1;
        std::mutex mutex;
    };
    std::map<std::string, std::unique_ptr<KernelSlot>> kernels_;  // under programs_mutex_
    struct ConstantBuffer;
    std::shared_ptr<const int> copy_key_ = std::make_shared<const int>(0);
    std::mutex constant_buffers_mutex_;
    std::vector<std::weak_ptr<ConstantBuffer>> constant_buffers_;
    std::unique_ptr<PinnedPool> pinned_pool_;
    std::unique_ptr<ReceiveBounces> receive_bounces_;
    std::mutex peer_pins_mutex_;
    std::unique_ptr<OpenClPinnedAllocator> peer_wraps_;  // a USE_HOST_PTR buffer over each pinned segment
    PeerSegmentPins peer_pins_;                          // which mapping each wrap was made for
};

// LRU cache of entries, keyed by (context, device). Capacity 0 turns it off: every
// acquire() builds a private entry that dies with its last holder (the "cache off"
// configuration the benchmarks compare against). Thread safe.
class ObjectCache {
public:
    ObjectCache(std::size_t capacity, EntrySettings settings);
    ~ObjectCache();
    ObjectCache(const ObjectCache &) = delete;
    ObjectCache &operator=(const ObjectCache &) = delete;

    // The entry for (context, device), from the cache or freshly built. Also evicts
    // entries whose context only we keep alive. Null with *why on failure.
    std::shared_ptr<CacheEntry> acquire(cl_context context, cl_device_id device, std::string *why);
    // Evicts entries whose context only we keep alive (the user destroyed it); returns
    // how many. Core may call it at any time, e.g. from progress when idle.
    std::size_t sweep();
    // Drops every entry (MPI_Finalize). Entries still held by buffers die with them.
    void clear();
    // A peer's segment at `base` is about to be unmapped: the cached entries let go of
    // their pins of it (entries only buffers still hold replace theirs on next use).
    void unpin_peer_segment(void *base);
    std::size_t size() const;
    std::size_t capacity() const { return capacity_; }

private:
    // Moves dead entries into *evicted so they are destroyed after the lock is dropped;
    // `keep` is the entry being looked up, never evicted by the sweep.
    void sweep_locked(const CacheEntry *keep, std::vector<std::shared_ptr<CacheEntry>> *evicted);

    const std::size_t capacity_;
    const EntrySettings settings_;
    mutable std::mutex mutex_;
    std::list<std::shared_ptr<CacheEntry>> entries_;  // most recently used first
};

}  // namespace opencl
}  // namespace mpiacc
