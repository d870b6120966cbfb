#include "accel/cuda/cuda_accel.h"

#include "config.h"

#include <cuda.h>  // types and enums only: driver functions come from entry points
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "accel/cuda/cuda_quiet.h"
#include "accel/cuda/memtype_cache.h"
#include "accel/cuda/resident_copier.h"
#include "util/counters.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/probe.h"
#include "pool/pinned_pool.h"
#include "pool/shared_memory.h"

#if MPIACC_HAVE_CUDA_KERNELS
#include "accel/cuda/copy_kernel_fatbin.h"  // generated from copy_kernel.cu
#endif

namespace mpiacc {

namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(IpcExport::mem_handle), "IPC memory handle size");
static_assert(sizeof(cudaIpcEventHandle_t) == sizeof(IpcExport::event_handle), "IPC event handle size");

// Stream pairs per device. A buffer takes one pair for its copies (double buffering,
// BRIEF S4); four pairs let four concurrent transfers per device overlap without any of
// them queueing behind another's copies.
constexpr unsigned kStreamPairs = 4;
// After the pairs, one more stream per device takes every IPC pull. Pulls then run one
// after another in the order they were issued, as the raw IPC anchor's do; issued on
// the pairs, a window of 16 MiB pulls interleaved on eight streams reached 323 GB/s
// against the anchor's 358 on the H200 machine.
constexpr unsigned kPullStream = 2 * kStreamPairs;
// Opened peer allocations kept mapped. Each holds the peer's memory alive even after the
// peer frees it, so the bound matters more than the hit rate past a few dozen.
constexpr std::size_t kMaxIpcMappings = 64;
// Opened peer events; a peer's events come from its bounded pool, so this is rarely hit.
constexpr std::size_t kMaxIpcEvents = 1024;
// Exported memory handles, per allocation base.
constexpr std::size_t kMaxExportHandles = 4096;
// The largest copy mpiacc_copy_small moves in its one block (copy_kernel.cu: 256 threads,
// 8 vectors of 16 bytes each), and its block size.
constexpr std::size_t kKernelCopyLimit = 256 * 8 * 16;
constexpr unsigned kKernelCopyThreads = 256;
// A kernel copy is known done by the word it writes into host memory; the driver is asked
// about its event (for a fault that would leave the word unwritten) only once it runs
// this long: a copy of at most 32 KiB takes a few microseconds.
constexpr std::chrono::microseconds kKernelCopyPatience{50};
// A memop write's done word is watched this long before the driver is asked about its
// stream (a fault would keep the word unwritten).
constexpr std::chrono::microseconds kMemopPatience{200};
// The largest host payload written into device memory by stream memory operations.
// Each write is fenced: on an H200, 8 B went in 4.6-4.7 us from
// the call to the done word seen, against 5.8 for cudaMemcpyAsync and the stream's
// synchronization; 16 B (two writes) 5.7 against 6.7, but 64 B (eight) 9.5 against 6.4
// (maint/diag/small-copy-completion.cu, session 32).
constexpr std::size_t kMemopMaxBytes = 16;
// The longest copy the resident copier takes with an end that is not 16-byte aligned: its
// warp then moves a byte a lane at a time, one NVLink or PCIe round trip per 32 bytes.
constexpr std::size_t kResidentUnalignedMax = 256;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

std::string cuda_text(cudaError_t e) { return format("%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e)); }

std::uintptr_t as_addr(const void *p) { return reinterpret_cast<std::uintptr_t>(p); }

// A device's place on the PCI bus as one number, domain << 13 | bus << 5 | device, which
// names one GPU in every process of a node whatever its ordinal there; -1 if unknown.
std::int32_t pci_location(int ordinal) {
    int domain = -1, bus = -1, dev = -1;
    if (quiet(cudaDeviceGetAttribute(&domain, cudaDevAttrPciDomainId, ordinal)) != cudaSuccess ||
        quiet(cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, ordinal)) != cudaSuccess ||
        quiet(cudaDeviceGetAttribute(&dev, cudaDevAttrPciDeviceId, ordinal)) != cudaSuccess || domain < 0 ||
        domain > 0xffff || bus < 0 || bus > 0xff || dev < 0 || dev > 0x1f)
        return -1;
    return static_cast<std::int32_t>(domain) << 13 | bus << 5 | dev;
}

std::string pci_text(std::int32_t location) {
    if (location < 0) return "unknown";
    return format("%04x:%02x:%02x", location >> 13, (location >> 5) & 0xff, location & 0x1f);
}

// Driver functions the runtime has no equivalent for; null where the driver lacks one.
struct DriverApi {
    PFN_cuPointerGetAttributes_v7000 pointer_get_attributes = nullptr;
    PFN_cuPointerGetAttribute_v4000 pointer_get_attribute = nullptr;
    PFN_cuMemGetAddressRange_v3020 mem_get_address_range = nullptr;
    PFN_cuDeviceGet_v2000 device_get = nullptr;
    PFN_cuDevicePrimaryCtxGetState_v7000 primary_ctx_state = nullptr;
    PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
    PFN_cuStreamBatchMemOp_v11070 stream_batch_mem_op = nullptr;
};

template <class Fn>
void resolve_entry(const char *symbol, unsigned version, Fn *fn) {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (quiet(cudaGetDriverEntryPointByVersion(symbol, &p, version, cudaEnableDefault, &found)) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
        *fn = reinterpret_cast<Fn>(p);
}

// Makes `device` current for a scope and puts the caller's device back afterwards.
class DeviceGuard {
public:
    DeviceGuard(int device, const DriverApi *driver) {
        if (quiet(cudaGetDevice(&saved_)) != cudaSuccess) saved_ = -1;
        if (device < 0 || device == saved_) return;
        error_ = quiet(cudaSetDevice(device));
        restore_ = error_ == cudaSuccess && saved_ >= 0 && should_restore(saved_, driver);
    }
    ~DeviceGuard() {
        if (restore_) quiet(cudaSetDevice(saved_));
    }
    DeviceGuard(const DeviceGuard &) = delete;
    DeviceGuard &operator=(const DeviceGuard &) = delete;
    cudaError_t error() const { return error_; }

private:
    // cudaSetDevice creates the primary context of the device it switches to. A thread
    // that never chose a device reads device 0; switching "back" to it would make every
    // rank of a multi-GPU node build a context (hundreds of MiB) on GPU 0. So restore only
    // to a device whose context already exists; otherwise the thread keeps the device
    // it was last given work on.
    static bool should_restore(int device, const DriverApi *d) {
        if (!d || !d->device_get || !d->primary_ctx_state) return true;
        CUdevice dev = 0;
        if (d->device_get(&dev, device) != CUDA_SUCCESS) return true;
        unsigned flags = 0;
        int active = 0;
        if (d->primary_ctx_state(dev, &flags, &active) != CUDA_SUCCESS) return true;
        return active != 0;
    }

    int saved_ = -1;
    bool restore_ = false;
    cudaError_t error_ = cudaSuccess;
};

// The pinned segments our staging pools hold, so that a copy into staging memory is known
// pinned without asking the driver.
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

// cudaMallocHost on the device's NUMA node (BRIEF P5: wrong-socket staging costs up to
// half the copy bandwidth).
class CudaPinnedAllocator final : public PinnedAllocator {
public:
    CudaPinnedAllocator(int device, std::string pci_bus_id, std::shared_ptr<const DriverApi> driver,
                        std::shared_ptr<PinnedRanges> ranges)
        : device_(device),
          pci_bus_id_(std::move(pci_bus_id)),
          driver_(std::move(driver)),
          ranges_(std::move(ranges)),
          allocations_(counter("cuda.pinned.alloc")) {}

    void *allocate(std::size_t bytes, std::string *why) override {
        DeviceGuard guard(device_, driver_.get());
        if (guard.error() != cudaSuccess) {
            *why = format("cudaSetDevice(%d) for pinned staging memory: %s", device_, cuda_text(guard.error()).c_str());
            return nullptr;
        }
        NumaAllocationScope numa(pci_bus_id_);
        std::string huge_why;
        {
            // Huge pages: MPICH's copy between two ranks of a node (CMA) takes 2 MiB from
            // such a buffer 12-25% faster than from cudaMallocHost memory.
            // The registration faults the pages in, under the NUMA binding above.
            std::size_t len = 0;
            void *p = map_staging_memory(bytes, &len, &huge_why);
            if (p) {
                cudaError_t e = quiet(cudaHostRegister(p, len, cudaHostRegisterPortable | cudaHostRegisterMapped));
                if (e == cudaSuccess) {
                    {
                        std::lock_guard<std::mutex> lock(mapped_mutex_);
                        mapped_[p] = len;
                    }
                    ranges_->add(p, len);
                    allocations_.fetch_add(1, std::memory_order_relaxed);
                    return p;
                }
                unmap_staging_memory(p, len);
                huge_why = format("cudaHostRegister(%zu bytes): %s", len, cuda_text(e).c_str());
            }
        }
        void *p = nullptr;
        cudaError_t e = quiet(cudaMallocHost(&p, bytes));
        if (e != cudaSuccess) {
            *why = format("cudaMallocHost(%zu bytes) for device %d staging: %s%s%s", bytes, device_,
                          cuda_text(e).c_str(), huge_why.empty() ? "" : "; before it, ", huge_why.c_str());
            return nullptr;
        }
        ranges_->add(p, bytes);
        allocations_.fetch_add(1, std::memory_order_relaxed);
        return p;
    }

    void release(void *ptr) override {
        ranges_->remove(ptr);
        DeviceGuard guard(device_, driver_.get());
        std::size_t len = 0;
        {
            std::lock_guard<std::mutex> lock(mapped_mutex_);
            auto it = mapped_.find(ptr);
            if (it != mapped_.end()) {
                len = it->second;
                mapped_.erase(it);
            }
        }
        if (len == 0) {
            quiet(cudaFreeHost(ptr));
            return;
        }
        quiet(cudaHostUnregister(ptr));
        unmap_staging_memory(ptr, len);
    }

private:
    int device_;
    std::string pci_bus_id_;
    std::shared_ptr<const DriverApi> driver_;
    std::shared_ptr<PinnedRanges> ranges_;
    std::atomic<std::int64_t> &allocations_;
    std::mutex mapped_mutex_;
    std::map<void *, std::size_t> mapped_;  // allocations of map_staging_memory: their lengths
};

// An event a completion or a dependency waits on: a leased pool event, or a peer's event
// opened through IPC.
class EventRef {
public:
    virtual ~EventRef() = default;
    virtual cudaEvent_t get() const = 0;
    // The handle a peer process opens it with; false when it cannot be exported.
    virtual bool ipc_handle(cudaIpcEventHandle_t * /*out*/) { return false; }
};

struct PooledEvent {
    cudaEvent_t event = nullptr;
    bool has_handle = false;  // cudaIpcGetEventHandle is asked once per event, not per use
    cudaIpcEventHandle_t handle{};
};

// Per-device events, reused: creating one costs more than recording it. Timing is off.
// Each device has two pools: plain events for copies and dependencies, and interprocess
// ones for dependencies sent to a peer, made only on the IPC path because recording an
// interprocess event costs 2.5 us against 0.15 us (measured on the H200 machine).
class EventPool : public std::enable_shared_from_this<EventPool> {
public:
    EventPool(int device, bool interprocess, std::shared_ptr<const DriverApi> driver)
        : device_(device),
          interprocess_(interprocess),
          driver_(std::move(driver)),
          created_(counter("cuda.event.created")) {}
    ~EventPool() { destroy(free_); }
    EventPool(const EventPool &) = delete;
    EventPool &operator=(const EventPool &) = delete;

    std::shared_ptr<EventRef> acquire(std::string *why);
    void give_back(const PooledEvent &ev) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!closed_) {
                free_.push_back(ev);
                return;
            }
        }
        destroy({ev});
    }
    // Shutdown: free the idle events now; leased ones are destroyed as they come back.
    void close() {
        std::vector<PooledEvent> idle;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            closed_ = true;
            idle.swap(free_);
        }
        destroy(idle);
    }
    int device() const { return device_; }
    bool interprocess() const { return interprocess_; }
    const DriverApi *driver() const { return driver_.get(); }

private:
    void destroy(const std::vector<PooledEvent> &events) {
        if (events.empty()) return;
        DeviceGuard guard(device_, driver_.get());
        for (const auto &ev : events) quiet(cudaEventDestroy(ev.event));
    }

    int device_;
    bool interprocess_;
    std::shared_ptr<const DriverApi> driver_;
    std::atomic<std::int64_t> &created_;
    std::mutex mutex_;
    std::vector<PooledEvent> free_;
    bool closed_ = false;
};

