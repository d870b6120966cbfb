// cl_icd.h declares the whole dispatch table, deprecated entry points included. Where the
// OpenCL headers are not system headers (an -I prefix, as on the GPU machine) each of
// those is a warning, and --enable-werror fails: they are named on purpose here.
#define CL_USE_DEPRECATED_OPENCL_1_0_APIS
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include "accel/opencl/opencl_accel.h"

#include <CL/cl_icd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "accel/opencl/pack.h"
#include "accel/opencl/reduce.h"
#include "util/error.h"
#include "pool/shared_memory.h"

namespace mpiacc {

using opencl::cl_error_name;
using opencl::EventRef;
using opencl::MemRef;

namespace {

// Copies the pointer-sized word at `address` into *word, or returns false when that
// memory is not mapped. Why not a plain read: OpenCL has no "is this a handle" query,
// and the ICD loader dereferences whatever it is given.
bool read_word(const void *address, const void **word) {
    if (!address || reinterpret_cast<std::uintptr_t>(address) % alignof(void *) != 0) return false;
    iovec local{word, sizeof *word};
    iovec remote{const_cast<void *>(address), sizeof *word};
    ssize_t copied = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (copied == static_cast<ssize_t>(sizeof *word)) return true;
    if (copied < 0 && errno == EFAULT) return false;
    // The syscall is filtered (seccomp) or missing: ask whether the page is mapped. An
    // aligned word never straddles two pages.
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    unsigned char resident = 0;
    const char *page_start = static_cast<const char *>(address) - reinterpret_cast<std::uintptr_t>(address) % page;
    if (mincore(const_cast<char *>(page_start), page, &resident) != 0) return false;
    std::memcpy(word, address, sizeof *word);
    return true;
}

bool context_devices(cl_context context, std::vector<cl_device_id> *devices) {
    cl_uint count = 0;
    if (clGetContextInfo(context, CL_CONTEXT_NUM_DEVICES, sizeof count, &count, nullptr) != CL_SUCCESS || count == 0 ||
        count > 4096)
        return false;
    devices->assign(count, nullptr);
    return clGetContextInfo(context, CL_CONTEXT_DEVICES, count * sizeof(cl_device_id), devices->data(), nullptr) ==
           CL_SUCCESS;
}

std::string platform_name(cl_platform_id platform) {
    char name[256] = {0};
    if (clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name - 1, name, nullptr) != CL_SUCCESS) return "";
    return name;
}

// Polls an OpenCL event; MPI_ERR_OTHER once it ends with a negative status (the command
// failed, or a command it waited for did).
class EventCompletion final : public Completion {
public:
    // `bounded`: a copy on one of our queues that waits for no event (see wait_bounded).
    EventCompletion(EventRef event, std::shared_ptr<opencl::CacheEntry> entry, bool bounded = false)
        : event_(std::move(event)), entry_(std::move(entry)), bounded_(bounded) {}

    bool test() override {
        if (finished_) return true;
        cl_int status = CL_QUEUED;
        cl_int rc = clGetEventInfo(event_.get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
        if (rc != CL_SUCCESS || status < 0) {
            error_ = MPI_ERR_OTHER;
            finished_ = true;
        } else if (status == CL_COMPLETE) {
            finished_ = true;
        }
        return finished_;
    }
    int error() const override { return error_; }
    // Asks the event in a tight loop rather than between progress rounds, which see it
    // done a round late. Bounded by patience too, not only by the copy: our queue is in
    // order, and the caller's promise that nothing else is in flight is all that keeps
    // a command waiting on a user event from sitting ahead of this one.
    void wait_bounded() override {
        if (!bounded_) return;
        const auto until = std::chrono::steady_clock::now() + kWaitPatience;
        while (!test() && std::chrono::steady_clock::now() < until) {
        }
    }

private:
    static constexpr std::chrono::microseconds kWaitPatience{1000};
    EventRef event_;
    // Keeps the queue the command runs on, and the staging pool it may touch, alive.
    std::shared_ptr<opencl::CacheEntry> entry_;
    bool bounded_ = false;
    bool finished_ = false;
    int error_ = MPI_SUCCESS;
};

bool event_complete(cl_event event) {
    cl_int status = CL_QUEUED;
    return clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) == CL_SUCCESS &&
           status == CL_COMPLETE;
}

// A marker on the user's queue: complete once the work enqueued there before it is.
// Flushed, because our copy queues wait on it and OpenCL only promises that for a
// flushed queue.
int mark_user_queue(cl_command_queue queue, EventRef *marker, std::string *why) {
    cl_event event = nullptr;
    cl_int error = clEnqueueMarkerWithWaitList(queue, 0, nullptr, &event);
    if (error != CL_SUCCESS) {
        *why = "MPIX_ACC_COMMAND_QUEUE: enqueueing the dependency marker failed: " + cl_error_name(error);
        return MPI_ERR_OTHER;
    }
    *marker = EventRef::adopt(event);
    clFlush(queue);
    return MPI_SUCCESS;
}

// An out-of-order queue runs a command as soon as its wait list allows, so only an
// in-order one orders a copy after the work already in it.
bool is_in_order(cl_command_queue queue) {
    cl_command_queue_properties properties = 0;
    return clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof properties, &properties, nullptr) == CL_SUCCESS &&
           !(properties & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
}

// cl_mem handles already found to be OpenCL buffers, until their destructor callback
// runs: the next capture of one skips is_opencl_object, whose read of the handle is a
// system call. Nothing else is cached: a handle can come back for a new buffer before
// the old one's callback (NVIDIA), so its context and size, cheap to ask, are asked
// every time (docs/performance.md, 'OpenCL handle checks'). Never destroyed: callbacks
// may run at exit.
class KnownBuffers {
public:
    static KnownBuffers &instance() {
        static KnownBuffers *known = new KnownBuffers;
        return *known;
    }
    bool contains(cl_mem mem) {
        std::lock_guard<std::mutex> lock(mutex_);
        return handles_.count(mem) != 0;
    }
    void add(cl_mem mem) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!handles_.insert(mem).second) return;
        }
        if (clSetMemObjectDestructorCallback(mem, &KnownBuffers::forget, nullptr) != CL_SUCCESS) {
            std::lock_guard<std::mutex> lock(mutex_);
            handles_.erase(mem);
        }
    }

