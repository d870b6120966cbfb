// CUDA IPC between processes of a node: the sender's memory handles, made once per
// allocation, and the receiver's mappings of peers' allocations and their ready events,
// kept open across transfers (opening a handle costs far more than a small pull).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "accel/accel.h"
#include "accel/cuda/device_state.h"
#include "accel/cuda/driver.h"
#include "accel/cuda/events.h"

namespace mpiacc {
namespace cuda {

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
    ~IpcMapping();
};

class IpcCache {
public:
    explicit IpcCache(std::shared_ptr<const DriverApi> driver);
    IpcCache(const IpcCache &) = delete;
    IpcCache &operator=(const IpcCache &) = delete;

    // Sender: the memory handle of the allocation `info` describes, asked of the driver
    // once per allocation. False for memory without a legacy IPC handle (cudaMallocAsync
    // pools, VMM): the caller then uses the pipeline.
    bool export_mem_handle(const PointerInfo &info, cudaIpcMemHandle_t *out);
    // Receiver: `peer`'s allocation mapped on `local`'s device, cached per handle, device
    // and buffer id, and the peer's ready event (null where it exported none).
    // `device_count` devices are looked at for peer access; `verbose` as MPIACC_VERBOSE.
    int open(const IpcExport &peer, DeviceState &local, int device_count, long verbose,
             std::shared_ptr<IpcMapping> *mapping, std::shared_ptr<EventRef> *ready, std::string *why);
    // Drops every handle, mapping and event (shutdown); a mapping closes once the buffers
    // and copies still using it let go.
    void clear();

    std::int64_t exports() const { return exports_.load(std::memory_order_relaxed); }
    std::int64_t hits() const { return hits_.load(std::memory_order_relaxed); }
    std::int64_t opened() const { return opened_.load(std::memory_order_relaxed); }

private:
    using EventKey = std::array<std::uint8_t, sizeof(cudaIpcEventHandle_t)>;
    struct ExportEntry {
        std::uint64_t buffer_id;
        cudaIpcMemHandle_t handle;
    };
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

    // Under mutex_.
    int open_mapping(const IpcExport &peer, const DeviceState &local, int device_count,
                     std::shared_ptr<IpcMapping> *out, std::string *why);
    std::shared_ptr<EventRef> open_event(const std::uint8_t *handle, int device, std::string *why);

    std::shared_ptr<const DriverApi> driver_;
    std::atomic<std::int64_t> &opened_;
    std::atomic<std::int64_t> &hits_;
    std::atomic<std::int64_t> &exports_;
    std::mutex mutex_;  // everything below
    std::map<std::uintptr_t, ExportEntry> export_handles_;
    std::map<MappingKey, MappingEntry> mappings_;
    std::uint64_t mapping_clock_ = 0;
    std::map<EventKey, std::shared_ptr<ImportedEvent>> imported_events_;
};

}  // namespace cuda
}  // namespace mpiacc