class PoolEventLease final : public EventRef {
public:
    PoolEventLease(std::shared_ptr<EventPool> pool, const PooledEvent &ev) : pool_(std::move(pool)), ev_(ev) {}
    ~PoolEventLease() override { pool_->give_back(ev_); }
    cudaEvent_t get() const override { return ev_.event; }
    bool ipc_handle(cudaIpcEventHandle_t *out) override {
        if (!pool_->interprocess()) return false;
        std::lock_guard<std::mutex> lock(mutex_);
        if (!ev_.has_handle) {
            DeviceGuard guard(pool_->device(), pool_->driver());
            if (quiet(cudaIpcGetEventHandle(&ev_.handle, ev_.event)) != cudaSuccess) return false;
            ev_.has_handle = true;
        }
        *out = ev_.handle;
        return true;
    }

private:
    std::shared_ptr<EventPool> pool_;
    PooledEvent ev_;
    std::mutex mutex_;
};

std::shared_ptr<EventRef> EventPool::acquire(std::string *why) {
    PooledEvent ev;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!free_.empty()) {
            ev = free_.back();
            free_.pop_back();
        }
    }
    if (!ev.event) {
        DeviceGuard guard(device_, driver_.get());
        cudaError_t e = guard.error();
        const unsigned flags = cudaEventDisableTiming | (interprocess_ ? cudaEventInterprocess : 0u);
        if (e == cudaSuccess) e = quiet(cudaEventCreateWithFlags(&ev.event, flags));
        if (e != cudaSuccess) {
            *why = format("cudaEventCreateWithFlags on device %d: %s", device_, cuda_text(e).c_str());
            return nullptr;
        }
        created_.fetch_add(1, std::memory_order_relaxed);
    }
    return std::make_shared<PoolEventLease>(shared_from_this(), ev);
}

// A peer's event opened with cudaIpcOpenEventHandle, shared by every import that names it.
class ImportedEvent final : public EventRef {
public:
    ImportedEvent(cudaEvent_t ev, int device, std::shared_ptr<const DriverApi> driver)
        : ev_(ev), device_(device), driver_(std::move(driver)) {}
    ~ImportedEvent() override {
        DeviceGuard guard(device_, driver_.get());
        quiet(cudaEventDestroy(ev_));
    }
    cudaEvent_t get() const override { return ev_; }

private:
    cudaEvent_t ev_;
    int device_;
    std::shared_ptr<const DriverApi> driver_;
};

// A peer's allocation mapped into this process; closed when the cache and every buffer
// and copy that use it have let go.
struct IpcMapping {
    void *base = nullptr;
    std::size_t size = 0;  // 0 when the driver could not say
    int device = -1;
    bool kernel_ok = false;  // copy kernels on `device` read it: it is `device`'s own memory
    // The resident copier on `device` reads it: `device`'s own memory, or a peer GPU's
    // that `device` has peer access to (opened with cudaIpcMemLazyEnablePeerAccess).
    bool peer_readable = false;
    std::shared_ptr<const DriverApi> driver;

    IpcMapping() = default;
    IpcMapping(const IpcMapping &) = delete;
    IpcMapping &operator=(const IpcMapping &) = delete;
    ~IpcMapping() {
        if (!base) return;
        DeviceGuard guard(device, driver.get());
        quiet(cudaIpcCloseMemHandle(base));
    }
};

// What is known about the copies enqueued on one internal stream. A stream runs its
// copies in order, so "copy n is done" means every copy before n is done too; and asking
// the driver is dear (cudaEventQuery and cudaStreamQuery cost 1.3 us each on the H200
// machine, against 0.15 us for cudaEventRecord). With a window of transfers in flight,
// polling each copy's event every progress round spent most of the round in the driver
// and starved MPICH's own progress. So a copy is asked about only when nothing already
// known answers it, and a "not yet" stands for the whole stream for a moment.
class StreamTracker {
public:
    // Reserve the sequence number of the next copy; the caller enqueues it while holding
    // `enqueue_mutex`, so numbers follow the stream's order.
    std::uint64_t next() { return ++issued_; }
    std::mutex enqueue_mutex;

    // True when copy `seq` is known done without asking the driver: a copy at or after it
    // said so, by its event or (a kernel copy) by the word it wrote into host memory.
    bool known_done(std::uint64_t seq) const {
        if (seq <= completed_.load(std::memory_order_acquire)) return true;
        return done_word_ && seq <= __atomic_load_n(done_word_, __ATOMIC_ACQUIRE);
    }
    // The sequence number the next copy will get; valid while holding `enqueue_mutex`.
    std::uint64_t peek_next() const { return issued_ + 1; }
    // Pinned host memory where this stream's kernel copies write their sequence number.
    void set_done_word(const std::uint64_t *w) { done_word_ = w; }
    // True when asking about copy `seq` now would only repeat a "not yet" that was just
    // given for it or an earlier copy of this stream.
    bool recently_pending(std::uint64_t seq) const {
        std::lock_guard<std::mutex> lock(mutex_);
        return seq >= pending_seq_ && clock::now() - pending_at_ < kRecheck;
    }
    void note_done(std::uint64_t seq) {
        std::uint64_t c = completed_.load(std::memory_order_relaxed);
        while (c < seq && !completed_.compare_exchange_weak(c, seq, std::memory_order_release)) {
        }
    }
    void note_pending(std::uint64_t seq) {
        std::lock_guard<std::mutex> lock(mutex_);
        pending_seq_ = seq;
        pending_at_ = clock::now();
    }
    // The latest copy enqueued and the event recorded after it.
    void set_tail(std::uint64_t seq, std::shared_ptr<EventRef> done) {
        std::lock_guard<std::mutex> lock(mutex_);
        tail_seq_ = seq;
        tail_ = std::move(done);
    }
    // Copy `seq` was just seen done: ask once whether the latest copy is done too, which
    // answers for every copy between. A window of 32 pulls of 256 KiB otherwise took one
    // query (1.3 us) per copy to retire, after the last was issued (H200 timeline).
    void probe_tail(std::uint64_t seq) {
        std::shared_ptr<EventRef> tail;
        std::uint64_t tail_seq;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (tail_seq_ <= seq + 1 || known_done(tail_seq_)) return;
            tail = tail_;
            tail_seq = tail_seq_;
        }
        if (!tail) return;
        cudaError_t e = cudaEventQuery(tail->get());
        if (e == cudaSuccess)
            note_done(tail_seq);
        else if (e != cudaErrorNotReady)
            quiet(e);  // the copy's own query reports it
    }

private:
    using clock = std::chrono::steady_clock;
    // Shorter than a query itself: one transfer polled alone never waits on it, while
    // a round over many transfers asks each stream once.
    static constexpr std::chrono::nanoseconds kRecheck{1000};
    std::uint64_t issued_ = 0;
    std::atomic<std::uint64_t> completed_{0};
    const std::uint64_t *done_word_ = nullptr;
    mutable std::mutex mutex_;
    std::uint64_t pending_seq_ = ~std::uint64_t{0};
    clock::time_point pending_at_{};
    std::uint64_t tail_seq_ = 0;
    std::shared_ptr<EventRef> tail_;
};

class PullBatch;

// What MPI-ACC keeps per device, created on first use. Buffers share it, so it outlives
// shutdown() until the last buffer is gone.
struct DeviceState {
    int ordinal = -1;
    std::shared_ptr<const DriverApi> driver;
    std::unique_ptr<PinnedPool> staging;
    std::shared_ptr<EventPool> events;                     // plain
    std::shared_ptr<EventPool> ipc_events;                 // interprocess
    std::vector<cudaStream_t> streams;                     // kStreamPairs pairs, then the pull stream; non-blocking
    std::vector<std::unique_ptr<StreamTracker>> trackers;  // one per stream
    std::atomic<unsigned> next_pair{0};
    // Small copies by kernel (copy_kernel.cu): null when the kernels are not built in or
    // did not load; then every copy goes to a copy engine.
    cudaKernel_t copy_kernel = nullptr;
    // Payloads of at most kMemopMaxBytes from host memory go into device
    // memory as stream memory writes of their words, with the done word written behind
    // them, in one cuStreamBatchMemOp (needs 64-bit stream memory operations).
    std::atomic<bool> memop_writes{false};
    // IPC pulls deferred in an open CopyBatch, enqueued together on the pull stream; null
    // where cudaMemcpyBatchAsync is missing (runtime or driver before 12.8).
    std::shared_ptr<PullBatch> pull_batch;
    // The device's place on the PCI bus (pci_location()): how a peer process tells
    // whether memory it maps lives on the GPU it runs on.
    std::int32_t pci_location = -1;
    std::uint64_t *done_words = nullptr;      // pinned, mapped: one per stream (StreamTracker)
    std::uint64_t *done_words_dev = nullptr;  // the same words as the device addresses them
    // Small copies this device's kernel can make (resident_copier.h): IPC pulls into its
    // memory, and copies between its memory (or a peer's it reads) and pinned staging
    // memory. Null where the kernels are not built in or MPIACC_CUDA_KERNEL_COPY_MAX=0.
    std::unique_ptr<ResidentCopier> resident;
    // Registered host memory is at its host address on this device too
    // (cudaDevAttrCanUseHostPointerForRegisteredMem): then `resident` may take copies to
    // and from the pinned memory that State::pinned knows (all of it mapped).
    bool host_at_own_address = false;
    // Contexts on this device are shared through MPS (cudaDevAttrMpsEnabled).
    bool mps = false;
    // Another process works on this GPU (a peer's IPC region lives in its memory) and the
    // device is not shared through MPS: the GPU time-slices between the processes'
    // contexts, and the resident copier's spinning warp takes the other rank's slices (two
    // ranks on one H200 without MPS, 8 B-4 KiB D->D one way: 165 us with the copier,
    // 149-151 without; under MPS 5.1-5.3 us with it, 11.0-12.0 without). Set once, for
    // good: small copies then go to the copy engines.
    std::atomic<bool> time_sliced{false};
    // Copies enqueued (or waiting in pull_batch) on copy engines whose owners have not yet
    // seen them end, of those that could have gone to `resident` (IPC pulls, and copies
    // offered to it): while there are any, none goes to `resident`.
    std::atomic<long> engine_copies{0};
    // MPIACC_FAULT_PULL and MPIACC_FAULT_MEMOP (AccelSettings), and this process's world
    // rank, for the copies that fail on purpose; configure() keeps them current.
    std::string fault_pull, fault_memop;
    int world_rank = 0;

    DeviceState() = default;
    DeviceState(const DeviceState &) = delete;
    DeviceState &operator=(const DeviceState &) = delete;
    ~DeviceState() {
        staging.reset();
        if (streams.empty()) return;
        DeviceGuard guard(ordinal, driver.get());
        resident.reset();  // stops its kernel, which reads peer mappings
        // A kernel copy abandoned unfinished (at finalize) would still write into
        // done_words: drain the streams first.
        if (done_words)
            for (cudaStream_t s : streams) quiet(cudaStreamSynchronize(s));
        // Returns at once; the driver releases each stream after its queued work.
        for (cudaStream_t s : streams) quiet(cudaStreamDestroy(s));
        if (done_words) quiet(cudaFreeHost(done_words));
    }

    // New settings for what is read while copies run (fault specs, rank, resident copier).
    void configure(const AccelSettings &settings) {
        fault_pull = settings.fault_pull;
        fault_memop = settings.fault_memop;
        world_rank = settings.world_rank;
        if (resident) resident->configure(resident_settings(settings));
    }
    static ResidentCopier::Settings resident_settings(const AccelSettings &s) {
        ResidentCopier::Settings r;
        r.fault_spec = s.fault_resident;
        r.world_rank = s.world_rank;
        return r;
    }
};

// A completion that fires when an event has been reached.
class EventCompletion final : public Completion {
public:
    explicit EventCompletion(std::shared_ptr<EventRef> ev) : ev_(std::move(ev)) {}
    bool test() override {
        if (done_) return true;
        cudaError_t e = cudaEventQuery(ev_->get());
        if (e == cudaErrorNotReady) return false;
        if (e != cudaSuccess) {
            quiet(e);
            error_ = MPI_ERR_OTHER;
            what_ = "cudaEventQuery on the captured dependency: " + cuda_text(e);
        }
        done_ = true;
        ev_.reset();
        return true;
    }
    int error() const override { return error_; }
    std::string what() const override { return what_; }

private:
    std::shared_ptr<EventRef> ev_;
    bool done_ = false;
    int error_ = MPI_SUCCESS;
    std::string what_;
};

