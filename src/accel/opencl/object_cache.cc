// Why clCreateCommandQueue is still called: OpenCL 1.x platforms have no
// clCreateCommandQueueWithProperties, and the loader would jump through a null entry.
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include "accel/opencl/object_cache.h"

#include <CL/cl_ext.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {
namespace opencl {

namespace {

// cl_nv_device_attribute_query; not every cl_ext.h names them.
constexpr cl_device_info kPciBusIdNv = 0x4008;
constexpr cl_device_info kPciSlotIdNv = 0x4009;
constexpr cl_device_info kPciDomainIdNv = 0x400A;

std::string device_info_text(cl_device_id device, cl_device_info what) {
    std::size_t size = 0;
    if (clGetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
    std::string text(size, '\0');
    if (clGetDeviceInfo(device, what, size, &text[0], nullptr) != CL_SUCCESS) return "";
    text.resize(std::strlen(text.c_str()));
    return text;
}

bool has_extension(const std::string &extensions, const char *name) {
    std::size_t at = extensions.find(name);
    std::size_t len = std::strlen(name);
    while (at != std::string::npos) {
        bool starts = at == 0 || extensions[at - 1] == ' ';
        bool ends = at + len == extensions.size() || extensions[at + len] == ' ';
        if (starts && ends) return true;
        at = extensions.find(name, at + 1);
    }
    return false;
}

// Major version of the device's platform ("OpenCL 3.0 ..."), 1 when unknown.
int platform_major_version(cl_device_id device) {
    cl_platform_id platform = nullptr;
    if (clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof(cl_platform_id), &platform, nullptr) != CL_SUCCESS) return 1;
    char version[128] = {0};
    if (clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof version - 1, version, nullptr) != CL_SUCCESS) return 1;
    int major = 1, minor = 0;
    if (std::sscanf(version, "OpenCL %d.%d", &major, &minor) != 2) return 1;
    return major;
}

// An in-order queue (no properties) on `device`.
cl_command_queue create_in_order_queue(cl_context context, cl_device_id device, cl_int *error) {
    if (platform_major_version(device) >= 2) return clCreateCommandQueueWithProperties(context, device, nullptr, error);
    return clCreateCommandQueue(context, device, 0, error);
}

}  // namespace

// clang-format off: one line per code reads as a table
std::string cl_error_name(cl_int code) {
    switch (code) {
#define MPIACC_CL_ERROR(name) \
    case name: return #name;
        MPIACC_CL_ERROR(CL_SUCCESS)
        MPIACC_CL_ERROR(CL_DEVICE_NOT_FOUND)
        MPIACC_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
        MPIACC_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
        MPIACC_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        MPIACC_CL_ERROR(CL_OUT_OF_RESOURCES)
        MPIACC_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
        MPIACC_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
        MPIACC_CL_ERROR(CL_MAP_FAILURE)
        MPIACC_CL_ERROR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        MPIACC_CL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        MPIACC_CL_ERROR(CL_INVALID_VALUE)
        MPIACC_CL_ERROR(CL_INVALID_PLATFORM)
        MPIACC_CL_ERROR(CL_INVALID_DEVICE)
        MPIACC_CL_ERROR(CL_INVALID_CONTEXT)
        MPIACC_CL_ERROR(CL_INVALID_QUEUE_PROPERTIES)
        MPIACC_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
        MPIACC_CL_ERROR(CL_INVALID_HOST_PTR)
        MPIACC_CL_ERROR(CL_INVALID_MEM_OBJECT)
        MPIACC_CL_ERROR(CL_INVALID_BINARY)
        MPIACC_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
        MPIACC_CL_ERROR(CL_INVALID_PROGRAM)
        MPIACC_CL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
        MPIACC_CL_ERROR(CL_INVALID_EVENT)
        MPIACC_CL_ERROR(CL_INVALID_OPERATION)
        MPIACC_CL_ERROR(CL_INVALID_BUFFER_SIZE)
        MPIACC_CL_ERROR(CL_PLATFORM_NOT_FOUND_KHR)
#undef MPIACC_CL_ERROR
        default: return format("CL error %d", static_cast<int>(code));
    }
}
// clang-format on

