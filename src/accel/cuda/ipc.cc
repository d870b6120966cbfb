#include "accel/cuda/ipc.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {
namespace cuda {

namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(IpcExport::mem_handle), "IPC memory handle size");
static_assert(sizeof(cudaIpcEventHandle_t) == sizeof(IpcExport::event_handle), "IPC event handle size");

// Opened peer allocations kept mapped. Each holds the peer's memory alive even after the
// peer frees it, so the bound matters more than the hit rate past a few dozen.
constexpr std::size_t kMaxIpcMappings = 64;
// Opened peer events; a peer's events come from its bounded pool, so this is rarely hit.
constexpr std::size_t kMaxIpcEvents = 1024;
// Exported memory handles, per allocation base.
constexpr std::size_t kMaxExportHandles = 4096;

}  // namespace

IpcMapping::~IpcMapping() {
    if (!base) return;
    DeviceGuard guard(device, driver.get());
    quiet(cudaIpcCloseMemHandle(base));
}

IpcCache::IpcCache(std::shared_ptr<const DriverApi> driver)
    : driver_(std::move(driver)),
      opened_(counter("cuda.ipc.open")),
      hits_(counter("cuda.ipc.hit")),
      exports_(counter("cuda.ipc.export")) {}

bool IpcCache::export_mem_handle(const PointerInfo &info, cudaIpcMemHandle_t *out) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = export_handles_.find(info.base);
    if (it != export_handles_.end() && it->second.buffer_id == info.buffer_id) {
        *out = it->second.handle;
        return true;
    }
    DeviceGuard guard(info.ordinal, driver_.get());
    cudaIpcMemHandle_t handle;
    if (guard.error() != cudaSuccess ||
        quiet(cudaIpcGetMemHandle(&handle, reinterpret_cast<void *>(info.base))) != cudaSuccess)
        return false;
    if (export_handles_.size() >= kMaxExportHandles) export_handles_.clear();
    export_handles_[info.base] = ExportEntry{info.buffer_id, handle};
    exports_.fetch_add(1, std::memory_order_relaxed);
    *out = handle;
    return true;
}

int IpcCache::open(const IpcExport &peer, DeviceState &local, int device_count, long verbose,
                   std::shared_ptr<IpcMapping> *mapping, std::shared_ptr<EventRef> *ready, std::string *why) {
    const int device = local.ordinal;
    std::lock_guard<std::mutex> lock(mutex_);
    MappingKey key;
    std::memcpy(key.handle.data(), peer.mem_handle, key.handle.size());
    key.device = device;
    auto it = mappings_.find(key);
    if (it != mappings_.end() && it->second.buffer_id == peer.buffer_id) {
        hits_.fetch_add(1, std::memory_order_relaxed);
        it->second.last_use = ++mapping_clock_;
        *mapping = it->second.mapping;
    } else {
        // Same handle, new allocation id: the peer freed and reallocated; the old
        // mapping is closed once nothing uses it.
        if (it != mappings_.end()) mappings_.erase(it);
        int rc = open_mapping(peer, local, device_count, mapping, why);
        if (rc != MPI_SUCCESS) return rc;
        if ((*mapping)->kernel_ok && local.resident && !local.mps && !local.time_sliced.exchange(true)) {
            MPIACC_COUNT("cuda.resident.time_sliced");
            if (verbose > 0)
                std::fprintf(stderr,
                             "mpiacc: device %d: another process works on it without MPS; small copies go to "
                             "copy engines, not the resident copier\n",
                             device);
        }
        if (mappings_.size() >= kMaxIpcMappings) {
            auto oldest = std::min_element(mappings_.begin(), mappings_.end(), [](const auto &a, const auto &b) {
                return a.second.last_use < b.second.last_use;
            });
            mappings_.erase(oldest);
        }
        mappings_.emplace(key, MappingEntry{peer.buffer_id, *mapping, ++mapping_clock_});
    }
    if (peer.has_event) {
        *ready = open_event(peer.event_handle, device, why);
        if (!*ready) return MPI_ERR_OTHER;
    }
    return MPI_SUCCESS;
}

int IpcCache::open_mapping(const IpcExport &peer, const DeviceState &local, int device_count,
                           std::shared_ptr<IpcMapping> *out, std::string *why) {
    const int device = local.ordinal;
    cudaIpcMemHandle_t handle;
    std::memcpy(&handle, peer.mem_handle, sizeof handle);
    void *base = nullptr;
    cudaError_t e = quiet(cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess));
    if (e != cudaSuccess) {
        // A stale mapping of a region the peer freed and reallocated can block a new one
        // (cudaErrorAlreadyMapped): close every mapping nothing uses and try once more.
        for (auto it = mappings_.begin(); it != mappings_.end();)
            it = it->second.mapping.use_count() == 1 ? mappings_.erase(it) : std::next(it);
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
    mapping->driver = driver_;
    if (driver_->mem_get_address_range) {
        CUdeviceptr b = 0;
        std::size_t size = 0;
        if (driver_->mem_get_address_range(&b, &size, static_cast<CUdeviceptr>(as_addr(base))) == CUDA_SUCCESS)
            mapping->size = size;
    }
    // Kernel copies read only memory of the GPU they run on: across GPUs the one-block
    // kernel lost to a copy engine, where on one GPU it wins (docs/performance.md,
    // 'One-block copy kernel'). The driver gives an imported mapping the ordinal of the
    // device it was opened on, and ordinals differ between processes: the sender's PCI
    // location tells.
    mapping->kernel_ok = peer.device_pci >= 0 && peer.device_pci == local.pci_location;
    mapping->peer_readable = mapping->kernel_ok;
    for (int d = 0; !mapping->peer_readable && peer.device_pci >= 0 && d < device_count; ++d) {
        int can = 0;
        mapping->peer_readable = d != device && pci_location(d) == peer.device_pci &&
                                 quiet(cudaDeviceCanAccessPeer(&can, device, d)) == cudaSuccess && can != 0;
    }
    opened_.fetch_add(1, std::memory_order_relaxed);
    *out = std::move(mapping);
    return MPI_SUCCESS;
}

std::shared_ptr<EventRef> IpcCache::open_event(const std::uint8_t *bytes, int device, std::string *why) {
    EventKey key;
    std::memcpy(key.data(), bytes, key.size());
    auto it = imported_events_.find(key);
    if (it != imported_events_.end()) return it->second;
    cudaIpcEventHandle_t handle;
    std::memcpy(&handle, bytes, sizeof handle);
    cudaEvent_t ev = nullptr;
    cudaError_t e = quiet(cudaIpcOpenEventHandle(&ev, handle));
    if (e != cudaSuccess) {
        *why = "cudaIpcOpenEventHandle for the peer's ready event: " + cuda_text(e);
        return nullptr;
    }
    if (imported_events_.size() >= kMaxIpcEvents)
        for (auto i = imported_events_.begin(); i != imported_events_.end();)
            i = i->second.use_count() == 1 ? imported_events_.erase(i) : std::next(i);
    auto ref = std::make_shared<ImportedEvent>(ev, device, driver_);
    imported_events_.emplace(key, ref);
    return ref;
}

void IpcCache::clear() {
    std::map<MappingKey, MappingEntry> old_mappings;
    std::map<EventKey, std::shared_ptr<ImportedEvent>> old_events;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        old_mappings.swap(mappings_);
        old_events.swap(imported_events_);
        export_handles_.clear();
    }
    // CUDA calls happen outside the lock, and only for what was opened.
    old_mappings.clear();
    old_events.clear();
}

}  // namespace cuda
}  // namespace mpiacc