// One asynchronous copy on an internal stream, ordered after its dependencies: by a copy
// engine, or (by_kernel, small copies between memory the stream's device addresses) by
// mpiacc_copy_small, which writes its sequence number into the stream's done word when
// its data is visible, so that the host sees the end without asking the driver.
//
// With pinned (or device) memory on both sides the copy is enqueued at once behind
// cudaStreamWaitEvent. cudaMemcpyAsync with pageable host memory blocks the caller until
// the stream reaches the copy, i.e. until the user's kernel is done: so such a copy is
// enqueued only once test() has seen its dependencies complete, and then blocks only for
// the copy itself.
class CopyCompletion final : public Completion {
public:
    CopyCompletion(std::shared_ptr<DeviceState> device, std::size_t stream_index, void *dst, const void *src,
                   std::size_t len, std::vector<std::shared_ptr<EventRef>> deps,
                   std::vector<std::shared_ptr<void>> keep, bool by_kernel, bool at_once = false,
                   bool by_memop = false)
        : device_(std::move(device)),
          stream_index_(stream_index),
          stream_(device_->streams[stream_index]),
          tracker_(device_->trackers[stream_index].get()),
          dst_(dst),
          src_(src),
          len_(len),
          deps_(std::move(deps)),
          keep_(std::move(keep)),
          bounded_(deps_.empty()),
          by_kernel_(by_kernel),
          at_once_(at_once && bounded_),
          memop_(by_memop) {}
    ~CopyCompletion() override;

    // A small copy that may go to the device's resident copier (CudaBuffer::by_resident,
    // by_resident_host): tried first, while the copier's kernel runs.
    void offer_resident() { resident_offered_ = true; }

    // Enqueue now, or (host_orders) once the dependencies have completed, or (a pull in
    // an open CopyBatch) with the other pulls of the batch; a pull offered to the
    // resident copier goes there if its kernel runs, and otherwise launches it for the
    // pulls after this one. Fails only on an error to report at once.
    int begin(bool host_orders, std::string *why) {
        if (stream_index_ == kPullStream) plan_pull_fault();
        if (resident_offered_ && !host_orders && deps_.empty() && !fault_planned_ && engines_idle()) {
            if (post_resident()) return MPI_SUCCESS;
            int rc = begin_elsewhere(false, why);
            DeviceGuard guard(device_->ordinal, device_->driver.get());
            if (guard.error() == cudaSuccess) device_->resident->launch_if_idle();
            return rc;
        }
        return begin_elsewhere(host_orders, why);
    }

    bool test() override {
        if (finished_) return true;
        if (resident_posted_ && !resident_resolved()) return false;
        if (finished_) return true;
        return test_elsewhere();
    }
    int error() const override { return error_; }
    std::string what() const override { return what_; }

    void wait_bounded() override {
        // A resident copy ends, or is declined, within the kernel's idle time (or, should
        // the kernel fault, the copier's patience with its stream).
        while (resident_posted_ && !resident_resolved()) cpu_relax();
        if (finished_) return;
        wait_elsewhere();
    }

private:
    // Posted to the resident copier: true once the copy is done (finished) or declined
    // (then it goes to a copy engine or a kernel launch, as if never offered).
    bool resident_resolved() {
        switch (device_->resident->poll(resident_command_)) {
            case ResidentCopier::State::PENDING: return false;
            case ResidentCopier::State::DONE:
                resident_posted_ = false;
                finish();
                return true;
            case ResidentCopier::State::DECLINED: break;
        }
        resident_posted_ = false;
        started_ = false;
        count_engine_copy();
        std::string why;
        if (start(&why) != MPI_SUCCESS) finish();
        return true;
    }
    void count_engine_copy() {
        if ((stream_index_ != kPullStream && !resident_offered_) || counted_engine_) return;
        counted_engine_ = true;
        device_->engine_copies.fetch_add(1, std::memory_order_relaxed);
    }
    void uncount_engine_copy() {
        if (!counted_engine_) return;
        counted_engine_ = false;
        device_->engine_copies.fetch_sub(1, std::memory_order_relaxed);
    }
    // No other pull, or copy the resident copier could have taken, of this device is on a
    // copy engine (or waiting in pull_batch) with its end not yet seen: then this one
    // goes alone, and the resident copier is fastest. A copy of a window that finds
    // others in flight goes with them to the copy engines, which overlap them: on two
    // H100s windows of 32 pulls of 64 B-4 KiB ran 13-17% slower where the copier took
    // each pull that found it free.
    bool engines_idle() const { return device_->engine_copies.load(std::memory_order_relaxed) == 0; }
    bool post_resident() {
        std::uint64_t command;
        if (!device_->resident->post(dst_, src_, len_, keep_, &command)) return false;
        resident_command_ = command;
        resident_posted_ = true;
        started_ = true;
        MPIACC_COUNT("cuda.copy.resident");
        if (stream_index_ == kPullStream) MPIACC_COUNT("cuda.copy.resident_pull");
        return true;
    }

    int begin_elsewhere(bool host_orders, std::string *why) {
        count_engine_copy();
        if (!host_orders && may_defer()) {
            defer();
            return MPI_SUCCESS;
        }
        if (!host_orders) return start(why);
        int ready = poll_dependencies();
        if (ready < 0) {
            *why = what_;
            return error_;
        }
        return ready ? start(why) : MPI_SUCCESS;
    }

    bool test_elsewhere() {
        if (deferred_.load(std::memory_order_acquire)) {
            flush_batch();
            if (finished_) return true;
        }
        if (!started_) {
            int ready = poll_dependencies();
            if (ready < 0) return finish();
            if (ready == 0) return false;
            std::string why;
            if (start(&why) != MPI_SUCCESS) return finish();
        }
        if (tracker_->known_done(seq_)) return finish();
        // The done word will tell; the driver is asked (1.3 us) only for a copy that takes
        // long, which is also how a fault that keeps the word unwritten comes to light.
        if (by_kernel_ && clock::now() - started_at_ < kKernelCopyPatience) return false;
        if (memop_written_ && clock::now() - started_at_ < kMemopPatience) return false;
        if (tracker_->recently_pending(seq_)) return false;
        if (!done_) {
            // Waited for at once (no event behind it), yet polled: by the stream, whose
            // later work can only make the answer late, never early.
            cudaError_t e = cudaStreamQuery(stream_);
            if (e == cudaErrorNotReady) return false;
            if (e != cudaSuccess)
                fail("cudaStreamQuery after cudaMemcpyAsync: " + cuda_text(quiet(e)));
            else
                tracker_->note_done(seq_);
            return finish();
        }
        cudaError_t e = cudaEventQuery(done_->get());
        if (e == cudaErrorNotReady) {
            tracker_->note_pending(seq_);
            return false;
        }
        if (e != cudaSuccess) {
            fail("cudaEventQuery after cudaMemcpyAsync: " + cuda_text(quiet(e)));
        } else {
            tracker_->note_done(event_seq_);
            tracker_->probe_tail(event_seq_);
        }
        return finish();
    }

    // With no dependency the copy only waits for earlier copies on our own stream. The
    // event has no blocking-sync flag, so the driver spins: it saw an 8-byte copy end as
    // soon as a tight cudaEventQuery loop did (7.80 against 7.74 us, H200 machine).
    void wait_elsewhere() {
        if (!finished_ && deferred_.load(std::memory_order_acquire)) flush_batch();
        if (finished_ || !started_ || !bounded_ || tracker_->known_done(seq_)) return;
        if (by_kernel_ || memop_written_) {
            // Spin on the done word (8 B device->pinned: 6.7 us to the word against 7.1 by
            // cudaEventSynchronize, H200 machine); past the patience, test() asks the
            // driver too, which ends the wait on a fault as well.
            const auto patience = by_kernel_ ? kKernelCopyPatience : kMemopPatience;
            while (!tracker_->known_done(seq_)) {
                cpu_relax();
                if (clock::now() - started_at_ >= patience) break;
            }
            // A polled memop write has no event, and synchronizing the stream would wait
            // for later copies on it too: test() goes on asking, as for a kernel copy.
            if (by_kernel_ || (memop_ && !at_once_) || tracker_->known_done(seq_)) return;
        }
        if (!done_) {
            // Nothing of ours was in flight when the copy went on the stream, and it
            // waits for nothing else: synchronizing the stream waits for the copy alone.
            cudaError_t e = cudaStreamSynchronize(stream_);
            if (e != cudaSuccess) {
                fail("cudaStreamSynchronize after cudaMemcpyAsync: " + cuda_text(quiet(e)));
                finish();
                return;
            }
            tracker_->note_done(seq_);
            return;
        }
        cudaError_t e = cudaEventSynchronize(done_->get());
        if (e != cudaSuccess) {
            fail("cudaEventSynchronize after cudaMemcpyAsync: " + cuda_text(quiet(e)));
            finish();
            return;
        }
        tracker_->note_done(event_seq_);
    }

    friend class PullBatch;

    // An IPC pull that waits for nothing but its own stream, issued while a CopyBatch is
    // open: it goes with the batch's other pulls.
    bool may_defer() const {
        return stream_index_ == kPullStream && deps_.empty() && !by_kernel_ && !at_once_ && device_->pull_batch &&
               CopyBatch::open();
    }
    void defer();
    void flush_batch();
    // MPIACC_FAULT_MEMOP: whether this memop write, counted in this process, is to be
    // refused.
    static bool memop_fault_planned(const DeviceState &device) {
        if (device.fault_memop.empty()) return false;
        static std::atomic<long> writes{0};
        return fault_planned(device.fault_memop, device.world_rank, ++writes);
    }
    // MPIACC_FAULT_PULL: whether this pull, counted in this process, is to fail.
    void plan_pull_fault() {
        if (device_->fault_pull.empty()) return;
        static std::atomic<long> pulls{0};
        const long n = ++pulls;
        if (!fault_planned(device_->fault_pull, device_->world_rank, n)) return;
        fault_planned_ = true;
        fault_why_ =
            format("IPC pull %ld of rank %d failed to enqueue on purpose (MPIACC_FAULT_PULL)", n, device_->world_rank);
    }

    // 1: all reached, 0: some pending, -1: one failed (error_ set).
    int poll_dependencies() {
        while (!deps_.empty()) {
            cudaError_t e = cudaEventQuery(deps_.back()->get());
            if (e == cudaErrorNotReady) return 0;
            if (e != cudaSuccess) {
                fail("cudaEventQuery on the captured dependency: " + cuda_text(quiet(e)));
                return -1;
            }
            deps_.pop_back();
        }
        return 1;
    }