private:
    static void CL_CALLBACK forget(cl_mem mem, void *) {
        KnownBuffers &known = instance();
        std::lock_guard<std::mutex> lock(known.mutex_);
        known.handles_.erase(mem);
    }
    std::mutex mutex_;
    std::unordered_set<cl_mem> handles_;
};

class FinishedCompletion final : public Completion {
public:
    bool test() override { return true; }
};

// A receive bounce lent as a collective's scratch; back to its entry when this dies.
class OpenClHostScratch final : public HostScratch {
public:
    OpenClHostScratch(std::shared_ptr<opencl::CacheEntry> entry, void *data, std::size_t size)
        : entry_(std::move(entry)), data_(data), size_(size) {}
    ~OpenClHostScratch() override { entry_->receive_bounces().release(data_); }
    OpenClHostScratch(const OpenClHostScratch &) = delete;
    OpenClHostScratch &operator=(const OpenClHostScratch &) = delete;
    char *data() const override { return static_cast<char *>(data_); }
    std::size_t size() const override { return size_; }

private:
    std::shared_ptr<opencl::CacheEntry> entry_;
    void *data_;
    std::size_t size_;
};

}  // namespace

OpenClSettings OpenClSettings::from(const AccelSettings &settings) {
    OpenClSettings s;
    s.platform = settings.opencl_platform;
    s.cache_entries = settings.opencl_cache_off ? 0 : opencl::kObjectCacheEntries;
    s.slot_size = settings.slot_size;
    s.pool_bytes = settings.pool_bytes;
    s.share_pool = settings.shared_staging;
    return s;
}

// ------------------------------------------------------------------ OpenClDeviceBuffer

OpenClDeviceBuffer::OpenClDeviceBuffer(std::shared_ptr<opencl::CacheEntry> entry, MemRef mem, std::size_t offset,
                                       std::size_t bytes, EventRef dependency)
    : entry_(std::move(entry)),
      mem_(std::move(mem)),
      region_offset_(offset),
      bytes_(bytes),
      dependency_(std::move(dependency)) {}

OpenClDeviceBuffer::OpenClDeviceBuffer(std::shared_ptr<opencl::CacheEntry> entry, MemRef mem, std::size_t offset,
                                       std::size_t bytes, cl_command_queue queue)
    : OpenClDeviceBuffer(std::move(entry), std::move(mem), offset, bytes, EventRef{}) {
    user_queue_ = queue;
}

// Within a blocking call the caller has enqueued nothing since the call began, so a
// marker taken now orders what follows exactly as one taken at the start would.
int OpenClDeviceBuffer::take_marker(std::string *why) {
    if (dependency_ || !user_queue_) return MPI_SUCCESS;
    return mark_user_queue(user_queue_, &dependency_, why);
}

int OpenClDeviceBuffer::copy_to_host(std::size_t offset, void *dst, std::size_t len, std::unique_ptr<Completion> *done,
                                     std::string *why, CopyUse /*use*/) {
    return enqueue_copy(Direction::TO_HOST, offset, dst, len, done, why);
}