const OpenClCounters &opencl_counters() {
    static const OpenClCounters counters{
        MPIACC_COUNTER_REF("opencl.cache.hit"),     MPIACC_COUNTER_REF("opencl.cache.miss"),
        MPIACC_COUNTER_REF("opencl.cache.evicted"), MPIACC_COUNTER_REF("opencl.queue.created"),
        MPIACC_COUNTER_REF("opencl.pinned.alloc"),  MPIACC_COUNTER_REF("opencl.program.built"),
        MPIACC_COUNTER_REF("opencl.peer_pin"),      MPIACC_COUNTER_REF("opencl.peer_unpin"),
    };
    return counters;
}

std::string opencl_counters_text() {
    const OpenClCounters &c = opencl_counters();
    const std::pair<const char *, const std::atomic<std::int64_t> *> rows[] = {
        {"opencl.cache.evicted", &c.cache_evicted}, {"opencl.cache.hit", &c.cache_hit},
        {"opencl.cache.miss", &c.cache_miss},       {"opencl.peer_pin", &c.peer_pin},
        {"opencl.peer_unpin", &c.peer_unpin},       {"opencl.pinned.alloc", &c.pinned_alloc},
        {"opencl.program.built", &c.program_built}, {"opencl.queue.created", &c.queue_created},
    };
    std::string text;
    for (const auto &row : rows)
        text += format("%s=%lld\n", row.first, static_cast<long long>(row.second->load(std::memory_order_relaxed)));
    return text;
}

std::string device_pci_bus_id(cl_device_id device) {
    std::string extensions = device_info_text(device, CL_DEVICE_EXTENSIONS);
    if (has_extension(extensions, "cl_nv_device_attribute_query")) {
        cl_uint bus = 0, slot = 0, domain = 0;
        if (clGetDeviceInfo(device, kPciBusIdNv, sizeof bus, &bus, nullptr) != CL_SUCCESS ||
            clGetDeviceInfo(device, kPciSlotIdNv, sizeof slot, &slot, nullptr) != CL_SUCCESS)
            return "";
        // The domain query exists from CUDA 10.2 on; older drivers mean domain 0.
        if (clGetDeviceInfo(device, kPciDomainIdNv, sizeof domain, &domain, nullptr) != CL_SUCCESS) domain = 0;
        // The slot packs device and function as in a PCI devfn (hwloc reads it the same way).
        return format("%04x:%02x:%02x.%x", domain, bus & 0xff, slot >> 3, slot & 7);
    }
    if (has_extension(extensions, "cl_amd_device_attribute_query")) {
        cl_device_topology_amd topology{};
        if (clGetDeviceInfo(device, CL_DEVICE_TOPOLOGY_AMD, sizeof topology, &topology, nullptr) == CL_SUCCESS &&
            topology.raw.type == CL_DEVICE_TOPOLOGY_TYPE_PCIE_AMD)
            return format("0000:%02x:%02x.%x", static_cast<unsigned char>(topology.pcie.bus),
                          static_cast<unsigned char>(topology.pcie.device),
                          static_cast<unsigned char>(topology.pcie.function));
    }
    return "";
}

// ------------------------------------------------------------------ ContextReferences

cl_uint ContextReferences::current() const {
    cl_uint count = 0;
    if (clGetContextInfo(context_, CL_CONTEXT_REFERENCE_COUNT, sizeof count, &count, nullptr) != CL_SUCCESS) return 0;
    return count;
}

cl_uint ContextReferences::charge_since(cl_uint before) {
    cl_uint now = current();
    cl_uint added = now > before ? 1 : 0;
    ours_ += added;
    return added;
}

void ContextReferences::discharge(cl_uint references) {
    ours_.fetch_sub(references);  // only ever what charge_since() returned for that object
}

bool ContextReferences::only_ours_remain() const {
    cl_uint now = current();
    return now != 0 && now <= ours();
}

// ------------------------------------------------------------------ OpenClPinnedAllocator

OpenClPinnedAllocator::OpenClPinnedAllocator(cl_context context, cl_device_id device, std::string pci_bus_id,
                                             ContextReferences *references, bool share)
    : context_(context), device_(device), pci_bus_id_(std::move(pci_bus_id)), references_(references), share_(share) {}