    int start(std::string *why) {
        if (fault_planned_) {
            fail(fault_why_);
            *why = what_;
            return error_;
        }
        DeviceGuard guard(device_->ordinal, device_->driver.get());
        cudaError_t e = guard.error();
        const char *step = "cudaSetDevice";
        // Once a device's driver has refused a batch, its small copies go to a copy engine.
        if (memop_ && !device_->memop_writes.load(std::memory_order_relaxed)) memop_ = false;
        // A memop write is seen done by its word (test() asks the stream past the
        // patience): no event behind it.
        if (e == cudaSuccess && !at_once_ && !memop_) {
            done_ = device_->events->acquire(why);
            if (!done_) {
                fail(*why);
                return error_;
            }
        }
        std::unique_lock<std::mutex> order(tracker_->enqueue_mutex);
        for (std::size_t i = 0; e == cudaSuccess && i < deps_.size(); ++i) {
            step = "cudaStreamWaitEvent";
            e = quiet(cudaStreamWaitEvent(stream_, deps_[i]->get(), 0));
        }
        if (e == cudaSuccess && memop_) {
            if (!write_words()) {
                // Refused (write_words marked the device): this copy goes to a copy
                // engine with an event, as any other, and like a pageable source only
                // once its dependencies have completed (test() starts it then). The
                // waits just enqueued only repeat what the copy will wait for.
                memop_ = false;
                order.unlock();
                return deps_.empty() ? start(why) : MPI_SUCCESS;
            }
            MPIACC_COUNT("cuda.copy.memop");
        } else if (e == cudaSuccess && by_kernel_) {
            step = "cudaLaunchKernel (mpiacc_copy_small)";
            auto *dst = static_cast<uint4 *>(dst_);
            auto *src = static_cast<const uint4 *>(src_);
            unsigned long long len = len_;
            auto *word = reinterpret_cast<unsigned long long *>(&device_->done_words_dev[stream_index_]);
            unsigned long long seq = tracker_->peek_next();
            void *args[] = {&dst, &src, &len, &word, &seq};
            e = quiet(cudaLaunchKernel(reinterpret_cast<const void *>(device_->copy_kernel), dim3(1),
                                       dim3(kKernelCopyThreads), args, 0, stream_));
            if (e == cudaSuccess) MPIACC_COUNT("cuda.copy.kernel");
        } else if (e == cudaSuccess) {
            step = "cudaMemcpyAsync";
            MPIACC_PROBE("copy.enqueue");
            e = quiet(cudaMemcpyAsync(dst_, src_, len_, cudaMemcpyDefault, stream_));
            MPIACC_PROBE("copy.enqueued");
        }
        if (e == cudaSuccess && done_) {
            step = "cudaEventRecord";
            e = quiet(cudaEventRecord(done_->get(), stream_));
            MPIACC_PROBE("copy.recorded");
        }
        // Numbered only once on the stream: a failed enqueue leaves no gap behind.
        if (e == cudaSuccess) {
            seq_ = event_seq_ = tracker_->next();
            if (done_) tracker_->set_tail(seq_, done_);
        }
        if (e != cudaSuccess) {
            fail(format("%s for a %zu-byte copy on device %d: %s", step, len_, device_->ordinal, cuda_text(e).c_str()));
            *why = what_;
            return error_;
        }
        // Waits are enqueued: the events may go back to their pools.
        deps_.clear();
        started_ = true;
        if (at_once_) MPIACC_COUNT("cuda.copy.waited_at_once");
        if (by_kernel_ || memop_written_) started_at_ = clock::now();
        return MPI_SUCCESS;
    }

    // by_memop: the payload's words, read from host memory now, and the stream's done
    // word behind them, in one cuStreamBatchMemOp. Each write is fenced (the only kind
    // the v2 API has), so the done word is seen after the payload's. False when the
    // driver refuses it, and the device's later copies do not try again.
    bool write_words() {
        CUstreamBatchMemOpParams ops[kMemopMaxBytes / 4 + 1];
        std::memset(ops, 0, sizeof ops);
        unsigned n = 0;
        const auto dst = reinterpret_cast<CUdeviceptr>(dst_);
        const auto *src = static_cast<const unsigned char *>(src_);
        for (std::size_t at = 0; at < len_; ++n) {
            ops[n].writeValue.address = dst + at;
            ops[n].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
            if ((dst + at) % 8 == 0 && len_ - at >= 8) {
                ops[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
                std::memcpy(&ops[n].writeValue.value64, src + at, 8);
                at += 8;
            } else {
                ops[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
                std::memcpy(&ops[n].writeValue.value, src + at, 4);
                at += 4;
            }
        }
        ops[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
        ops[n].writeValue.address = reinterpret_cast<CUdeviceptr>(&device_->done_words_dev[stream_index_]);
        ops[n].writeValue.value64 = tracker_->peek_next();
        ops[n].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
        ++n;
        MPIACC_PROBE("copy.enqueue");
        const CUresult r = memop_fault_planned(*device_)
                               ? CUDA_ERROR_NOT_SUPPORTED
                               : device_->driver->stream_batch_mem_op(reinterpret_cast<CUstream>(stream_), n, ops, 0);
        MPIACC_PROBE("copy.enqueued");
        if (r != CUDA_SUCCESS) {
            MPIACC_COUNT("cuda.copy.memop_refused");
            device_->memop_writes.store(false, std::memory_order_relaxed);
            return false;
        }
        memop_written_ = true;
        return true;
    }

    void fail(const std::string &what) {
        error_ = MPI_ERR_OTHER;
        what_ = what;
    }
    bool finish() {
        uncount_engine_copy();
        finished_ = true;
        done_.reset();
        deps_.clear();
        keep_.clear();
        return true;
    }

    using clock = std::chrono::steady_clock;

    std::shared_ptr<DeviceState> device_;
    std::size_t stream_index_;
    cudaStream_t stream_;
    StreamTracker *tracker_;       // owned by device_
    std::uint64_t seq_ = 0;        // this copy's place on the stream
    std::uint64_t event_seq_ = 0;  // the copy done_ is recorded behind: seq_, or its batch's last
    void *dst_;
    const void *src_;
    std::size_t len_;
    std::vector<std::shared_ptr<EventRef>> deps_;
    std::vector<std::shared_ptr<void>> keep_;  // e.g. the IPC mapping read from
    std::shared_ptr<EventRef> done_;
    const bool bounded_;  // no user or peer dependency: ends within its own running time
    const bool by_kernel_;
    const bool at_once_;              // CopyUse::WAITED_AT_ONCE, bounded: no event behind it
    bool memop_;                      // host words written by stream memory operations
    bool memop_written_ = false;      // the memop write was enqueued: its done word tells
    clock::time_point started_at_{};  // kernel copies and memop writes: when it was enqueued
    bool started_ = false;
    bool finished_ = false;
    std::atomic<bool> deferred_{false};  // held by device_->pull_batch, not yet enqueued
    bool resident_offered_ = false;      // offer_resident()
    bool counted_engine_ = false;        // in device_->engine_copies
    bool resident_posted_ = false;       // on the resident copier's ring, not yet resolved
    std::uint64_t resident_command_ = 0;
    bool fault_planned_ = false;         // MPIACC_FAULT_PULL chose this pull
    std::string fault_why_;
    int error_ = MPI_SUCCESS;
    std::string what_;
};

// The IPC pulls of one device deferred in open CopyBatches, enqueued on its pull stream
// by one cudaMemcpyBatchAsync with one event behind them. On two H100s a batch of 32
// pulls of 256 KiB cost 0.97 us of CPU a copy against 2.4-2.7 us for cudaMemcpyAsync
// each, and ended at 144 GB/s against 70; 8 B and 1 MiB pulls gained alike
// (maint/diag/batch-pull.cu, session 20). The pulls then complete together, which a
// window waits for anyway.
class PullBatch final : public CopyBatch::Holder {
public:
    explicit PullBatch(DeviceState *device) : device_(device) {}

    void add(CopyCompletion *copy) {
        bool full;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            members_.push_back(copy);
            full = members_.size() >= kMaxPulls;
        }
        if (full) flush();
    }
    void remove(CopyCompletion *copy) {
        std::lock_guard<std::mutex> lock(mutex_);
        members_.erase(std::remove(members_.begin(), members_.end(), copy), members_.end());
    }
    void flush() override;

private:
    // Past 32 pulls the CPU cost a copy hardly falls (0.92 us at 32 against 1.15 at 8),
    // and the first pull's receive waits for the whole batch.
    static constexpr std::size_t kMaxPulls = 32;

    // Whether one batch call took the copies; false leaves them to one call each.
    bool enqueue_together(const std::vector<CopyCompletion *> &run, cudaStream_t stream);
    // The copy ends, failed, without having been enqueued.
    static void abandon(CopyCompletion *copy, const std::string &what);
    void fail_all(const std::vector<CopyCompletion *> &run, const std::string &what);

    DeviceState *device_;  // owns this batch
    std::mutex mutex_;
    std::vector<CopyCompletion *> members_;  // in issue order
    bool batch_call_works_ = true;           // until the driver says it has no batch call
    std::vector<void *> dsts_, srcs_;        // scratch for the batch call
    std::vector<std::size_t> sizes_;
};

CopyCompletion::~CopyCompletion() {
    if (deferred_.load(std::memory_order_acquire)) device_->pull_batch->remove(this);
    if (resident_posted_) device_->resident->abandon(resident_command_);
    uncount_engine_copy();
}

void CopyCompletion::defer() {
    deferred_.store(true, std::memory_order_release);
    MPIACC_COUNT("cuda.copy.deferred");
    CopyBatch::hold(device_->pull_batch);
    device_->pull_batch->add(this);
}

void CopyCompletion::flush_batch() { device_->pull_batch->flush(); }

void PullBatch::abandon(CopyCompletion *copy, const std::string &what) {
    copy->fail(what);
    copy->finish();
}

void PullBatch::fail_all(const std::vector<CopyCompletion *> &run, const std::string &what) {
    for (CopyCompletion *c : run) abandon(c, what);
}

bool PullBatch::enqueue_together(const std::vector<CopyCompletion *> &run, cudaStream_t stream) {
#if CUDART_VERSION >= 12080
    if (run.size() < 2 || !batch_call_works_) return false;
    dsts_.clear();
    srcs_.clear();
    sizes_.clear();
    for (const CopyCompletion *c : run) {
        dsts_.push_back(c->dst_);
        srcs_.push_back(const_cast<void *>(c->src_));
        sizes_.push_back(c->len_);
    }
    // Read in stream order, as cudaMemcpyAsync would: after the stream's earlier work.
    cudaMemcpyAttributes attrs{};
    attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    std::size_t attrs_index = 0;
#if CUDART_VERSION >= 13000
    cudaError_t e = quiet(
        cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), run.size(), &attrs, &attrs_index, 1, stream));
#else
    std::size_t fail_index = 0;
    cudaError_t e = quiet(cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), run.size(), &attrs,
                                               &attrs_index, 1, &fail_index, stream));
#endif
    if (e == cudaSuccess) {
        MPIACC_COUNT("cuda.copy.batch");
        return true;
    }
    // An older driver: one call per copy from now on. Any other refusal: one call per
    // copy this time, which names the copy at fault (a copy the batch call had enqueued
    // would only be made twice, which changes no byte).
    if (e == cudaErrorNotSupported || e == cudaErrorCallRequiresNewerDriver) batch_call_works_ = false;
    return false;
#else
    (void)run;
    (void)stream;
    return false;
#endif
}

void PullBatch::flush() {
    std::vector<CopyCompletion *> run;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        run.swap(members_);
    }
    if (run.empty()) return;
    for (CopyCompletion *c : run) c->deferred_.store(false, std::memory_order_release);
    DeviceGuard guard(device_->ordinal, device_->driver.get());
    if (guard.error() != cudaSuccess) {
        fail_all(run, format("cudaSetDevice(%d) for %zu IPC pulls: %s", device_->ordinal, run.size(),
                             cuda_text(guard.error()).c_str()));
        return;
    }
    std::string why;
    std::shared_ptr<EventRef> done = device_->events->acquire(&why);
    if (!done) {
        fail_all(run, why);
        return;
    }
    StreamTracker *tracker = device_->trackers[kPullStream].get();
    cudaStream_t stream = device_->streams[kPullStream];
    std::lock_guard<std::mutex> order(tracker->enqueue_mutex);
    std::vector<CopyCompletion *> enqueued;
    // A planned fault (MPIACC_FAULT_PULL) takes the path of a refused batch call: one call
    // per copy, the faulted one failing alone.
    const bool fault = std::any_of(run.begin(), run.end(), [](const CopyCompletion *c) { return c->fault_planned_; });
    if (!fault && enqueue_together(run, stream)) {
        enqueued = run;
    } else {
        for (CopyCompletion *c : run) {
            if (c->fault_planned_) {
                abandon(c, c->fault_why_);
                continue;
            }
            cudaError_t e = quiet(cudaMemcpyAsync(c->dst_, c->src_, c->len_, cudaMemcpyDefault, stream));
            if (e == cudaSuccess) {
                enqueued.push_back(c);
                continue;
            }
            abandon(c, format("cudaMemcpyAsync for a %zu-byte copy on device %d: %s", c->len_, device_->ordinal,
                              cuda_text(e).c_str()));
        }
    }
    if (enqueued.empty()) return;
    cudaError_t e = quiet(cudaEventRecord(done->get(), stream));
    if (e != cudaSuccess) {
        fail_all(enqueued, format("cudaEventRecord for a %zu-byte copy on device %d: %s", enqueued.back()->len_,
                                  device_->ordinal, cuda_text(e).c_str()));
        return;
    }
    for (CopyCompletion *c : enqueued) c->seq_ = tracker->next();
    const std::uint64_t last = enqueued.back()->seq_;
    tracker->set_tail(last, done);
    for (CopyCompletion *c : enqueued) {
        c->event_seq_ = last;
        c->done_ = done;
        c->deps_.clear();
        c->started_ = true;
    }
}

}  // namespace

// ------------------------------------------------------------------------------ state

struct CudaAccel::State : std::enable_shared_from_this<CudaAccel::State> {
    explicit State(const AccelSettings &settings);
    void reconfigure(const AccelSettings &new_settings);