int OpenClDeviceBuffer::copy_from_host(std::size_t offset, const void *src, std::size_t len,
                                       std::unique_ptr<Completion> *done, std::string *why, CopyUse /*use*/) {
    // clEnqueueWriteBuffer takes const void *; the cast only shares enqueue_copy.
    return enqueue_copy(Direction::FROM_HOST, offset, const_cast<void *>(src), len, done, why);
}

int OpenClDeviceBuffer::enqueue_copy(Direction direction, std::size_t offset, void *host, std::size_t len,
                                     std::unique_ptr<Completion> *done, std::string *why) {
    if (offset > bytes_ || len > bytes_ - offset) {
        *why = format("copy of bytes [%zu, %zu) is outside the captured OpenCL region of %zu bytes", offset,
                      offset + len, bytes_);
        return MPI_ERR_COUNT;
    }
    if (len == 0) {  // OpenCL rejects empty copies; ordering still follows the dependency
        *done = dependency();
        if (!*done) *done = std::make_unique<FinishedCompletion>();
        return MPI_SUCCESS;
    }
    const bool on_user_queue = user_queue_ && offset == 0 && len == bytes_;
    if (user_queue_ && !on_user_queue) {
        int rc = take_marker(why);
        if (rc != MPI_SUCCESS) return rc;
    }
    cl_command_queue queue = on_user_queue ? user_queue_ : entry_->next_copy_queue();
    cl_event wait_for = on_user_queue ? nullptr : dependency_.get();
    // A dependency already met orders nothing: a copy waiting on another queue's event
    // costs NVIDIA's OpenCL more than asking the event once.
    if (wait_for && event_complete(wait_for)) wait_for = nullptr;
    cl_uint wait_count = wait_for ? 1 : 0;
    cl_event copied = nullptr;
    cl_int error = CL_SUCCESS;
    if (direction == Direction::TO_HOST)
        error = clEnqueueReadBuffer(queue, mem_.get(), CL_FALSE, region_offset_ + offset, len, host, wait_count,
                                    wait_count ? &wait_for : nullptr, &copied);
    else
        error = clEnqueueWriteBuffer(queue, mem_.get(), CL_FALSE, region_offset_ + offset, len, host, wait_count,
                                     wait_count ? &wait_for : nullptr, &copied);
    if (error != CL_SUCCESS) {
        *why = format("%s of %zu bytes at offset %zu failed: %s",
                      direction == Direction::TO_HOST ? "clEnqueueReadBuffer" : "clEnqueueWriteBuffer", len,
                      region_offset_ + offset, cl_error_name(error).c_str());
        return MPI_ERR_OTHER;
    }
    EventRef event = EventRef::adopt(copied);
    // Without a flush an implementation may hold the command back until the next
    // blocking call, and we never make one.
    clFlush(queue);
    *done = std::make_unique<EventCompletion>(std::move(event), entry_, !on_user_queue && wait_count == 0);
    return MPI_SUCCESS;
}

int OpenClDeviceBuffer::pack_to_host(const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first,
                                     void *dst, std::size_t len, std::unique_ptr<Completion> *done, std::string *why) {
    return enqueue_typed(Direction::TO_HOST, flat, origin, count, first, dst, len, done, why);
}

int OpenClDeviceBuffer::unpack_from_host(const FlatType &flat, std::int64_t origin, std::int64_t count,
                                         std::size_t first, const void *src, std::size_t len,
                                         std::unique_ptr<Completion> *done, std::string *why) {
    return enqueue_typed(Direction::FROM_HOST, flat, origin, count, first, const_cast<void *>(src), len, done, why);
}