OpenClPinnedAllocator::~OpenClPinnedAllocator() {
    while (!buffers_.empty()) unmap_and_release(buffers_.begin()->first);
}

bool OpenClPinnedAllocator::ensure_map_queue(std::string *why) {
    if (map_queue_) return true;
    cl_int error = CL_SUCCESS;
    cl_uint before = references_->current();
    map_queue_ = QueueRef::adopt(create_in_order_queue(context_, device_, &error));
    if (error != CL_SUCCESS || !map_queue_) {
        map_queue_.reset();
        *why = "creating the queue that maps pinned staging buffers failed: " + cl_error_name(error);
        return false;
    }
    references_->charge_since(before);
    opencl_counters().queue_created.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void *OpenClPinnedAllocator::map(MemRef buffer, std::size_t bytes, SharedSegment segment, std::string *why) {
    cl_int error = CL_SUCCESS;
    void *host = clEnqueueMapBuffer(map_queue_.get(), buffer.get(), CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0,
                                    nullptr, nullptr, &error);
    if (error != CL_SUCCESS || !host) {
        *why = format("mapping %zu bytes of pinned staging memory failed: ", bytes) + cl_error_name(error);
        return nullptr;
    }
    if (segment.base && host != segment.base) {
        // OpenCL promises a USE_HOST_PTR map derived from the host pointer; without it the
        // bytes a peer reads would not be those the copies wrote.
        clEnqueueUnmapMemObject(map_queue_.get(), buffer.get(), host, 0, nullptr, nullptr);
        clFinish(map_queue_.get());
        *why = "OpenCL mapped a CL_MEM_USE_HOST_PTR buffer away from its host memory";
        return nullptr;
    }
    buffers_.emplace(host, Mapping{std::move(buffer), 0, segment});
    return host;
}

void *OpenClPinnedAllocator::allocate(std::size_t bytes, std::string *why) {
    // Host memory on the device's NUMA node: the wrong socket costs GPU-CPU bandwidth
    // (docs/performance.md, 'Staging memory placement'). Implementations place
    // ALLOC_HOST_PTR memory at creation or at first map, and a shared segment gets its
    // pages when it is made; all of it happens inside the scope.
    NumaAllocationScope near_device(pci_bus_id_);
    if (!ensure_map_queue(why)) return nullptr;
    cl_int error = CL_SUCCESS;
    SharedSegment segment;
    cl_mem_flags flags = CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE;
    if (shares()) {
        std::string shared_why;
        if (create_shared_segment(bytes, &segment, &shared_why) == MPI_SUCCESS) {
            flags = CL_MEM_USE_HOST_PTR | CL_MEM_READ_WRITE;
        } else if (buffers_.empty()) {
            share_failed_ = true;  // the pool stays unshared
        } else {
            *why = shared_why;
            return nullptr;
        }
    }
    cl_uint before = references_->current();
    MemRef buffer = MemRef::adopt(clCreateBuffer(context_, flags, bytes, segment.base, &error));
    if (error != CL_SUCCESS || !buffer) {
        destroy_shared_segment(&segment);
        *why = format("clCreateBuffer(%s, %zu bytes) for pinned staging memory failed: ",
                      segment.base ? "CL_MEM_USE_HOST_PTR" : "CL_MEM_ALLOC_HOST_PTR", bytes) +
               cl_error_name(error);
        return nullptr;
    }
    cl_uint charged = references_->charge_since(before);
    void *host = map(std::move(buffer), bytes, segment, why);
    if (!host) {
        references_->discharge(charged);
        destroy_shared_segment(&segment);
        return nullptr;
    }
    buffers_[host].charged = charged;
    opencl_counters().pinned_alloc.fetch_add(1, std::memory_order_relaxed);
    return host;
}

void *OpenClPinnedAllocator::wrap(void *host_memory, std::size_t bytes, std::string *why) {
    cl_int error = CL_SUCCESS;
    cl_uint before = references_->current();
    MemRef buffer =
        MemRef::adopt(clCreateBuffer(context_, CL_MEM_USE_HOST_PTR | CL_MEM_READ_WRITE, bytes, host_memory, &error));
    if (error != CL_SUCCESS || !buffer) {
        *why = format("clCreateBuffer(CL_MEM_USE_HOST_PTR, %zu bytes) over a peer's staging segment failed: ", bytes) +
               cl_error_name(error);
        return nullptr;
    }
    const cl_uint charged = references_->charge_since(before);
    // Not mapped. The buffer's existence alone makes NVIDIA's driver take the range as
    // pinned, mapped or not. And a blocking map for reading, made while the peer wrote
    // the segment's fresh pages, put older bytes back over the peer's copy: a SHARED
    // receive then took zeros (docs/performance.md, 'Shared staging').
    if (!buffers_.emplace(host_memory, Mapping{std::move(buffer), charged, SharedSegment{}, false}).second) {
        references_->discharge(charged);
        *why = "internal error: this memory is already wrapped";
        return nullptr;
    }
    return host_memory;
}

bool OpenClPinnedAllocator::shared_identity(const void *allocation, SharedLocation *out) const {
    auto found = buffers_.find(const_cast<void *>(allocation));
    if (found == buffers_.end() || found->second.segment.fd < 0) return false;
    *out = shared_location(found->second.segment);
    return true;
}

void OpenClPinnedAllocator::release(void *ptr) { unmap_and_release(ptr); }

void OpenClPinnedAllocator::unmap_and_release(void *ptr) {
    auto found = buffers_.find(ptr);
    if (found == buffers_.end()) return;
    // A mapped buffer goes at teardown only (the pool keeps its memory until finalize), so
    // waiting is fine: the unmap must be done before the buffer it maps goes, and the
    // buffer before its memory. A wrap, never mapped, also goes mid-run (its peer segment
    // is unmapped), and waits for nothing.
    if (found->second.mapped &&
        clEnqueueUnmapMemObject(map_queue_.get(), found->second.buffer.get(), ptr, 0, nullptr, nullptr) == CL_SUCCESS)
        clFinish(map_queue_.get());
    cl_uint charged = found->second.charged;
    SharedSegment segment = found->second.segment;
    buffers_.erase(found);
    references_->discharge(charged);
    destroy_shared_segment(&segment);
}

// ------------------------------------------------------------------ ReceiveBounces

ReceiveBounces::ReceiveBounces(std::unique_ptr<PinnedAllocator> allocator, std::size_t budget_bytes)
    : allocator_(std::move(allocator)), budget_(budget_bytes) {}

ReceiveBounces::~ReceiveBounces() {
    // Buffers still in use belong to receives that hold the entry, so there are none.
    for (const Buffer &b : free_) allocator_->release(b.data);
}

void *ReceiveBounces::acquire(std::size_t bytes) {
    if (!offered_.load(std::memory_order_relaxed)) return nullptr;
    return acquire_for_scratch(bytes);
}

void *ReceiveBounces::acquire_for_scratch(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    // The smallest reusable_for the request; among equals the most recently released (a
    // receive loop keeps reusing one).
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
        if (reusable_for(it->capacity, bytes) && (best == free_.end() || it->capacity <= best->capacity)) best = it;
    if (best != free_.end()) {
        Buffer b = *best;
        free_.erase(best);
        in_use_.emplace(b.data, b.capacity);
        return b.data;
    }
    if (failed_ || bytes > budget_) return nullptr;
    // Make room from the free ones, oldest first.
    while (allocated_ + bytes > budget_ && !free_.empty()) {
        allocator_->release(free_.front().data);
        allocated_ -= free_.front().capacity;
        free_.erase(free_.begin());
    }
    if (allocated_ + bytes > budget_) return nullptr;
    std::string why;
    void *data = allocator_->allocate(bytes, &why);
    if (!data) {
        failed_ = true;  // pageable memory works too; asking again costs as much
        return nullptr;
    }
    allocated_ += bytes;
    in_use_.emplace(data, bytes);
    return data;
}

void ReceiveBounces::release(void *bounce) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = in_use_.find(bounce);
    if (found == in_use_.end()) return;
    free_.push_back(Buffer{found->first, found->second});
    in_use_.erase(found);
}