    bool available() {
        int s = avail.load(std::memory_order_acquire);
        if (s == 0) {
            std::call_once(probe_once, [this] { probe(); });
            s = avail.load(std::memory_order_acquire);
        }
        return s == 1;
    }
    void probe();
    bool query_pointer(const void *addr, PointerInfo *info, std::string *why);
    // Host memory the driver says is pinned, though `pinned` does not know it (the
    // application's cudaMallocHost or cudaHostRegister).
    bool driver_pinned(const void *p);
    std::shared_ptr<DeviceState> device_state(int ordinal, std::string *why);
    bool export_mem_handle(const PointerInfo &info, cudaIpcMemHandle_t *out);
    int capture(void *addr, std::size_t bytes, const BufferAttrs &attrs, std::unique_ptr<DeviceBuffer> *out,
                std::string *why);
    int capture_dependency(DeviceState &device, unsigned pair, const BufferAttrs &attrs, std::shared_ptr<EventRef> *dep,
                           std::string *why);
    int ipc_import(const IpcExport &peer, std::size_t bytes, int device, std::unique_ptr<DeviceBuffer> *out,
                   std::string *why);
    int open_mapping(const IpcExport &peer, const DeviceState &local, std::shared_ptr<IpcMapping> *out,
                     std::string *why);
    std::shared_ptr<EventRef> open_event(const std::uint8_t *handle, int device, std::string *why);
    // Loads the kernels of copy_kernel.cu once: `kernel` (mpiacc_copy_small) and `resident`
    // (mpiacc_resident_copy), both null if they are not built in or did not load.
    void load_kernels();
    // SHARED mode: a peer's staging segment mapped here (pool/shared_memory.h), registered
    // for DMA once per mapping; let go when the mapping goes (its unmap hook) or at shutdown.
    bool pin_peer_segment(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why);
    void unpin_peer_segment(void *base);
    void shutdown();

    // As configure_accels last gave them; read where a decision depends on them.
    AccelSettings settings;
    std::atomic<int> avail{0};                    // 0 not probed, 1 usable, 2 not
    std::atomic<std::uint64_t> contexts_seen{0};  // device_in_use: ordinals < 64 seen active
    std::once_flag probe_once;
    std::string unavailable_why;
    int device_count = 0;
    std::shared_ptr<DriverApi> driver = std::make_shared<DriverApi>();
    std::shared_ptr<PinnedRanges> pinned = std::make_shared<PinnedRanges>();
    // The small-copy kernel, loaded once for every device (a cudaLibrary_t is not tied to
    // a context). Never unloaded: a copy abandoned at MPI_Finalize may still run it, and
    // the driver frees its modules with the contexts.
    std::once_flag kernel_once;
    cudaKernel_t kernel = nullptr;
    cudaKernel_t resident = nullptr;
    std::string kernel_why;  // why there is none, for mpiacc_info

    std::atomic<std::int64_t> &memtype_queries = counter("cuda.memtype.query");
    std::atomic<std::int64_t> &ipc_open = counter("cuda.ipc.open");
    std::atomic<std::int64_t> &ipc_hit = counter("cuda.ipc.hit");
    std::atomic<std::int64_t> &ipc_export = counter("cuda.ipc.export");
    std::atomic<std::int64_t> &streams_created = counter("cuda.stream.created");

    MemtypeCache cache;