// The packed range goes through a scratch cl_mem of its own: released at once, OpenCL
// keeps it until the commands using it have run. The host side's copy waits for nothing
// but the queue's earlier commands; the kernel waits for the dependency.
int OpenClDeviceBuffer::enqueue_typed(Direction direction, const FlatType &flat, std::int64_t origin,
                                      std::int64_t count, std::size_t first, void *host, std::size_t len,
                                      std::unique_ptr<Completion> *done, std::string *why) {
    if (len == 0) {
        *done = dependency();
        if (!*done) *done = std::make_unique<FinishedCompletion>();
        return MPI_SUCCESS;
    }
    int rc = take_marker(why);
    if (rc != MPI_SUCCESS) return rc;
    cl_int error = CL_SUCCESS;
    MemRef scratch = MemRef::adopt(clCreateBuffer(entry_->context(), CL_MEM_READ_WRITE, len, nullptr, &error));
    if (error != CL_SUCCESS || !scratch) {
        *why = format("clCreateBuffer of %zu bytes to pack a datatype through failed: %s", len,
                      cl_error_name(error).c_str());
        return error == CL_MEM_OBJECT_ALLOCATION_FAILURE || error == CL_OUT_OF_RESOURCES ? MPI_ERR_NO_MEM
                                                                                         : MPI_ERR_OTHER;
    }
    cl_command_queue queue = entry_->next_copy_queue();
    cl_event wait_for = dependency_.get();
    const cl_uint wait_count = wait_for ? 1 : 0;
    const std::int64_t at = static_cast<std::int64_t>(region_offset_) + origin;
    const auto first64 = static_cast<std::int64_t>(first);
    const auto len64 = static_cast<std::int64_t>(len);
    cl_event finished = nullptr;
    if (direction == Direction::TO_HOST) {
        rc = opencl::enqueue_pack(*entry_, queue, flat, mem_.get(), at, count, first64, len64, scratch.get(), 0,
                                  wait_count, wait_count ? &wait_for : nullptr, nullptr, why);
        if (rc != MPI_SUCCESS) return rc;
        error = clEnqueueReadBuffer(queue, scratch.get(), CL_FALSE, 0, len, host, 0, nullptr, &finished);
    } else {
        error = clEnqueueWriteBuffer(queue, scratch.get(), CL_FALSE, 0, len, host, 0, nullptr, nullptr);
        if (error == CL_SUCCESS) {
            rc = opencl::enqueue_unpack(*entry_, queue, flat, scratch.get(), 0, len64, mem_.get(), at, count, first64,
                                        wait_count, wait_count ? &wait_for : nullptr, &finished, why);
            if (rc != MPI_SUCCESS) return rc;
        }
    }
    if (error != CL_SUCCESS) {
        *why = format("%s of %zu packed bytes failed: %s",
                      direction == Direction::TO_HOST ? "clEnqueueReadBuffer" : "clEnqueueWriteBuffer", len,
                      cl_error_name(error).c_str());
        return MPI_ERR_OTHER;
    }
    clFlush(queue);
    *done = std::make_unique<EventCompletion>(EventRef::adopt(finished), entry_, wait_count == 0);
    return MPI_SUCCESS;
}