std::size_t ReceiveBounces::allocated_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocated_;
}

// ------------------------------------------------------------------ CacheEntry

struct CacheEntry::ConstantBuffer {
    std::shared_ptr<const int> key;  // keeps the device_copy_key() address from being reused
    MemRef mem;
    std::shared_ptr<ContextReferences> references;
    cl_uint charged = 0;
    ~ConstantBuffer() { release(); }
    void release() {
        if (!mem) return;
        mem.reset();
        references->discharge(charged);
    }
};

CacheEntry::CacheEntry(CreateKey, cl_context context, cl_device_id device)
    : context_(ContextRef::retain(context)),
      device_(device),
      pci_bus_id_(device_pci_bus_id(device)),
      references_(std::make_shared<ContextReferences>(context)),
      peer_pins_([this](void *base, std::size_t bytes,
                        std::string *why) { return peer_wraps_->wrap(base, bytes, why) != nullptr; },
                 [this](void *base) { peer_wraps_->release(base); }, opencl_counters().peer_pin,
                 opencl_counters().peer_unpin) {
    references_->charge(1);  // the clRetainContext just above
}

std::shared_ptr<CacheEntry> CacheEntry::create(cl_context context, cl_device_id device, const EntrySettings &settings,
                                               std::string *why) {
    auto entry = std::make_shared<CacheEntry>(CreateKey{}, context, device);
    for (QueueRef &queue : entry->copy_queues_) {
        cl_int error = CL_SUCCESS;
        cl_uint before = entry->references_->current();
        queue = QueueRef::adopt(create_in_order_queue(context, device, &error));
        if (error != CL_SUCCESS || !queue) {
            queue.reset();
            *why = "creating an internal command queue for the cl_context failed: " + cl_error_name(error);
            return nullptr;
        }
        entry->references_->charge_since(before);
        opencl_counters().queue_created.fetch_add(1, std::memory_order_relaxed);
    }
    entry->pinned_pool_ = std::make_unique<PinnedPool>(
        std::make_unique<OpenClPinnedAllocator>(context, device, entry->pci_bus_id_, entry->references_.get(),
                                                settings.share_pool),
        std::max<std::size_t>(1, settings.slot_size), settings.pool_bytes);
    entry->receive_bounces_ = std::make_unique<ReceiveBounces>(
        std::make_unique<OpenClPinnedAllocator>(context, device, entry->pci_bus_id_, entry->references_.get()),
        settings.receive_bounce_bytes);
    entry->peer_wraps_ =
        std::make_unique<OpenClPinnedAllocator>(context, device, entry->pci_bus_id_, entry->references_.get());
    return entry;
}