    std::mutex mutex;  // everything below
    std::map<int, std::shared_ptr<DeviceState>> devices;
    struct ExportEntry {
        std::uint64_t buffer_id;
        cudaIpcMemHandle_t handle;
    };
    std::map<std::uintptr_t, ExportEntry> exports;
    struct MappingKey {
        std::array<std::uint8_t, sizeof(cudaIpcMemHandle_t)> handle;
        int device;
        bool operator<(const MappingKey &o) const { return std::tie(handle, device) < std::tie(o.handle, o.device); }
    };
    struct MappingEntry {
        std::uint64_t buffer_id;
        std::shared_ptr<IpcMapping> mapping;
        std::uint64_t last_use;
    };
    std::map<MappingKey, MappingEntry> mappings;
    std::uint64_t mapping_clock = 0;
    std::map<std::array<std::uint8_t, sizeof(cudaIpcEventHandle_t)>, std::shared_ptr<ImportedEvent>> imported_events;
    // cudaHostRegister'd peer segments (pinned knows them too: copies from them need no
    // ordering by the host).
    PeerSegmentPins peer_pins{
        [this](void *base, std::size_t bytes, std::string *why) {
            // Portable: whichever device's receive copies out of it. Mapped, as all that
            // `pinned` knows: a resident copier's kernel may read it (DeviceState).
            cudaError_t e = quiet(cudaHostRegister(base, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
            if (e != cudaSuccess) {
                *why =
                    format("cudaHostRegister of a peer's staging segment (%zu bytes) failed: ", bytes) + cuda_text(e);
                return false;
            }
            pinned->add(base, bytes);
            return true;
        },
        [this](void *base) {
            pinned->remove(base);
            quiet(cudaHostUnregister(base));
        },
        counter("cuda.peer_pin"), counter("cuda.peer_unpin")};
};

namespace {

// A captured CUDA region, or a peer's region mapped through IPC.
class CudaBuffer final : public DeviceBuffer {
public:
    CudaBuffer(std::shared_ptr<CudaAccel::State> owner, std::shared_ptr<DeviceState> device, char *ptr,
               std::size_t capacity, const PointerInfo &info, std::shared_ptr<EventRef> dep, unsigned pair,
               std::shared_ptr<IpcMapping> mapping)
        : owner_(std::move(owner)),
          device_(std::move(device)),
          ptr_(ptr),
          capacity_(capacity),
          info_(info),
          dep_(std::move(dep)),
          pair_(pair),
          mapping_(std::move(mapping)) {}

    BufKind kind() const override { return BufKind::CUDA; }
    int device_ordinal() const override { return device_->ordinal; }
    std::size_t capacity() const override { return capacity_; }
    PinnedPool *staging_pool() override { return device_->staging.get(); }
    std::unique_ptr<Completion> dependency() override {
        if (!dep_) return nullptr;
        return std::make_unique<EventCompletion>(dep_);
    }

    int copy_to_host(std::size_t offset, void *dst, std::size_t len, std::unique_ptr<Completion> *done,
                     std::string *why, CopyUse use = CopyUse::POLLED) override {
        if (!in_bounds(offset, len, "copy_to_host", why)) return MPI_ERR_INTERN;
        return copy(*this, dst, ptr_ + offset, len, dst, use, done, why);
    }

    int copy_from_host(std::size_t offset, const void *src, std::size_t len, std::unique_ptr<Completion> *done,
                       std::string *why, CopyUse use = CopyUse::POLLED) override {
        if (!in_bounds(offset, len, "copy_from_host", why)) return MPI_ERR_INTERN;
        return copy(*this, ptr_ + offset, src, len, src, use, done, why);
    }

    int copy_to_device(std::size_t offset, DeviceBuffer &dst, std::size_t dst_offset, std::size_t len,
                       std::unique_ptr<Completion> *done, std::string *why) override {
        auto *target = dynamic_cast<CudaBuffer *>(&dst);
        if (!target) {
            *why = "copy_to_device: the destination is not a CUDA buffer";
            return MPI_ERR_INTERN;
        }
        if (!in_bounds(offset, len, "copy_to_device (source)", why) ||
            !target->in_bounds(dst_offset, len, "copy_to_device (destination)", why))
            return MPI_ERR_INTERN;
        // The destination's device pulls: with an IPC source that is the device the
        // mapping was opened on, and cudaMemcpyAsync routes a peer copy over NVLink.
        // A pull: waited for by its event whatever the caller does next (copy()).
        return target->copy(*this, target->ptr_ + dst_offset, ptr_ + offset, len, nullptr, CopyUse::POLLED, done, why);
    }

    bool pin_host_region(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why) override {
        return owner_->pin_peer_segment(base, bytes, mapping, why);
    }
    // Not with MPIACC_IPC=0, which makes a node's transfers take the path between nodes.
    bool copies_from_peer_segments() const override { return owner_->settings.ipc; }

    bool ipc_export(IpcExport *out) override {
        // Managed memory has no IPC handle, and an imported mapping is not ours to pass on.
        if (mapping_ || info_.kind != MemoryKind::DEVICE || info_.size == 0) return false;
        IpcExport e;
        std::memset(&e, 0, sizeof e);
        cudaIpcMemHandle_t handle;
        if (!owner_->export_mem_handle(info_, &handle)) return false;
        std::memcpy(e.mem_handle, &handle, sizeof handle);
        e.offset = as_addr(ptr_) - info_.base;
        e.buffer_id = info_.buffer_id;
        e.device_pci = device_->pci_location;
        if (dep_) {
            std::shared_ptr<EventRef> shareable = exportable_dependency();
            cudaIpcEventHandle_t ev;
            if (!shareable || !shareable->ipc_handle(&ev)) return false;
            std::memcpy(e.event_handle, &ev, sizeof ev);
            e.has_event = 1;
        }
        *out = e;
        return true;
    }

private:
    // An interprocess event that fires with the captured dependency: the dependency itself
    // when it was captured as one (a send offered for a pull), else one made on first
    // export, which our stream records after waiting on the dependency. (On one H100 the
    // wait and the second record cost 5-13 us of an MPI_Isend with a pending stream.)
    std::shared_ptr<EventRef> exportable_dependency() {
        std::lock_guard<std::mutex> lock(export_mutex_);
        if (ipc_dep_) return ipc_dep_;
        cudaIpcEventHandle_t handle;
        if (dep_->ipc_handle(&handle)) {
            ipc_dep_ = dep_;
            return ipc_dep_;
        }
        std::string why;
        auto ev = device_->ipc_events->acquire(&why);
        if (!ev) return nullptr;
        DeviceGuard guard(device_->ordinal, device_->driver.get());
        cudaStream_t s = device_->streams[std::size_t{pair_} * 2];
        if (guard.error() != cudaSuccess || quiet(cudaStreamWaitEvent(s, dep_->get(), 0)) != cudaSuccess ||
            quiet(cudaEventRecord(ev->get(), s)) != cudaSuccess)
            return nullptr;
        ipc_dep_ = std::move(ev);
        return ipc_dep_;
    }

    bool in_bounds(std::size_t offset, std::size_t len, const char *what, std::string *why) const {
        if (offset <= capacity_ && len <= capacity_ - offset) return true;
        *why =
            format("%s: bytes [%zu, %zu) are outside the %zu-byte CUDA buffer", what, offset, offset + len, capacity_);
        return false;
    }

    // Whether a copy kernel on device `ordinal` reads or writes this region: plain device
    // memory of that device, or a mapping of another process's memory on that device.
    // (Managed memory is left to the copy engines: a kernel touching it could fault
    // pages away from the host while the application uses them.)
    bool kernel_addressable(int ordinal) const {
        if (info_.kind != MemoryKind::DEVICE || info_.ordinal != ordinal) return false;
        return !mapping_ || (mapping_->kernel_ok && mapping_->device == ordinal);
    }

    // Whether a copy of `len` bytes from `src` to `dst`, both device memory, runs as
    // mpiacc_copy_small on this buffer's device: small, 16-byte aligned, and both sides
    // addressable by the kernel. A copy with a host side stays on a copy engine: into
    // pinned memory the kernel took 7.1 us against 6.2 for cudaMemcpyAsync and its event
    // (8 bytes, one H200), as a copy engine issues a host copy in 1.2 us, a kernel in 2.9.
    bool by_kernel(const CudaBuffer &other, void *dst, const void *src, std::size_t len) const {
        if (!device_->copy_kernel || len == 0 ||
            len > std::min(kKernelCopyLimit, owner_->settings.cuda_kernel_copy_max))
            return false;
        if ((as_addr(dst) | as_addr(src)) % 16 != 0) return false;
        return kernel_addressable(device_->ordinal) && other.kernel_addressable(device_->ordinal);
    }

    // Whether the device's resident copier may take a copy of `len` bytes from `src` to
    // `dst`, by size: small, and 16-byte aligned at both ends or short enough to go byte
    // by byte.
    bool resident_size_ok(const void *dst, const void *src, std::size_t len) const {
        if (!device_->resident || len == 0 || len > owner_->settings.cuda_kernel_copy_max) return false;
        if (device_->time_sliced.load(std::memory_order_relaxed)) return false;
        return (as_addr(dst) | as_addr(src)) % 16 == 0 || len <= kResidentUnalignedMax;
    }

    // Whether a peer's region mapped here is one the resident copier on `ordinal` reads.
    bool resident_readable_mapping(int ordinal) const {
        return mapping_ && mapping_->device == ordinal && mapping_->peer_readable && info_.kind == MemoryKind::DEVICE;
    }

    // Whether a pull of `len` bytes from `other`, a peer's region mapped here, into `dst`
    // in this buffer (plain memory of this device) may go to the device's resident copier.
    bool by_resident(const CudaBuffer &other, void *dst, const void *src, std::size_t len) const {
        return resident_size_ok(dst, src, len) && !mapping_ && kernel_addressable(device_->ordinal) &&
               other.resident_readable_mapping(device_->ordinal);
    }

    // Whether a copy of `len` bytes between pinned host memory that State::pinned knows
    // (`host_pinned`) and this buffer (plain memory of this device, or a peer's region
    // mapped here that this device reads) may go to the device's resident copier, the
    // kernel reading or writing the host side at its own address. Staged small messages
    // then skip a copy engine's launch and completion on both sides: the sender's copy
    // out of its device buffer and the receiver's copy in.
    bool by_resident_host(const void *dst, const void *src, bool host_pinned, std::size_t len) const {
        if (!host_pinned || !device_->host_at_own_address || !resident_size_ok(dst, src, len)) return false;
        return mapping_ ? resident_readable_mapping(device_->ordinal) : kernel_addressable(device_->ordinal);
    }

    // Whether a copy of `len` bytes from host memory `src` into `dst`, this buffer's own
    // device memory (not an IPC mapping), goes as stream memory writes of its words
    // (write_words): small, in whole 4-byte words at 4-byte addresses.
    bool by_memop(void *dst, const void *src, const void *host, std::size_t len) const {
        return device_->memop_writes.load(std::memory_order_relaxed) && host == src && !mapping_ && len > 0 &&
               len <= kMemopMaxBytes && len % 4 == 0 && as_addr(dst) % 4 == 0 &&
               kernel_addressable(device_->ordinal);
    }

    // Runs on this buffer's device and stream pair, after both buffers' dependencies.
    // `host` is the side in host memory, if one is.
    int copy(const CudaBuffer &other, void *dst, const void *src, std::size_t len, const void *host, CopyUse use,
             std::unique_ptr<Completion> *done, std::string *why) {
        // A memop write takes its words at the call and never blocks it: no reason to
        // hold it back for a pageable source.
        const bool memop = by_memop(dst, src, host, len);
        // Our staging slots and registered buffers (the common case), for the ordering and
        // for the resident copier; then the driver, for the application's pinned memory.
        const bool host_known_pinned = host && !memop && owner_->pinned->contains(host, len);
        const bool host_orders = host && !memop && !host_known_pinned && !owner_->driver_pinned(host);
        std::vector<std::shared_ptr<EventRef>> deps;
        std::vector<std::shared_ptr<void>> keep;
        auto add = [&](const CudaBuffer &b) {
            if (b.dep_) deps.push_back(b.dep_);
            if (b.mapping_) keep.push_back(b.mapping_);
        };
        add(*this);
        if (&other != this) add(other);
        const bool pull = mapping_ || other.mapping_;
        const std::size_t index =
            pull ? kPullStream : std::size_t{pair_} * 2 + (flip_.fetch_add(1, std::memory_order_relaxed) & 1u);
        // Waited for at once, a copy goes without an event only where synchronizing the
        // stream ends within the copy's own running time: no dependency to wait behind.
        // IPC pulls keep theirs: on two H200s (three interleaved rounds) 8 B D->D read
        // 10.3-10.7 us one way waited by the stream against 9.3-9.9 by the event, where
        // staged copies gained (8 B H->D 7.7-8.7 against 8.7-9.4).
        const bool at_once = use == CopyUse::WAITED_AT_ONCE && deps.empty() && !pull;
        auto op = std::make_unique<CopyCompletion>(device_, index, dst, src, len, std::move(deps), std::move(keep),
                                                   !host && by_kernel(other, dst, src, len), at_once, memop);
        // A payload that goes as memory writes stays so: it needs no kernel, and its words
        // are taken at the call.
        if (!memop &&
            (host ? by_resident_host(dst, src, host_known_pinned, len) : pull && by_resident(other, dst, src, len)))
            op->offer_resident();
        int rc = op->begin(host_orders, why);
        if (rc != MPI_SUCCESS) return rc;
        *done = std::move(op);
        return MPI_SUCCESS;
    }

    std::shared_ptr<CudaAccel::State> owner_;
    std::shared_ptr<DeviceState> device_;
    char *ptr_;
    std::size_t capacity_;
    PointerInfo info_;
    std::shared_ptr<EventRef> dep_;  // the dependency captured at call time (may be null)
    std::mutex export_mutex_;
    std::shared_ptr<EventRef> ipc_dep_;  // dep_ as an interprocess event, once exported
    unsigned pair_;
    std::atomic<unsigned> flip_{0};
    std::shared_ptr<IpcMapping> mapping_;  // set for a peer's region
};

}  // namespace

CudaAccel::State::State(const AccelSettings &initial)
    : settings(initial),
      cache(PointerQuery{
          [this](const void *addr, PointerInfo *info, std::string *why) { return query_pointer(addr, info, why); },
          [this](const void *addr, std::uint64_t *id) {
              if (!driver->pointer_get_attribute) return false;
              unsigned long long v = 0;
              if (driver->pointer_get_attribute(&v, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                                static_cast<CUdeviceptr>(as_addr(addr))) != CUDA_SUCCESS)
                  return false;
              *id = v;
              return true;
          }}) {}

void CudaAccel::State::probe() {
    // Without a driver this returns cudaErrorInsufficientDriver (or NoDevice) quietly.
    int n = 0;
    cudaError_t e = quiet(cudaGetDeviceCount(&n));
    if (e != cudaSuccess) {
        unavailable_why = "cudaGetDeviceCount: " + cuda_text(e);
        avail.store(2, std::memory_order_release);
        return;
    }
    if (n <= 0) {
        unavailable_why = "cudaGetDeviceCount found no CUDA device";
        avail.store(2, std::memory_order_release);
        return;
    }
    device_count = n;
    // Versions name the ABI the PFN types above were written for.
    resolve_entry("cuPointerGetAttributes", 7000, &driver->pointer_get_attributes);
    resolve_entry("cuPointerGetAttribute", 4000, &driver->pointer_get_attribute);
    resolve_entry("cuMemGetAddressRange", 3020, &driver->mem_get_address_range);
    resolve_entry("cuDeviceGet", 2000, &driver->device_get);
    resolve_entry("cuDevicePrimaryCtxGetState", 7000, &driver->primary_ctx_state);
    resolve_entry("cuDeviceGetAttribute", 2000, &driver->device_get_attribute);
    resolve_entry("cuStreamBatchMemOp", 11070, &driver->stream_batch_mem_op);
    avail.store(1, std::memory_order_release);
}

bool CudaAccel::State::query_pointer(const void *addr, PointerInfo *info, std::string *why) {
    memtype_queries.fetch_add(1, std::memory_order_relaxed);
    *info = PointerInfo{};
    const DriverApi &d = *driver;
    if (d.pointer_get_attributes) {
        // The driver call, as UCX and Open MPI use: one call for all four answers, and
        // unlike cudaPointerGetAttributes it never creates a context (which would cost
        // every host-only rank a context on GPU 0).
        unsigned int type = 0, managed = 0;
        int ordinal = -1;
        unsigned long long id = 0;
        CUpointer_attribute names[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_BUFFER_ID};
        void *data[] = {&type, &managed, &ordinal, &id};
        const CUdeviceptr p = static_cast<CUdeviceptr>(as_addr(addr));
        // A failure means no CUDA context knows the address (e.g. none exists yet): host.
        if (d.pointer_get_attributes(4, names, data, p) != CUDA_SUCCESS) return true;
        if (managed)
            info->kind = MemoryKind::MANAGED;
        else if (type == CU_MEMORYTYPE_DEVICE)
            info->kind = MemoryKind::DEVICE;
        else if (type == CU_MEMORYTYPE_HOST)
            info->kind = MemoryKind::HOST_PINNED;
        else
            return true;
        info->ordinal = ordinal;
        info->buffer_id = id;
        if (info->is_cuda() && d.mem_get_address_range) {
            CUdeviceptr base = 0;
            std::size_t size = 0;
            if (d.mem_get_address_range(&base, &size, p) == CUDA_SUCCESS) {
                info->base = static_cast<std::uintptr_t>(base);
                info->size = size;
            }
        }
        return true;
    }
    // No driver entry points: the runtime call, without range or identity (nothing cached).
    cudaPointerAttributes a{};
    cudaError_t e = quiet(cudaPointerGetAttributes(&a, addr));
    if (e != cudaSuccess) {
        *why = "cudaPointerGetAttributes: " + cuda_text(e);
        return false;
    }
    switch (a.type) {
        case cudaMemoryTypeDevice: info->kind = MemoryKind::DEVICE; break;
        case cudaMemoryTypeManaged: info->kind = MemoryKind::MANAGED; break;
        case cudaMemoryTypeHost: info->kind = MemoryKind::HOST_PINNED; break;
        default: return true;
    }
    info->ordinal = a.device;
    return true;
}

bool CudaAccel::State::driver_pinned(const void *p) {
    PointerInfo info;
    std::string why;
    return query_pointer(p, &info, &why) && info.kind == MemoryKind::HOST_PINNED;
}

std::shared_ptr<DeviceState> CudaAccel::State::device_state(int ordinal, std::string *why) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = devices.find(ordinal);
    if (it != devices.end()) return it->second;

    auto state = std::make_shared<DeviceState>();
    state->ordinal = ordinal;
    state->driver = driver;
    DeviceGuard guard(ordinal, driver.get());
    if (guard.error() != cudaSuccess) {
        *why = format("cudaSetDevice(%d): %s", ordinal, cuda_text(guard.error()).c_str());
        return nullptr;
    }
    // The highest priority: a kernel copy's one block then goes to the first SM that frees
    // up, ahead of the blocks of the user's kernels still queued.
    int least_priority = 0, greatest_priority = 0;
    if (quiet(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority)) != cudaSuccess)
        greatest_priority = 0;
    for (unsigned i = 0; i <= kPullStream; ++i) {
        cudaStream_t s = nullptr;
        // Non-blocking: never serialised with work on the legacy default stream (BRIEF S4).
        cudaError_t e = quiet(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest_priority));
        if (e != cudaSuccess) {
            *why = format("cudaStreamCreateWithFlags on device %d: %s", ordinal, cuda_text(e).c_str());
            return nullptr;  // the streams made so far go with `state`
        }
        state->streams.push_back(s);
        state->trackers.push_back(std::make_unique<StreamTracker>());
        streams_created.fetch_add(1, std::memory_order_relaxed);
    }
    // MPIACC_CUDA_KERNEL_COPY_MAX bounds both kernels; 0 leaves every copy to the engines.
    const bool kernel_copies = settings.cuda_kernel_copy_max > 0;
    if (kernel_copies) load_kernels();
    cudaKernel_t kernel = kernel_copies ? this->kernel : nullptr;
    if (resident && kernel_copies) {
        std::string why;  // without it, small pulls go to copy engines as before
        state->resident =
            ResidentCopier::create(ordinal, resident, DeviceState::resident_settings(settings), &why);
        if (!state->resident) {
            MPIACC_COUNT("cuda.resident.unavailable");
            if (settings.verbose > 0) std::fprintf(stderr, "mpiacc: device %d: %s\n", ordinal, why.c_str());
        }
        int same = 0;
        state->host_at_own_address = quiet(cudaDeviceGetAttribute(&same, cudaDevAttrCanUseHostPointerForRegisteredMem,
                                                                  ordinal)) == cudaSuccess &&
                                     same != 0;
#if CUDART_VERSION >= 12040
        int mps = 0;
        state->mps = quiet(cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, ordinal)) == cudaSuccess && mps != 0;