int OpenClDeviceBuffer::reduce_local(DeviceBuffer &in_buffer, const ReduceSpec &spec, std::int64_t count,
                                     std::string *why) {
    auto *in = dynamic_cast<OpenClDeviceBuffer *>(&in_buffer);
    if (!in) {
        *why = "inbuf and inoutbuf must both be OpenCL buffers";
        return MPI_ERR_BUFFER;
    }
    if (in->entry_->context() != entry_->context()) {
        *why = "inbuf and inoutbuf are cl_mem objects of different OpenCL contexts";
        return MPI_ERR_BUFFER;
    }
    const std::size_t bytes = static_cast<std::size_t>(count) * spec.extent;
    if (count < 0 || bytes > bytes_ || bytes > in->bytes_) {
        *why = format("%lld elements of %zu bytes are outside the captured OpenCL regions",
                      static_cast<long long>(count), spec.extent);
        return MPI_ERR_COUNT;
    }
    if (count == 0) return MPI_SUCCESS;
    int rc = take_marker(why);
    if (rc == MPI_SUCCESS) rc = in->take_marker(why);
    if (rc != MPI_SUCCESS) return rc;
    cl_event wait[2];
    cl_uint nwait = 0;
    if (dependency_) wait[nwait++] = dependency_.get();
    if (in->dependency_) wait[nwait++] = in->dependency_.get();
    cl_command_queue queue = entry_->next_copy_queue();
    cl_event finished = nullptr;
    rc = opencl::enqueue_reduce(*entry_, queue, spec, in->mem_.get(), in->region_offset_, mem_.get(), region_offset_,
                                count, nwait, nwait ? wait : nullptr, &finished, why);
    if (rc != MPI_SUCCESS) return rc;
    EventRef event = EventRef::adopt(finished);
    clFlush(queue);
    cl_int error = clWaitForEvents(1, &finished);
    cl_int status = CL_COMPLETE;
    if (error == CL_SUCCESS)
        error = clGetEventInfo(finished, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
    if (error != CL_SUCCESS || status < 0) {
        *why = format("%s on %s: the kernel failed: %s", spec.op_name.c_str(), spec.type_name.c_str(),
                      cl_error_name(error != CL_SUCCESS ? error : status).c_str());
        return MPI_ERR_OTHER;
    }
    return MPI_SUCCESS;
}

std::unique_ptr<HostScratch> OpenClDeviceBuffer::acquire_host_scratch(std::size_t bytes) {
    constexpr std::size_t kPage = 4096;
    if (bytes > SIZE_MAX - kPage) return nullptr;
    const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
    void *data = entry_->receive_bounces().acquire_for_scratch(rounded);
    if (!data) return nullptr;
    return std::make_unique<OpenClHostScratch>(entry_, data, rounded);
}

std::unique_ptr<Completion> OpenClDeviceBuffer::dependency() {
    std::string why;
    if (take_marker(&why) != MPI_SUCCESS) return nullptr;  // the next copy reports it
    if (!dependency_) return nullptr;
    return std::make_unique<EventCompletion>(EventRef::retain(dependency_.get()), entry_);
}

// ------------------------------------------------------------------ OpenClAccel

OpenClAccel::OpenClAccel(OpenClSettings settings) : settings_(std::move(settings)) {}

void OpenClAccel::reconfigure(const AccelSettings &settings) {
    std::lock_guard<std::mutex> lock(settings_mutex_);
    if (!settings_fixed_) settings_ = OpenClSettings::from(settings);
}

OpenClAccel::~OpenClAccel() {
    shutdown();
    if (unmap_hook_) remove_peer_segment_unmap_hook(unmap_hook_);
}

void OpenClAccel::initialise() {
    std::call_once(initialise_once_, [this] {
        {
            std::lock_guard<std::mutex> lock(settings_mutex_);
            settings_fixed_ = true;
        }
        scan_platforms();
        opencl::EntrySettings entry_settings;
        entry_settings.slot_size = settings_.slot_size;
        entry_settings.pool_bytes = settings_.pool_bytes;
        entry_settings.receive_bounce_bytes = settings_.receive_bounce_bytes;
        entry_settings.share_pool = settings_.share_pool;
        cache_ = std::make_unique<opencl::ObjectCache>(
            settings_.cache_entries > 0 ? static_cast<std::size_t>(settings_.cache_entries) : 0, entry_settings);
        opencl::ObjectCache *cache = cache_.get();
        unmap_hook_ = add_peer_segment_unmap_hook([cache](void *base) { cache->unpin_peer_segment(base); });
        initialised_.store(true, std::memory_order_release);
    });
}

void OpenClAccel::scan_platforms() {
    cl_uint count = 0;
    // With no ICD registered the loader answers CL_PLATFORM_NOT_FOUND_KHR.
    if (clGetPlatformIDs(0, nullptr, &count) != CL_SUCCESS || count == 0) return;
    std::vector<cl_platform_id> platforms(count);
    if (clGetPlatformIDs(count, platforms.data(), nullptr) != CL_SUCCESS) return;
    platforms_ = platforms;
    for (cl_platform_id platform : platforms) {
        DispatchTable known{};
        const std::size_t entry_at = offsetof(cl_icd_dispatch, clGetMemObjectInfo);
        if (read_word(platform, &known.table) &&
            read_word(static_cast<const char *>(known.table) + entry_at, &known.get_mem_object_info))
            dispatch_tables_.push_back(known);
        // The knob picks what we report; buffers of every platform are still accepted.
        if (!settings_.platform.empty() && platform_name(platform).find(settings_.platform) == std::string::npos)
            continue;
        cl_uint devices = 0;
        if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &devices) == CL_SUCCESS && devices > 0)
            available_ = true;
    }
}

bool OpenClAccel::available() {
    initialise();
    return available_;
}

// A command queue handed in before skips the safe read of its handle, a system call that
// each blocking send and receive of a cl_mem would otherwise pay on its queue, a good
// part of a small message (docs/performance.md, 'OpenCL handle checks'). OpenCL tells
// nobody when a queue is released, so the handle is still looked at: its first word is
// read in place and must be the dispatch table it held when it passed, else the full
// check runs again (memory reused for another object or for host data gets MPI_ERR_ARG
// as before). What this gives up is the case of a released queue whose memory was also
// unmapped, which now faults in the read instead of failing the check; using a released
// queue is undefined in OpenCL itself. The queries resolve_context_and_device makes next
// still run.
bool OpenClAccel::is_opencl_queue(cl_command_queue queue) const {
    const void *handle = queue;
    {
        std::lock_guard<std::mutex> lock(known_queues_mutex_);
        auto it = known_queues_.find(handle);
        if (it != known_queues_.end() && *static_cast<const void *const *>(handle) == it->second) return true;
    }
    if (!is_opencl_object(handle)) return false;
    std::lock_guard<std::mutex> lock(known_queues_mutex_);
    if (known_queues_.size() >= kKnownQueues) known_queues_.clear();
    known_queues_[handle] = *static_cast<const void *const *>(handle);
    return true;
}

