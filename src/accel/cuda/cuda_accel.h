// The CUDA component of the accelerator table (accel.h).
//
// Everything goes through libcudart; the few driver-only calls (pointer attributes,
// allocation ranges) are looked up with cudaGetDriverEntryPointByVersion, so the library
// links no libcuda and loads on a machine without a driver, where available() is false.
//
// What it keeps, per device and created on first use: a pool of non-blocking streams
// (never the legacy default stream, BRIEF S4), pools of events (timing off; interprocess
// ones only where a dependency is exported for an IPC pull), and a NUMA-local pinned
// staging pool (BRIEF P1, P5, P8). Process-wide: the memory-kind cache behind
// owns_pointer, and the IPC caches (exported handles, opened mappings and events).
// The files of src/accel/cuda hold one job each; accel_state.h is where they meet.
#pragma once

#include <memory>
#include <string>

#include "accel/accel.h"

namespace mpiacc {

class CudaAccel final : public Accel {
public:
    explicit CudaAccel(const AccelSettings &settings);
    ~CudaAccel() override;
    CudaAccel(const CudaAccel &) = delete;
    CudaAccel &operator=(const CudaAccel &) = delete;

    BufKind kind() const override { return BufKind::CUDA; }
    const char *name() const override { return "cuda"; }
    // Settings for what is decided from now on: copies' routes, fault specs, and the
    // devices made after this call (slot and pool sizes).
    void reconfigure(const AccelSettings &settings) override;
    // cudaGetDeviceCount succeeded with at least one device; probed once.
    bool available() override;
    // Validates the buffer and its stream/event/device attributes and captures the
    // dependency now (BRIEF S1). Pinned or registered host memory, or an untagged
    // pointer that turns out to be host memory, gives MPI_SUCCESS with *out null: the
    // caller then treats it as host memory.
    int capture(void *addr, std::size_t bytes, const BufferAttrs &attrs, std::unique_ptr<DeviceBuffer> *out,
                std::string *why) override;
    // The autodetection hot path: host memory seen before answers from a lock-free table
    // in a few nanoseconds. The caller decides whether autodetection is on.
    bool owns_pointer(const void *addr, int *device_ordinal) override;
    KnownHostGranules known_host_memory() const override;
    int ipc_import(const IpcExport &peer, std::size_t bytes, int device, std::unique_ptr<DeviceBuffer> *out,
                   std::string *why) override;
    // The current device's primary context exists (asked of the driver until it does).
    bool device_in_use() override;
    bool register_host(void *p, std::size_t bytes) override;
    void unregister_host(void *p) override;
    void *allocate_device_memory(int ordinal, std::size_t bytes, std::string *why) override;
    void free_device_memory(int ordinal, void *p, std::size_t bytes) override;
    std::int32_t device_pci_location(int ordinal) override;
    void shutdown() override;
    std::string counters() const override;

    // Why available() is false ("" while it is true or not yet probed).
    std::string unavailable_reason() const;

    struct State;  // accel_state.h

private:
    std::shared_ptr<State> state_;
    int unmap_hook_ = 0;  // add_peer_segment_unmap_hook's handle: drops registrations of unmapped segments
};

std::unique_ptr<Accel> make_cuda_accel(const AccelSettings &settings);

}  // namespace mpiacc