bool CacheEntry::pin_peer_segment(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why) {
    std::lock_guard<std::mutex> lock(peer_pins_mutex_);
    return peer_pins_.pin(base, bytes, mapping, why);
}

void CacheEntry::unpin_peer_segment(void *base) {
    std::lock_guard<std::mutex> lock(peer_pins_mutex_);
    peer_pins_.unpin(base);
}

CacheEntry::~CacheEntry() {
    // The pool's memory is about to be unmapped; no copy may still be writing into it.
    // Copies hold the entry through their Completion, so in a correct program these
    // queues are already idle and this returns at once.
    for (const QueueRef &queue : copy_queues_)
        if (queue) clFinish(queue.get());
    receive_bounces_.reset();
    pinned_pool_.reset();
    peer_wraps_.reset();  // its wraps with it (not counted as unpins: the entry goes)
    {
        std::lock_guard<std::mutex> lock(constant_buffers_mutex_);
        for (const std::weak_ptr<ConstantBuffer> &weak : constant_buffers_)
            if (std::shared_ptr<ConstantBuffer> buffer = weak.lock()) buffer->release();
    }
    kernels_.clear();
    programs_.clear();
}

cl_command_queue CacheEntry::next_copy_queue() {
    return copy_queues_[next_queue_.fetch_add(1, std::memory_order_relaxed) % 2].get();
}