bool OpenClAccel::is_opencl_object(const void *handle) const {
    const void *table = nullptr;
    if (!read_word(handle, &table) || !table) return false;
    if (std::any_of(dispatch_tables_.begin(), dispatch_tables_.end(),
                    [table](const DispatchTable &known) { return known.table == table; }))
        return true;
    const unsigned learned = std::min<unsigned>(learned_count_.load(std::memory_order_acquire), kLearnedTables);
    for (unsigned i = 0; i < learned; ++i)
        if (learned_tables_[i].load(std::memory_order_relaxed) == table) return true;
    // A vendor may keep one table per object type; all of them lead to its functions.
    const void *get_mem_object_info = nullptr;
    if (!read_word(static_cast<const char *>(table) + offsetof(cl_icd_dispatch, clGetMemObjectInfo),
                   &get_mem_object_info))
        return false;
    if (!std::any_of(dispatch_tables_.begin(), dispatch_tables_.end(),
                     [get_mem_object_info](const DispatchTable &known) {
                         return known.get_mem_object_info == get_mem_object_info;
                     }))
        return false;
    // Remembered, so the next object of this type costs one read (a read is a system
    // call). Tables are the vendor's static data.
    std::lock_guard<std::mutex> lock(learn_mutex_);
    const unsigned n = learned_count_.load(std::memory_order_relaxed);
    bool known = false;
    for (unsigned i = 0; i < n; ++i) known = known || learned_tables_[i].load(std::memory_order_relaxed) == table;
    if (!known && n < kLearnedTables) {
        learned_tables_[n].store(table, std::memory_order_relaxed);
        learned_count_.store(n + 1, std::memory_order_release);
    }
    return true;
}

// PoCL 3.1 lists the parent device in CL_CONTEXT_DEVICES of a context made from
// sub-devices, while CL_QUEUE_DEVICE of a queue there names the sub-device; so a device
// belongs to the context when it or one of its ancestors is listed.
bool OpenClAccel::device_in_context(cl_device_id device, const std::vector<cl_device_id> &devices) const {
    for (int depth = 0; device && depth < 8; ++depth) {
        if (std::find(devices.begin(), devices.end(), device) != devices.end()) return true;
        // A real device names an installed platform; other objects read as a device
        // (PoCL does not check types) do not.
        cl_platform_id platform = nullptr;
        cl_device_id parent = nullptr;
        if (!is_opencl_object(device) ||
            clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof(cl_platform_id), &platform, nullptr) != CL_SUCCESS ||
            std::find(platforms_.begin(), platforms_.end(), platform) == platforms_.end() ||
            clGetDeviceInfo(device, CL_DEVICE_PARENT_DEVICE, sizeof(cl_device_id), &parent, nullptr) != CL_SUCCESS)
            return false;
        device = parent;
    }
    return false;
}

// PoCL 3.1 answers clGet*Info for any of its objects whatever the type (a queue passed as
// a cl_mem "succeeds"), so each inspection also checks a property only the right kind of
// object can have.
int OpenClAccel::inspect_mem(cl_mem mem, cl_context *context, std::size_t *size, std::string *why) const {
    if (!mem) {
        *why = "buf: the cl_mem is NULL";
        return MPI_ERR_BUFFER;
    }
    KnownBuffers &known = KnownBuffers::instance();
    const bool seen = known.contains(mem);
    if (!seen && !is_opencl_object(mem)) {
        *why = format("buf: %p is not a cl_mem (not an OpenCL object; host memory needs MPIX_ACC_BUF_HOST)",
                      static_cast<void *>(mem));
        return MPI_ERR_BUFFER;
    }
    // A known handle is a live buffer (its destructor callback has not run): its type
    // cannot have changed. Its context and size are asked again (see KnownBuffers).
    cl_mem_object_type type = CL_MEM_OBJECT_BUFFER;
    cl_int error = seen ? CL_SUCCESS : clGetMemObjectInfo(mem, CL_MEM_TYPE, sizeof type, &type, nullptr);
    if (error == CL_SUCCESS) error = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof(cl_context), context, nullptr);
    if (error == CL_SUCCESS) error = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof *size, size, nullptr);
    if (error != CL_SUCCESS) {
        *why = format("buf: %p is not a valid cl_mem (clGetMemObjectInfo: %s)", static_cast<void *>(mem),
                      cl_error_name(error).c_str());
        return MPI_ERR_BUFFER;
    }
    if (type != CL_MEM_OBJECT_BUFFER) {
        *why = format(
            "buf: %p is not an OpenCL buffer (CL_MEM_TYPE 0x%x; images, pipes and other cl_* "
            "handles cannot be sent)",
            static_cast<void *>(mem), static_cast<unsigned>(type));
        return MPI_ERR_BUFFER;
    }
    if (!seen) known.add(mem);
    return MPI_SUCCESS;
}

