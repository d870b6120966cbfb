// The OpenCL component of the accelerator table. The buffer argument is the
// cl_mem itself; its context and device come from MPIX_ACC_COMMAND_QUEUE, or from
// MPIX_ACC_CONTEXT (plus MPIX_ACC_DEVICE when the context has several devices).
// Copies run on the cache entry's own in-order queues and wait for the dependency
// captured at call time inside OpenCL (no host-side polling). The exception is a
// blocking call (BufferAttrs::within_call), whose whole-buffer copies go on the user's
// in-order queue itself.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "accel/accel.h"
#include "accel/opencl/object_cache.h"

namespace mpiacc {

// What the component is made with: the library's from AccelSettings, tests their own.
struct OpenClSettings {
    std::string platform;                              // substring of the platform name (MPIACC_OPENCL_PLATFORM)
    long cache_entries = opencl::kObjectCacheEntries;  // (context, device) entries kept; 0 (or less) = cache off
    std::size_t slot_size = 256u << 10;                // one staging slot per pipeline chunk
    std::size_t pool_bytes = 64u << 20;                // pinned staging memory per (context, device)
    // Pinned receive bounces per (context, device); not a knob, tests may lower it.
    std::size_t receive_bounce_bytes = opencl::kReceiveBounceBytes;
    bool share_pool = true;  // staging slots in shared memory (MPIACC_SHARED_STAGING)
    static OpenClSettings from(const AccelSettings &settings);
};

// A cl_mem region captured by OpenClAccel::capture. Holds a reference on the cl_mem,
// on the dependency event (the user's, or a marker on the user's queue) and on the cache
// entry, so the user may release all of theirs right after the call.
class OpenClDeviceBuffer final : public DeviceBuffer {
public:
    OpenClDeviceBuffer(std::shared_ptr<opencl::CacheEntry> entry, opencl::MemRef mem, std::size_t offset,
                       std::size_t bytes, opencl::EventRef dependency);
    // A buffer whose copies are all issued within the call (BufferAttrs::within_call or
    // copies_in_call: a blocking call, or a small nonblocking send staged at the call) on
    // the user's in-order `queue`, which the call keeps alive, so it is not retained (a
    // release is costly on NVIDIA's OpenCL). A copy of the whole region runs on that
    // queue, after the work already there, with no marker: a marker and a copy on our
    // queue waiting for it are slower for a small message (docs/performance.md, 'OpenCL
    // blocking calls'). Pipeline chunks still run on our two queues, behind a marker
    // taken at the first of them.
    OpenClDeviceBuffer(std::shared_ptr<opencl::CacheEntry> entry, opencl::MemRef mem, std::size_t offset,
                       std::size_t bytes, cl_command_queue queue);

    BufKind kind() const override { return BufKind::OPENCL; }
    std::size_t capacity() const override { return bytes_; }
    // CopyUse is not needed here: a blocking call's copies already go on the user's queue
    // or behind one marker, and wait on the event OpenCL returns with the copy.
    int copy_to_host(std::size_t offset, void *dst, std::size_t len, std::unique_ptr<Completion> *done,
                     std::string *why, CopyUse use = CopyUse::POLLED) override;
    int copy_from_host(std::size_t offset, const void *src, std::size_t len, std::unique_ptr<Completion> *done,
                       std::string *why, CopyUse use = CopyUse::POLLED) override;
    // The entry's pool. Slots must go back before this buffer is destroyed: an evicted
    // entry (and its pool) dies with its last buffer.
    PinnedPool *staging_pool() override { return &entry_->pinned_pool(); }
    // From the entry's ReceiveBounces, once a payload of kOfferBouncesFrom bytes or more
    // arrived in pageable memory for one of its buffers, or at once for a blocking
    // receive that large: it holds one bounce at a time (a window of nonblocking ones
    // could hold many), and blocking device sends below a chunk arrive as payloads.
    void *acquire_receive_bounce(std::size_t bytes) override {
        if (blocking_call_ && bytes >= kOfferBouncesFrom) entry_->receive_bounces().offer();
        return entry_->receive_bounces().acquire(bytes);
    }
    void release_receive_bounce(void *bounce) override { entry_->receive_bounces().release(bounce); }
    void note_pageable_payload(std::size_t bytes) override {
        if (bytes >= kOfferBouncesFrom) entry_->receive_bounces().offer();
    }
    // From the entry's ReceiveBounces whether offered or not, in whole pages (scratches
    // of a few bytes share one buffer); null past their budget. The scratch keeps the
    // entry alive, so a persistent collective may hold it across captures.
    std::unique_ptr<HostScratch> acquire_host_scratch(std::size_t bytes) override;
    // Below this, a copy from pageable memory is as fast as from pinned; from here on the
    // pinned one is faster (docs/performance.md, 'OpenCL receive bounces').
    static constexpr std::size_t kOfferBouncesFrom = 64u << 10;
    std::unique_ptr<Completion> dependency() override;
    bool pin_host_region(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why) override {
        return entry_->pin_peer_segment(base, bytes, mapping, why);
    }
    bool copies_from_peer_segments() const override { return true; }
    // The dependency (a marker on the user's queue, or the user's event) is waited for
    // inside OpenCL, and a copy that waits for none gives up a bounded wait after its
    // patience (EventCompletion), so one queued behind a dependency never holds a caller.
    bool copies_wait_for_user_work() const override { return dependency_.get() != nullptr || user_queue_ != nullptr; }
    bool stages_nonblocking_sends() const override { return true; }
    // The datatype kernels (pack.h) into a scratch cl_mem and a read from it, or a write
    // into one and the unpack kernel, on one of the entry's in-order queues after the
    // dependency.
    int pack_to_host(const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first, void *dst,
                     std::size_t len, std::unique_ptr<Completion> *done, std::string *why) override;
    int unpack_from_host(const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first,
                         const void *src, std::size_t len, std::unique_ptr<Completion> *done,
                         std::string *why) override;
    // The reduction kernel (reduce.h) on one of the entry's queues after both
    // dependencies; waits for it. `in` must be a cl_mem of the same context.
    int reduce_local(DeviceBuffer &in, const ReduceSpec &spec, std::int64_t count, std::string *why) override;
    // Captured for a blocking call (BufferAttrs::within_call): it may take a receive
    // bounce at once (acquire_receive_bounce).
    void mark_blocking_call() { blocking_call_ = true; }