cl_program CacheEntry::program(const std::string &name, const std::string &source, std::string *why) {
    std::lock_guard<std::mutex> lock(programs_mutex_);
    auto found = programs_.find(name);
    if (found != programs_.end()) return found->second.get();

    cl_int error = CL_SUCCESS;
    const char *text = source.c_str();
    std::size_t length = source.size();
    cl_uint before = references_->current();
    ProgramRef program = ProgramRef::adopt(clCreateProgramWithSource(context(), 1, &text, &length, &error));
    if (error != CL_SUCCESS || !program) {
        *why = format("clCreateProgramWithSource for program '%s' failed: ", name.c_str()) + cl_error_name(error);
        return nullptr;
    }
    cl_uint charged = references_->charge_since(before);
    error = clBuildProgram(program.get(), 1, &device_, "", nullptr, nullptr);
    if (error != CL_SUCCESS) {
        std::size_t log_size = 0;
        std::string log;
        if (clGetProgramBuildInfo(program.get(), device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &log_size) == CL_SUCCESS &&
            log_size > 0) {
            log.resize(log_size);
            clGetProgramBuildInfo(program.get(), device_, CL_PROGRAM_BUILD_LOG, log_size, &log[0], nullptr);
            log.resize(std::strlen(log.c_str()));
        }
        program.reset();
        references_->discharge(charged);
        *why = format("building program '%s' failed (%s): %s", name.c_str(), cl_error_name(error).c_str(), log.c_str());
        return nullptr;
    }
    opencl_counters().program_built.fetch_add(1, std::memory_order_relaxed);
    cl_program built = program.get();
    programs_.emplace(name, std::move(program));
    return built;
}

namespace {

// A kernel of `program` and its CL_KERNEL_WORK_GROUP_SIZE, charged to `references`.
KernelRef create_kernel(cl_program program, cl_device_id device, const std::string &program_name,
                        const std::string &kernel_name, ContextReferences *references, std::size_t *max_group,
                        std::string *why) {
    cl_int error = CL_SUCCESS;
    cl_uint before = references->current();
    KernelRef made = KernelRef::adopt(clCreateKernel(program, kernel_name.c_str(), &error));
    if (error != CL_SUCCESS || !made) {
        *why = format("clCreateKernel for kernel '%s' of program '%s' failed: ", kernel_name.c_str(),
                      program_name.c_str()) +
               cl_error_name(error);
        return KernelRef();
    }
    references->charge_since(before);
    if (clGetKernelWorkGroupInfo(made.get(), device, CL_KERNEL_WORK_GROUP_SIZE, sizeof *max_group, max_group,
                                 nullptr) != CL_SUCCESS ||
        *max_group == 0)
        *max_group = 1;
    return made;
}

}  // namespace

CacheEntry::LockedKernel CacheEntry::kernel(const std::string &program_name, const std::string &source,
                                            const std::string &kernel_name, cl_command_queue queue, std::string *why) {
    LockedKernel locked;
    cl_program built = program(program_name, source, why);
    if (!built) return locked;
    if (queue != copy_queues_[0].get() && queue != copy_queues_[1].get()) {
        // Not charged for long: the kernel goes right after its launch.
        ContextReferences scratch(context());
        locked.own = create_kernel(built, device_, program_name, kernel_name, &scratch, &locked.max_group, why);
        locked.kernel = locked.own.get();
        return locked;
    }
    const std::string key = program_name + "/" + kernel_name;
    std::unique_lock<std::mutex> lock(programs_mutex_);
    std::unique_ptr<KernelSlot> &slot = kernels_[key];
    if (!slot) {
        auto fresh = std::make_unique<KernelSlot>();
        fresh->kernel =
            create_kernel(built, device_, program_name, kernel_name, references_.get(), &fresh->max_group, why);
        if (!fresh->kernel) {
            kernels_.erase(key);
            return locked;
        }
        slot = std::move(fresh);
    }
    KernelSlot *found = slot.get();
    lock.unlock();
    locked.lock = std::unique_lock<std::mutex>(found->mutex);
    locked.kernel = found->kernel.get();
    locked.max_group = found->max_group;
    return locked;
}