// `mem_context` is the (already validated) context of the cl_mem: a handle equal to it
// needs no further check, which keeps the common case to one safe read per handle.
int OpenClAccel::resolve_context_and_device(const BufferAttrs &attrs, cl_context mem_context, cl_context *context,
                                            cl_device_id *device, const char **source, std::string *why) const {
    std::vector<cl_device_id> devices;
    if (attrs.queue) {
        *source = "MPIX_ACC_COMMAND_QUEUE";
        auto queue = static_cast<cl_command_queue>(attrs.queue);
        if (!is_opencl_queue(queue)) {
            *why = format("MPIX_ACC_COMMAND_QUEUE: %p is not a cl_command_queue (not an OpenCL object)", attrs.queue);
            return MPI_ERR_ARG;
        }
        cl_int error = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof(cl_context), context, nullptr);
        if (error == CL_SUCCESS)
            error = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof(cl_device_id), device, nullptr);
        if (error != CL_SUCCESS) {
            *why = format("MPIX_ACC_COMMAND_QUEUE: %p is not a valid cl_command_queue (clGetCommandQueueInfo: %s)",
                          attrs.queue, cl_error_name(error).c_str());
            return MPI_ERR_ARG;
        }
        // A real queue's device is one of its context's devices; another object read
        // as a queue gives pointers that fail this.
        if ((*context != mem_context && !is_opencl_object(*context)) || !context_devices(*context, &devices) ||
            !device_in_context(*device, devices)) {
            *why = format("MPIX_ACC_COMMAND_QUEUE: %p is not a valid cl_command_queue", attrs.queue);
            return MPI_ERR_ARG;
        }
        if (attrs.context && attrs.context != static_cast<void *>(*context)) {
            *why = "MPIX_ACC_CONTEXT: differs from the cl_context of MPIX_ACC_COMMAND_QUEUE";
            return MPI_ERR_ARG;
        }
        if (attrs.device_given && attrs.device != static_cast<void *>(*device)) {
            *why = "MPIX_ACC_DEVICE: differs from the cl_device_id of MPIX_ACC_COMMAND_QUEUE";
            return MPI_ERR_ARG;
        }
        return MPI_SUCCESS;
    }
    if (!attrs.context) {
        *why =
            "MPIX_ACC_COMMAND_QUEUE: an OpenCL buffer needs a command queue, or MPIX_ACC_CONTEXT (with "
            "MPIX_ACC_DEVICE when the context has several devices); neither was set";
        return MPI_ERR_ARG;
    }
    *source = "MPIX_ACC_CONTEXT";
    *context = static_cast<cl_context>(attrs.context);
    if ((*context != mem_context && !is_opencl_object(*context)) || !context_devices(*context, &devices)) {
        *why = format("MPIX_ACC_CONTEXT: %p is not a valid cl_context", attrs.context);
        return MPI_ERR_ARG;
    }
    if (attrs.device_given || attrs.device) {
        *device = static_cast<cl_device_id>(attrs.device);
        if (!device_in_context(*device, devices)) {
            *why = format("MPIX_ACC_DEVICE: %p is not a device of MPIX_ACC_CONTEXT", attrs.device);
            return MPI_ERR_ARG;
        }
        return MPI_SUCCESS;
    }
    if (devices.size() != 1) {
        *why = format(
            "MPIX_ACC_DEVICE: MPIX_ACC_CONTEXT has %zu devices; set MPIX_ACC_DEVICE or "
            "MPIX_ACC_COMMAND_QUEUE to say which one",
            devices.size());
        return MPI_ERR_ARG;
    }
    *device = devices[0];
    return MPI_SUCCESS;
}

// The dependency is fixed when the call is made: work the user enqueues later does not
// delay the transfer, and the user may release the event or queue at once.
int OpenClAccel::capture_dependency(const BufferAttrs &attrs, cl_context context, const char *source,
                                    EventRef *dependency, std::string *why) const {
    if (attrs.event) {
        auto event = static_cast<cl_event>(attrs.event);
        cl_command_type command = 0;
        cl_context event_context = nullptr;
        cl_command_queue event_queue = nullptr;
        if (!is_opencl_object(event)) {
            *why = format("MPIX_ACC_EVENT: %p is not a cl_event (not an OpenCL object)", attrs.event);
            return MPI_ERR_ARG;
        }
        cl_int error = clGetEventInfo(event, CL_EVENT_COMMAND_TYPE, sizeof command, &command, nullptr);
        if (error == CL_SUCCESS)
            error = clGetEventInfo(event, CL_EVENT_CONTEXT, sizeof(cl_context), &event_context, nullptr);
        if (error == CL_SUCCESS)
            error = clGetEventInfo(event, CL_EVENT_COMMAND_QUEUE, sizeof(cl_command_queue), &event_queue, nullptr);
        if (error != CL_SUCCESS) {
            *why = format("MPIX_ACC_EVENT: %p is not a valid cl_event (clGetEventInfo: %s)", attrs.event,
                          cl_error_name(error).c_str());
            return MPI_ERR_ARG;
        }
        // Every command type, core or extension, is at least CL_COMMAND_NDRANGE_KERNEL;
        // other objects read as events show small numbers there on PoCL.
        if (command < CL_COMMAND_NDRANGE_KERNEL) {
            *why = format("MPIX_ACC_EVENT: %p is not a cl_event", attrs.event);
            return MPI_ERR_ARG;
        }
        if (event_context != context) {
            *why = format("MPIX_ACC_EVENT: cl_event belongs to a different cl_context than %s", source);
            return MPI_ERR_ARG;
        }
        // Our copy queues wait on it; OpenCL only promises that when its queue was flushed.
        if (event_queue) clFlush(event_queue);
        *dependency = EventRef::retain(event);
        return MPI_SUCCESS;
    }
    if (attrs.queue) return mark_user_queue(static_cast<cl_command_queue>(attrs.queue), dependency, why);
    return MPI_SUCCESS;
}