    cl_mem mem() const { return mem_.get(); }
    // Where the region starts in mem() (MPIX_ACC_OFFSET).
    std::size_t region_offset() const { return region_offset_; }
    // Null when the call had no dependency.
    cl_event dependency_event() const { return dependency_.get(); }
    // The entry's queues and programs, e.g. for the datatype pack kernels.
    const std::shared_ptr<opencl::CacheEntry> &cache_entry() const { return entry_; }

private:
    enum class Direction { TO_HOST, FROM_HOST };
    int enqueue_copy(Direction direction, std::size_t offset, void *host, std::size_t len,
                     std::unique_ptr<Completion> *done, std::string *why);
    int enqueue_typed(Direction direction, const FlatType &flat, std::int64_t origin, std::int64_t count,
                      std::size_t first, void *host, std::size_t len, std::unique_ptr<Completion> *done,
                      std::string *why);

    std::shared_ptr<opencl::CacheEntry> entry_;
    opencl::MemRef mem_;
    std::size_t region_offset_;
    std::size_t bytes_;
    int take_marker(std::string *why);

    opencl::EventRef dependency_;
    cl_command_queue user_queue_ = nullptr;  // copies issued within the call (not retained)
    bool blocking_call_ = false;
};

class OpenClAccel final : public Accel {
public:
    explicit OpenClAccel(OpenClSettings settings);
    ~OpenClAccel() override;
    OpenClAccel(const OpenClAccel &) = delete;
    OpenClAccel &operator=(const OpenClAccel &) = delete;

    BufKind kind() const override { return BufKind::OPENCL; }
    const char *name() const override { return "opencl"; }
    // A platform whose name contains OpenClSettings::platform has a device. Scanned once;
    // false (no crash) when no ICD is registered.
    bool available() override;
    // Taken until the first use; from then on the cache and its pools keep the settings
    // they were made with, as the knobs are final after MPI_Init.
    void reconfigure(const AccelSettings &settings) override;
    // Validates and captures a cl_mem (see the .cc for each error class).
    int capture(void *addr, std::size_t bytes, const BufferAttrs &attrs, std::unique_ptr<DeviceBuffer> *out,
                std::string *why) override;
    // Drops every cached entry; entries still held by buffers die with them.
    void shutdown() override;
    std::string counters() const override { return opencl::opencl_counters_text(); }

    // Evicts cache entries whose cl_context only MPI-ACC keeps alive (the user released
    // it and everything made in it), returning how many. Lookups do this too; core may
    // call it from progress when idle so a dead context is freed without new traffic.
    std::size_t sweep();
    std::size_t cached_entries() const;

private:
    // A vendor dispatch table (the first word of every object of that vendor) and its
    // clGetMemObjectInfo entry: how we tell an OpenCL handle from other pointers.
    struct DispatchTable {
        const void *table;
        const void *get_mem_object_info;
    };

    void initialise();
    void scan_platforms();
    // True when `handle` points at an object of one of the installed OpenCL platforms.
    // Reads only memory known to be mapped: a host pointer passed as a cl_mem must get
    // MPI_ERR_BUFFER, not a jump through garbage in the ICD loader.
    bool is_opencl_object(const void *handle) const;
    // is_opencl_object for a MPIX_ACC_COMMAND_QUEUE, remembering the queues that passed.
    bool is_opencl_queue(cl_command_queue queue) const;
    bool device_in_context(cl_device_id device, const std::vector<cl_device_id> &devices) const;
    int inspect_mem(cl_mem mem, cl_context *context, std::size_t *size, std::string *why) const;
    int resolve_context_and_device(const BufferAttrs &attrs, cl_context mem_context, cl_context *context,
                                   cl_device_id *device, const char **source, std::string *why) const;
    int capture_dependency(const BufferAttrs &attrs, cl_context context, const char *source,
                           opencl::EventRef *dependency, std::string *why) const;

    std::mutex settings_mutex_;  // reconfigure against a first use on another thread
    bool settings_fixed_ = false;
    OpenClSettings settings_;
    std::once_flag initialise_once_;
    std::atomic<bool> initialised_{false};
    bool available_ = false;
    std::vector<cl_platform_id> platforms_;       // every installed platform
    std::vector<DispatchTable> dispatch_tables_;  // theirs
    // Per-type tables found to lead to an installed platform's functions.
    static constexpr unsigned kLearnedTables = 16;
    mutable std::atomic<const void *> learned_tables_[kLearnedTables] = {};
    mutable std::atomic<unsigned> learned_count_{0};
    mutable std::mutex learn_mutex_;
    // Command queues that passed is_opencl_object, with the first word (the dispatch
    // table) each had then: see is_opencl_queue. Cleared when it reaches kKnownQueues.
    static constexpr std::size_t kKnownQueues = 256;
    mutable std::mutex known_queues_mutex_;
    mutable std::unordered_map<const void *, const void *> known_queues_;
    std::unique_ptr<opencl::ObjectCache> cache_;
    int unmap_hook_ = 0;  // add_peer_segment_unmap_hook's handle: cache_ drops pins of unmapped segments
};

}  // namespace mpiacc