std::shared_ptr<void> CacheEntry::make_constant_buffer(const void *host, std::size_t bytes, std::string *why) {
    auto buffer = std::make_shared<ConstantBuffer>();
    buffer->key = copy_key_;
    buffer->references = references_;
    cl_int error = CL_SUCCESS;
    cl_uint before = references_->current();
    // A zero-byte buffer is invalid in OpenCL; one byte stands for an empty copy.
    static const unsigned char kNothing = 0;
    buffer->mem = MemRef::adopt(
        clCreateBuffer(context(), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes ? bytes : 1,
                       bytes ? const_cast<void *>(host) : const_cast<unsigned char *>(&kNothing), &error));
    if (error != CL_SUCCESS || !buffer->mem) {
        buffer->mem.reset();
        *why = format("clCreateBuffer of %zu bytes for a datatype's work units failed: ", bytes) + cl_error_name(error);
        return nullptr;
    }
    buffer->charged = references_->charge_since(before);
    std::lock_guard<std::mutex> lock(constant_buffers_mutex_);
    constant_buffers_.erase(std::remove_if(constant_buffers_.begin(), constant_buffers_.end(),
                                           [](const std::weak_ptr<ConstantBuffer> &weak) { return weak.expired(); }),
                            constant_buffers_.end());
    constant_buffers_.push_back(buffer);
    return buffer;
}

cl_mem CacheEntry::constant_buffer_mem(const std::shared_ptr<void> &buffer) {
    return buffer ? static_cast<ConstantBuffer *>(buffer.get())->mem.get() : nullptr;
}

// ------------------------------------------------------------------ ObjectCache

ObjectCache::ObjectCache(std::size_t capacity, EntrySettings settings) : capacity_(capacity), settings_(settings) {}

ObjectCache::~ObjectCache() { clear(); }

std::shared_ptr<CacheEntry> ObjectCache::acquire(cl_context context, cl_device_id device, std::string *why) {
    const OpenClCounters &counters = opencl_counters();
    if (capacity_ == 0) {
        counters.cache_miss.fetch_add(1, std::memory_order_relaxed);
        return CacheEntry::create(context, device, settings_, why);
    }
    // Destroyed after the lock is dropped: an entry's teardown waits on its queues.
    std::vector<std::shared_ptr<CacheEntry>> evicted;
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = std::find_if(entries_.begin(), entries_.end(), [&](const std::shared_ptr<CacheEntry> &entry) {
        return entry->context() == context && entry->device() == device;
    });
    // A user destroys a context without telling us; any lookup is a chance to notice.
    sweep_locked(found == entries_.end() ? nullptr : found->get(), &evicted);
    if (found != entries_.end()) {
        counters.cache_hit.fetch_add(1, std::memory_order_relaxed);
        entries_.splice(entries_.begin(), entries_, found);
        return entries_.front();
    }
    counters.cache_miss.fetch_add(1, std::memory_order_relaxed);
    std::shared_ptr<CacheEntry> entry = CacheEntry::create(context, device, settings_, why);
    if (!entry) return nullptr;
    entries_.push_front(entry);
    while (entries_.size() > capacity_) {
        evicted.push_back(std::move(entries_.back()));
        entries_.pop_back();
        counters.cache_evicted.fetch_add(1, std::memory_order_relaxed);
    }
    return entry;
}

void ObjectCache::sweep_locked(const CacheEntry *keep, std::vector<std::shared_ptr<CacheEntry>> *evicted) {
    for (auto it = entries_.begin(); it != entries_.end();) {
        // An entry a DeviceBuffer still holds keeps the user's cl_mem alive, so on PoCL
        // its context shows a reference beyond ours and is not evicted here.
        if (it->get() != keep && (*it)->only_our_references_remain()) {
            evicted->push_back(std::move(*it));
            it = entries_.erase(it);
            opencl_counters().cache_evicted.fetch_add(1, std::memory_order_relaxed);
        } else {
            ++it;
        }
    }
}

std::size_t ObjectCache::sweep() {
    std::vector<std::shared_ptr<CacheEntry>> evicted;
    std::lock_guard<std::mutex> lock(mutex_);
    sweep_locked(nullptr, &evicted);
    return evicted.size();
}

void ObjectCache::clear() {
    std::list<std::shared_ptr<CacheEntry>> dropped;
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(entries_);
}

void ObjectCache::unpin_peer_segment(void *base) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto &entry : entries_) entry->unpin_peer_segment(base);
}

std::size_t ObjectCache::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
}

}  // namespace opencl
}  // namespace mpiacc