#endif
    }
    bool mem_ops = false;  // 64-bit stream memory operations
    if (driver->device_get_attribute && driver->device_get) {
        CUdevice dev = 0;
        int can = 0;
        mem_ops = driver->device_get(&dev, ordinal) == CUDA_SUCCESS &&
                  driver->device_get_attribute(&can, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev) ==
                      CUDA_SUCCESS &&
                  can != 0;
    }
    const bool memops = mem_ops && driver->stream_batch_mem_op;
    if (kernel || memops) {
        void *words = nullptr, *dev = nullptr;
        const std::size_t bytes = sizeof(std::uint64_t) * state->streams.size();
        if (quiet(cudaHostAlloc(&words, bytes, cudaHostAllocMapped | cudaHostAllocPortable)) == cudaSuccess) {
            if (quiet(cudaHostGetDevicePointer(&dev, words, 0)) == cudaSuccess) {
                std::memset(words, 0, bytes);
                state->done_words = static_cast<std::uint64_t *>(words);
                state->done_words_dev = static_cast<std::uint64_t *>(dev);
                state->copy_kernel = kernel;
                state->memop_writes.store(memops, std::memory_order_relaxed);
                for (std::size_t i = 0; i < state->trackers.size(); ++i)
                    state->trackers[i]->set_done_word(&state->done_words[i]);
            } else {
                quiet(cudaFreeHost(words));
            }
        }
    }
    char bus_id[32] = {};
    std::string pci;
    if (quiet(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, ordinal)) == cudaSuccess) pci = bus_id;
    state->pci_location = pci_location(ordinal);
    int driver_version = 0;
    if (CUDART_VERSION >= 12080 && quiet(cudaDriverGetVersion(&driver_version)) == cudaSuccess &&
        driver_version >= 12080)
        state->pull_batch = std::make_shared<PullBatch>(state.get());
    state->events = std::make_shared<EventPool>(ordinal, false, driver);
    state->ipc_events = std::make_shared<EventPool>(ordinal, true, driver);
    const std::size_t slot = std::max<std::size_t>(settings.slot_size, 4096);
    state->staging = std::make_unique<PinnedPool>(std::make_unique<CudaPinnedAllocator>(ordinal, pci, driver, pinned),
                                                  slot, settings.pool_bytes);
    state->configure(settings);
    devices.emplace(ordinal, state);
    return state;
}

bool CudaAccel::State::export_mem_handle(const PointerInfo &info, cudaIpcMemHandle_t *out) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = exports.find(info.base);
    if (it != exports.end() && it->second.buffer_id == info.buffer_id) {
        *out = it->second.handle;
        return true;
    }
    DeviceGuard guard(info.ordinal, driver.get());
    cudaIpcMemHandle_t handle;
    // Fails for memory without a legacy IPC handle (cudaMallocAsync pools, VMM): the
    // caller then uses the pipeline.
    if (guard.error() != cudaSuccess ||
        quiet(cudaIpcGetMemHandle(&handle, reinterpret_cast<void *>(info.base))) != cudaSuccess)
        return false;
    if (exports.size() >= kMaxExportHandles) exports.clear();
    exports[info.base] = ExportEntry{info.buffer_id, handle};
    ipc_export.fetch_add(1, std::memory_order_relaxed);
    *out = handle;
    return true;
}

int CudaAccel::State::capture(void *addr, std::size_t bytes, const BufferAttrs &attrs,
                              std::unique_ptr<DeviceBuffer> *out, std::string *why) {
    out->reset();
    if (!available()) {
        *why = format("buf %p is a CUDA buffer, but no CUDA device is usable in this process (%s)", addr,
                      unavailable_why.c_str());
        return MPI_ERR_BUFFER;
    }
    if (!addr) {
        if (bytes == 0) return MPI_SUCCESS;  // nothing to move: host path
        *why = format("buf is NULL but the datatype says MPIX_ACC_BUF_CUDA (%zu bytes)", bytes);
        return MPI_ERR_BUFFER;
    }

    PointerInfo info, stale;
    std::string query_why;
    MPIACC_PROBE("capture.resolve");
    const bool resolved = cache.resolve(addr, &info, &stale, &query_why);
    MPIACC_PROBE("capture.resolved");
    if (!resolved) {
        *why = format("buf %p: the CUDA driver could not classify the pointer: %s", addr, query_why.c_str());
        return MPI_ERR_BUFFER;
    }
    if (info.kind == MemoryKind::HOST_PINNED) return MPI_SUCCESS;  // host memory, already pinned
    if (info.kind == MemoryKind::HOST) {
        if (!attrs.kind_given) return MPI_SUCCESS;  // autodetected from a stale range: host after all
        if (stale.is_cuda())
            *why = format("buf %p is in a CUDA allocation that has been freed (it was %zu bytes at %p on device %d)",
                          addr, stale.size, reinterpret_cast<void *>(stale.base), stale.ordinal);
        else
            *why = format(
                "buf %p is not CUDA memory (host memory, or a freed device allocation) but the datatype "
                "says MPIX_ACC_BUF_CUDA",
                addr);
        return MPI_ERR_BUFFER;
    }

    if (info.size != 0) {
        const std::size_t offset = as_addr(addr) - info.base;
        if (bytes > info.size - offset) {
            *why = format("buf %p with %zu bytes runs %zu bytes past the end of its CUDA allocation (%zu bytes at %p)",
                          addr, bytes, bytes - (info.size - offset), info.size, reinterpret_cast<void *>(info.base));
            return MPI_ERR_COUNT;
        }
    }

    const bool managed = info.kind == MemoryKind::MANAGED;
    int device = info.ordinal;
    if (attrs.device_given) {
        const int wanted = static_cast<int>(reinterpret_cast<std::intptr_t>(attrs.device));
        if (wanted < 0 || wanted >= device_count) {
            *why = format("MPIX_ACC_DEVICE %d is not a CUDA device ordinal (this process sees %d device%s)", wanted,
                          device_count, device_count == 1 ? "" : "s");
            return MPI_ERR_ARG;
        }
        if (!managed && wanted != device) {
            *why =
                format("MPIX_ACC_DEVICE says CUDA device %d but buf %p is memory of device %d", wanted, addr, device);
            return MPI_ERR_ARG;
        }
        device = wanted;  // managed memory: the caller's choice of device runs the copies
    }
    if (attrs.stream) {
        auto stream = static_cast<cudaStream_t>(attrs.stream);
        // Asked first: other stream queries on a stream under capture invalidate the
        // user's capture (seen on the H200 machine with CUDA 13).
        cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        if (quiet(cudaStreamIsCapturing(stream, &capturing)) == cudaSuccess &&
            capturing != cudaStreamCaptureStatusNone) {
            *why = format(
                "MPIX_ACC_STREAM %p is being captured into a CUDA graph; MPI-ACC cannot order a transfer "
                "after work that has not been launched",
                attrs.stream);
            return MPI_ERR_ARG;
        }
        int stream_device = -1;
        cudaError_t e = quiet(cudaStreamGetDevice(stream, &stream_device));
        if (e != cudaSuccess) {
            *why = format("MPIX_ACC_STREAM %p is not a valid CUDA stream (cudaStreamGetDevice: %s)", attrs.stream,
                          cuda_text(e).c_str());
            return MPI_ERR_ARG;
        }
        if (stream_device != device && (!managed || attrs.device_given)) {
            *why = format("MPIX_ACC_STREAM %p belongs to CUDA device %d but buf %p is %s device %d", attrs.stream,
                          stream_device, addr, managed ? "given by MPIX_ACC_DEVICE as" : "memory of", device);
            return MPI_ERR_ARG;
        }
        device = stream_device;
    }
    if (attrs.event) {
        cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(attrs.event));
        if (e != cudaSuccess && e != cudaErrorNotReady) {
            *why = format("MPIX_ACC_EVENT %p is not a valid CUDA event (cudaEventQuery: %s)", attrs.event,
                          cuda_text(quiet(e)).c_str());
            return MPI_ERR_ARG;
        }
    }
    if (device < 0 || device >= device_count) {
        // Managed memory the driver ties to no device: use the caller's current one.
        if (quiet(cudaGetDevice(&device)) != cudaSuccess) device = 0;
    }

    auto state = device_state(device, why);
    if (!state) return MPI_ERR_OTHER;
    const unsigned pair = state->next_pair.fetch_add(1, std::memory_order_relaxed) % kStreamPairs;
    std::shared_ptr<EventRef> dep;
    int rc = capture_dependency(*state, pair, attrs, &dep, why);
    if (rc != MPI_SUCCESS) return rc;
    *out = std::make_unique<CudaBuffer>(shared_from_this(), state, static_cast<char *>(addr), bytes, info,
                                        std::move(dep), pair, nullptr);
    return MPI_SUCCESS;
}

// The dependency as it stands now (BRIEF S1): later work the user puts on the stream, or a
// later re-record of the event, does not move it. For a send offered for an IPC pull it is
// an interprocess event, which the envelope carries as it is (exportable_dependency).
int CudaAccel::State::capture_dependency(DeviceState &device, unsigned pair, const BufferAttrs &attrs,
                                         std::shared_ptr<EventRef> *dep, std::string *why) {
    if (!attrs.stream && !attrs.event) return MPI_SUCCESS;
    DeviceGuard guard(device.ordinal, driver.get());
    if (guard.error() != cudaSuccess) {
        *why = format("cudaSetDevice(%d): %s", device.ordinal, cuda_text(guard.error()).c_str());
        return MPI_ERR_OTHER;
    }
    EventPool &pool = attrs.ipc_offer ? *device.ipc_events : *device.events;
    std::shared_ptr<EventRef> marker;
    if (attrs.stream) {
        marker = (attrs.event ? *device.events : pool).acquire(why);
        if (!marker) return MPI_ERR_OTHER;
        cudaError_t e = quiet(cudaEventRecord(marker->get(), static_cast<cudaStream_t>(attrs.stream)));
        if (e != cudaSuccess) {
            *why = format("cudaEventRecord on MPIX_ACC_STREAM %p: %s", attrs.stream, cuda_text(e).c_str());
            return MPI_ERR_OTHER;
        }
        if (!attrs.event) {
            *dep = std::move(marker);
            return MPI_SUCCESS;
        }
    }
    // The user's event is only ever waited on by our stream, never re-recorded by us: a
    // wait captures the event's state at the time it is enqueued.
    cudaStream_t s = device.streams[std::size_t{pair} * 2];
    auto joined = pool.acquire(why);
    if (!joined) return MPI_ERR_OTHER;
    cudaError_t e = quiet(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(attrs.event), 0));
    if (e == cudaSuccess && marker) e = quiet(cudaStreamWaitEvent(s, marker->get(), 0));
    if (e == cudaSuccess) e = quiet(cudaEventRecord(joined->get(), s));
    if (e != cudaSuccess) {
        *why = format("ordering after MPIX_ACC_EVENT %p: %s", attrs.event, cuda_text(e).c_str());
        return MPI_ERR_OTHER;
    }
    *dep = std::move(joined);
    return MPI_SUCCESS;
}

void CudaAccel::State::load_kernels() {
    std::call_once(kernel_once, [this] {
#if MPIACC_HAVE_CUDA_KERNELS
        cudaLibrary_t library = nullptr;
        cudaError_t e =
            quiet(cudaLibraryLoadData(&library, mpiacc_copy_kernel_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0));
        const char *name = "mpiacc_copy_small";
        if (e == cudaSuccess) e = quiet(cudaLibraryGetKernel(&kernel, library, name));
        if (e == cudaSuccess) {
            name = "mpiacc_resident_copy";
            e = quiet(cudaLibraryGetKernel(&resident, library, name));
        }
        if (e != cudaSuccess) {
            kernel = resident = nullptr;
            kernel_why = format("loading %s: %s", name, cuda_text(e).c_str());
        }
#else
        kernel_why = "not built (configure found no nvcc)";
#endif
    });
}

