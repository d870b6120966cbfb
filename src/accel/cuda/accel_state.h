// The CUDA component's process-wide state behind CudaAccel: its settings, the driver,
// the devices in use, the memory-kind cache, the IPC caches and the pinned ranges.
// Buffers hold it, so it outlives the CudaAccel until the last buffer is gone.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "accel/accel.h"
#include "accel/cuda/cuda_accel.h"
#include "accel/cuda/device_state.h"
#include "accel/cuda/driver.h"
#include "accel/cuda/events.h"
#include "accel/cuda/ipc.h"
#include "accel/cuda/kernels.h"
#include "accel/cuda/memtype_cache.h"
#include "accel/cuda/pack.h"
#include "accel/cuda/pinned_memory.h"
#include "accel/cuda/reduce.h"
#include "pool/shared_memory.h"
#include "util/counters.h"

namespace mpiacc {

struct CudaAccel::State : std::enable_shared_from_this<CudaAccel::State> {
    explicit State(const AccelSettings &settings);

    bool available() {
        int s = avail.load(std::memory_order_acquire);
        if (s == 0) {
            std::call_once(probe_once, [this] { probe(); });
            s = avail.load(std::memory_order_acquire);
        }
        return s == 1;
    }
    void probe();
    void reconfigure(const AccelSettings &new_settings);
    bool query_pointer(const void *addr, PointerInfo *info, std::string *why);
    // Host memory the driver says is pinned, though `pinned` does not know it (the
    // application's cudaMallocHost or cudaHostRegister).
    bool driver_pinned(const void *p);
    std::shared_ptr<cuda::DeviceState> device_state(int ordinal, std::string *why);
    // capture.cc
    int capture(void *addr, std::size_t bytes, const BufferAttrs &attrs, std::unique_ptr<DeviceBuffer> *out,
                std::string *why);
    int capture_dependency(cuda::DeviceState &device, unsigned pair, const BufferAttrs &attrs,
                           std::shared_ptr<cuda::EventRef> *dep, std::string *why);
    int capture_default_streams(cuda::DeviceState &device, unsigned pair, cuda::EventPool &pool,
                                std::shared_ptr<cuda::EventRef> *dep, std::string *why);
    int ipc_import(const IpcExport &peer, std::size_t bytes, int device, std::unique_ptr<DeviceBuffer> *out,
                   std::string *why);
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
    std::shared_ptr<cuda::DriverApi> driver = std::make_shared<cuda::DriverApi>();
    std::shared_ptr<cuda::PinnedRanges> pinned = std::make_shared<cuda::PinnedRanges>();
    cuda::CopyKernels kernels;
    cuda::PackKernels packs{driver};  // derived datatypes (typed_copy.cc)
    cuda::ReduceKernels reduces;      // MPI_Reduce_local (cuda_buffer.cc)
    std::atomic<std::int64_t> &memtype_queries = counter("cuda.memtype.query");
    std::atomic<std::int64_t> &streams_created = counter("cuda.stream.created");  // make_device_state counts
    MemtypeCache cache;
    cuda::IpcCache ipc{driver};

    std::mutex mutex;  // devices and peer_pins
    std::map<int, std::shared_ptr<cuda::DeviceState>> devices;
    // cudaHostRegister'd peer segments (pinned knows them too: copies from them need no
    // ordering by the host).
    PeerSegmentPins peer_pins;
};

}  // namespace mpiacc