// Error classes: MPI_ERR_BUFFER for a NULL or invalid cl_mem, or one of another context;
// MPI_ERR_ARG for a missing or invalid queue, context, device or event and an offset past
// the end; MPI_ERR_COUNT when offset + bytes does not fit; MPI_ERR_OTHER when OpenCL
// fails to make the internal objects.
int OpenClAccel::capture(void *addr, std::size_t bytes, const BufferAttrs &attrs, std::unique_ptr<DeviceBuffer> *out,
                         std::string *why) {
    initialise();
    if (dispatch_tables_.empty()) {
        *why = "buffer: no OpenCL platform is installed, so it cannot be a cl_mem";
        return MPI_ERR_BUFFER;
    }
    auto mem = static_cast<cl_mem>(addr);
    cl_context mem_context = nullptr;
    std::size_t mem_size = 0;
    int rc = inspect_mem(mem, &mem_context, &mem_size, why);
    if (rc != MPI_SUCCESS) return rc;

    cl_context user_context = nullptr;
    cl_device_id user_device = nullptr;
    const char *source = "";
    rc = resolve_context_and_device(attrs, mem_context, &user_context, &user_device, &source, why);
    if (rc != MPI_SUCCESS) return rc;
    if (mem_context != user_context) {
        *why = format("buffer: cl_mem belongs to a different cl_context than %s", source);
        return MPI_ERR_BUFFER;
    }
    if (attrs.offset > mem_size) {
        *why = format("MPIX_ACC_OFFSET: %zu is past the end of the cl_mem (%zu bytes)", attrs.offset, mem_size);
        return MPI_ERR_ARG;
    }
    if (bytes > mem_size - attrs.offset) {
        *why = format("count: the message needs %zu bytes from MPIX_ACC_OFFSET %zu, but the cl_mem holds %zu bytes",
                      bytes, attrs.offset, mem_size);
        return MPI_ERR_COUNT;
    }

    if ((attrs.within_call || attrs.copies_in_call) && attrs.queue && !attrs.event &&
        is_in_order(static_cast<cl_command_queue>(attrs.queue))) {
        std::shared_ptr<opencl::CacheEntry> entry = cache_->acquire(user_context, user_device, why);
        if (!entry) return MPI_ERR_OTHER;
        auto buffer = std::make_unique<OpenClDeviceBuffer>(std::move(entry), MemRef::retain(mem), attrs.offset, bytes,
                                                           static_cast<cl_command_queue>(attrs.queue));
        if (attrs.within_call) buffer->mark_blocking_call();
        *out = std::move(buffer);
        return MPI_SUCCESS;
    }

    EventRef dependency;
    rc = capture_dependency(attrs, user_context, source, &dependency, why);
    if (rc != MPI_SUCCESS) return rc;

    std::shared_ptr<opencl::CacheEntry> entry = cache_->acquire(user_context, user_device, why);
    if (!entry) return MPI_ERR_OTHER;
    auto buffer = std::make_unique<OpenClDeviceBuffer>(std::move(entry), MemRef::retain(mem), attrs.offset, bytes,
                                                       std::move(dependency));
    if (attrs.within_call) buffer->mark_blocking_call();
    *out = std::move(buffer);
    return MPI_SUCCESS;
}

void OpenClAccel::shutdown() {
    if (initialised_.load(std::memory_order_acquire)) cache_->clear();
}

std::size_t OpenClAccel::sweep() {
    if (!initialised_.load(std::memory_order_acquire)) return 0;
    return cache_->sweep();
}

std::size_t OpenClAccel::cached_entries() const {
    if (!initialised_.load(std::memory_order_acquire)) return 0;
    return cache_->size();
}

std::unique_ptr<Accel> make_opencl_accel(const AccelSettings &settings) {
    return std::make_unique<OpenClAccel>(OpenClSettings::from(settings));
}

}  // namespace mpiacc