int CudaAccel::State::open_mapping(const IpcExport &peer, const DeviceState &local, std::shared_ptr<IpcMapping> *out,
                                   std::string *why) {
    const int device = local.ordinal;
    cudaIpcMemHandle_t handle;
    std::memcpy(&handle, peer.mem_handle, sizeof handle);
    void *base = nullptr;
    cudaError_t e = quiet(cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess));
    if (e != cudaSuccess) {
        // A stale mapping of a region the peer freed and reallocated can block a new one
        // (cudaErrorAlreadyMapped): close every mapping nothing uses and try once more.
        for (auto it = mappings.begin(); it != mappings.end();)
            it = it->second.mapping.use_count() == 1 ? mappings.erase(it) : std::next(it);
        e = quiet(cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess));
    }
    if (e != cudaSuccess) {
        *why = format("cudaIpcOpenMemHandle (the peer's device at PCI %s, buffer id %llu) on device %d: %s",
                      pci_text(peer.device_pci).c_str(), static_cast<unsigned long long>(peer.buffer_id), device,
                      cuda_text(e).c_str());
        return MPI_ERR_OTHER;
    }
    auto mapping = std::make_shared<IpcMapping>();
    mapping->base = base;
    mapping->device = device;
    mapping->driver = driver;
    if (driver->mem_get_address_range) {
        CUdeviceptr b = 0;
        std::size_t size = 0;
        if (driver->mem_get_address_range(&b, &size, static_cast<CUdeviceptr>(as_addr(base))) == CUDA_SUCCESS)
            mapping->size = size;
    }
    // Kernel copies read only memory of the GPU they run on. Across two H200s on NVLink
    // a one-block kernel pulling 8 B from the peer took 14.5 us one way against 11.5 for
    // the copy engine (session 10), though on one GPU it saves 1.4-1.9 us (session 8).
    // The driver gives an imported mapping the ordinal of the device it was opened on,
    // and ordinals differ between processes: the sender's PCI location tells.
    mapping->kernel_ok = peer.device_pci >= 0 && peer.device_pci == local.pci_location;
    mapping->peer_readable = mapping->kernel_ok;
    for (int d = 0; !mapping->peer_readable && peer.device_pci >= 0 && d < device_count; ++d) {
        int can = 0;
        mapping->peer_readable = d != device && pci_location(d) == peer.device_pci &&
                                 quiet(cudaDeviceCanAccessPeer(&can, device, d)) == cudaSuccess && can != 0;
    }
    ipc_open.fetch_add(1, std::memory_order_relaxed);
    *out = std::move(mapping);
    return MPI_SUCCESS;
}

std::shared_ptr<EventRef> CudaAccel::State::open_event(const std::uint8_t *bytes, int device, std::string *why) {
    std::array<std::uint8_t, sizeof(cudaIpcEventHandle_t)> key;
    std::memcpy(key.data(), bytes, key.size());
    auto it = imported_events.find(key);
    if (it != imported_events.end()) return it->second;
    cudaIpcEventHandle_t handle;
    std::memcpy(&handle, bytes, sizeof handle);
    cudaEvent_t ev = nullptr;
    cudaError_t e = quiet(cudaIpcOpenEventHandle(&ev, handle));
    if (e != cudaSuccess) {
        *why = "cudaIpcOpenEventHandle for the peer's ready event: " + cuda_text(e);
        return nullptr;
    }
    if (imported_events.size() >= kMaxIpcEvents)
        for (auto i = imported_events.begin(); i != imported_events.end();)
            i = i->second.use_count() == 1 ? imported_events.erase(i) : std::next(i);
    auto ref = std::make_shared<ImportedEvent>(ev, device, driver);
    imported_events.emplace(key, ref);
    return ref;
}

int CudaAccel::State::ipc_import(const IpcExport &peer, std::size_t bytes, int device,
                                 std::unique_ptr<DeviceBuffer> *out, std::string *why) {
    out->reset();
    if (!available()) {
        *why = "CUDA IPC: no CUDA device is usable in this process (" + unavailable_why + ")";
        return MPI_ERR_OTHER;
    }
    // Mapped on the device that pulls: the receive buffer's, whose stream issues the copy
    // (copy_to_device); into host memory, the device this thread works with.
    if (device < 0) {
        cudaError_t e = quiet(cudaGetDevice(&device));
        if (e != cudaSuccess) {
            *why = "CUDA IPC: cudaGetDevice: " + cuda_text(e);
            return MPI_ERR_OTHER;
        }
    }
    auto state = device_state(device, why);
    if (!state) return MPI_ERR_OTHER;

    std::shared_ptr<IpcMapping> mapping;
    std::shared_ptr<EventRef> ready;
    {
        std::lock_guard<std::mutex> lock(mutex);
        MappingKey key;
        std::memcpy(key.handle.data(), peer.mem_handle, key.handle.size());
        key.device = device;
        auto it = mappings.find(key);
        if (it != mappings.end() && it->second.buffer_id == peer.buffer_id) {
            ipc_hit.fetch_add(1, std::memory_order_relaxed);
            it->second.last_use = ++mapping_clock;
            mapping = it->second.mapping;
        } else {
            // Same handle, new allocation id: the peer freed and reallocated; the old
            // mapping is closed once nothing uses it.
            if (it != mappings.end()) mappings.erase(it);
            int rc = open_mapping(peer, *state, &mapping, why);
            if (rc != MPI_SUCCESS) return rc;
            if (mapping->kernel_ok && state->resident && !state->mps && !state->time_sliced.exchange(true)) {
                MPIACC_COUNT("cuda.resident.time_sliced");
                if (settings.verbose > 0)
                    std::fprintf(stderr,
                                 "mpiacc: device %d: another process works on it without MPS; small copies go to "
                                 "copy engines, not the resident copier\n",
                                 device);
            }
            if (mappings.size() >= kMaxIpcMappings) {
                auto oldest = std::min_element(mappings.begin(), mappings.end(), [](const auto &a, const auto &b) {
                    return a.second.last_use < b.second.last_use;
                });
                mappings.erase(oldest);
            }
            mappings.emplace(key, MappingEntry{peer.buffer_id, mapping, ++mapping_clock});
        }
        if (peer.has_event) {
            ready = open_event(peer.event_handle, device, why);
            if (!ready) return MPI_ERR_OTHER;
        }
    }
    if (mapping->size != 0 && (peer.offset > mapping->size || bytes > mapping->size - peer.offset)) {
        *why = format("CUDA IPC: the peer's region (offset %llu, %zu bytes) runs past its %zu-byte allocation",
                      static_cast<unsigned long long>(peer.offset), bytes, mapping->size);
        return MPI_ERR_OTHER;
    }
    PointerInfo info;
    info.kind = MemoryKind::DEVICE;
    info.ordinal = device;
    info.base = as_addr(mapping->base);
    info.size = mapping->size;
    const unsigned pair = state->next_pair.fetch_add(1, std::memory_order_relaxed) % kStreamPairs;
    char *region = static_cast<char *>(mapping->base) + peer.offset;
    *out = std::make_unique<CudaBuffer>(shared_from_this(), state, region, bytes, info, std::move(ready), pair,
                                        std::move(mapping));
    return MPI_SUCCESS;
}

bool CudaAccel::State::pin_peer_segment(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why) {
    std::lock_guard<std::mutex> lock(mutex);
    return peer_pins.pin(base, bytes, mapping, why);
}

void CudaAccel::State::unpin_peer_segment(void *base) {
    std::lock_guard<std::mutex> lock(mutex);
    peer_pins.unpin(base);
}

void CudaAccel::State::reconfigure(const AccelSettings &new_settings) {
    std::lock_guard<std::mutex> lock(mutex);
    settings = new_settings;
    for (auto &d : devices) d.second->configure(settings);
}

void CudaAccel::State::shutdown() {
    {
        // Before MPI_Finalize unmaps them (unmap_peer_segments).
        std::lock_guard<std::mutex> lock(mutex);
        peer_pins.unpin_all();
    }
    std::map<int, std::shared_ptr<DeviceState>> old_devices;
    std::map<MappingKey, MappingEntry> old_mappings;
    std::map<std::array<std::uint8_t, sizeof(cudaIpcEventHandle_t)>, std::shared_ptr<ImportedEvent>> old_events;
    {
        std::lock_guard<std::mutex> lock(mutex);
        old_devices.swap(devices);
        old_mappings.swap(mappings);
        old_events.swap(imported_events);
        exports.clear();
    }
    // CUDA calls happen outside the lock, and only for what was created.
    for (auto &d : old_devices)
        for (auto *pool : {d.second->events.get(), d.second->ipc_events.get()})
            if (pool) pool->close();
    old_mappings.clear();
    old_events.clear();
    old_devices.clear();
    cache.clear();
}

// ------------------------------------------------------------------------------ CudaAccel

CudaAccel::CudaAccel(const AccelSettings &settings) : state_(std::make_shared<State>(settings)) {
    std::weak_ptr<State> state = state_;
    unmap_hook_ = add_peer_segment_unmap_hook([state](void *base) {
        if (auto live = state.lock()) live->unpin_peer_segment(base);
    });
}

CudaAccel::~CudaAccel() {
    remove_peer_segment_unmap_hook(unmap_hook_);
    state_->shutdown();
}

void CudaAccel::reconfigure(const AccelSettings &settings) { state_->reconfigure(settings); }

bool CudaAccel::available() { return state_->available(); }

int CudaAccel::capture(void *addr, std::size_t bytes, const BufferAttrs &attrs, std::unique_ptr<DeviceBuffer> *out,
                       std::string *why) {
    return state_->capture(addr, bytes, attrs, out, why);
}

bool CudaAccel::register_host(void *p, std::size_t bytes) {
    if (!p || bytes == 0 || !available()) return false;
    // Portable: pinned for every device's context, whichever device copies from it.
    // Mapped, as all that `pinned` knows: a resident copier's kernel may use it (DeviceState).
    if (quiet(cudaHostRegister(p, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped)) != cudaSuccess)
        return false;
    state_->pinned->add(p, bytes);
    counter("cuda.host.registered")++;
    return true;
}

void CudaAccel::unregister_host(void *p) {
    state_->pinned->remove(p);
    quiet(cudaHostUnregister(p));
}

bool CudaAccel::owns_pointer(const void *addr, int *device_ordinal) {
    if (!addr || !state_->available()) return false;
    PointerInfo info;
    if (!state_->cache.is_cuda(addr, &info)) return false;
    if (device_ordinal) *device_ordinal = info.ordinal;
    return true;
}

KnownHostGranules CudaAccel::known_host_memory() const { return state_->cache.known_host(); }

int CudaAccel::ipc_import(const IpcExport &peer, std::size_t bytes, int device, std::unique_ptr<DeviceBuffer> *out,
                          std::string *why) {
    return state_->ipc_import(peer, bytes, device, out, why);
}

bool CudaAccel::device_in_use() {
    if (!available()) return false;
    int device = 0;
    if (quiet(cudaGetDevice(&device)) != cudaSuccess || device < 0) return false;
    State &s = *state_;
    const std::uint64_t bit = device < 64 ? std::uint64_t{1} << device : 0;
    if (s.contexts_seen.load(std::memory_order_relaxed) & bit) return true;
    const DriverApi &d = *s.driver;
    CUdevice dev = 0;
    unsigned flags = 0;
    int active = 0;
    if (!d.device_get || !d.primary_ctx_state || d.device_get(&dev, device) != CUDA_SUCCESS ||
        d.primary_ctx_state(dev, &flags, &active) != CUDA_SUCCESS || !active)
        return false;
    s.contexts_seen.fetch_or(bit, std::memory_order_relaxed);  // a primary context stays
    return true;
}

void CudaAccel::shutdown() { state_->shutdown(); }

std::string CudaAccel::unavailable_reason() const {
    return state_->avail.load(std::memory_order_acquire) == 2 ? state_->unavailable_why : std::string();
}

std::string CudaAccel::counters() const {
    auto line = [](const char *name, long long v) { return format("%s=%lld\n", name, v); };
    const State &s = *state_;
    std::string out;
    out += line("cuda.available", s.avail.load(std::memory_order_acquire) == 1);
    out += line("cuda.copy.kernel", counter("cuda.copy.kernel").load(std::memory_order_relaxed));
    out += line("cuda.event.created", counter("cuda.event.created").load(std::memory_order_relaxed));
    out += line("cuda.ipc.export", s.ipc_export.load(std::memory_order_relaxed));
    out += line("cuda.ipc.hit", s.ipc_hit.load(std::memory_order_relaxed));
    out += line("cuda.ipc.open", s.ipc_open.load(std::memory_order_relaxed));
    out += line("cuda.memtype.device_hit", static_cast<long long>(s.cache.device_hits()));
    out += line("cuda.memtype.query", s.memtype_queries.load(std::memory_order_relaxed));
    out += line("cuda.peer_pin", counter("cuda.peer_pin").load(std::memory_order_relaxed));
    out += line("cuda.peer_unpin", counter("cuda.peer_unpin").load(std::memory_order_relaxed));
    out += line("cuda.pinned.alloc", counter("cuda.pinned.alloc").load(std::memory_order_relaxed));
    out += line("cuda.stream.created", s.streams_created.load(std::memory_order_relaxed));
    return out;
}

std::unique_ptr<Accel> make_cuda_accel(const AccelSettings &settings) { return std::make_unique<CudaAccel>(settings); }

}  // namespace mpiacc
