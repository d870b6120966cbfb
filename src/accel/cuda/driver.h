// The CUDA runtime and driver as the component reaches them: the driver-only entry points
// (looked up through the runtime, so the library links no libcuda and loads on a machine
// without a driver), the device guard, PCI locations, pointer queries and error text.
#pragma once

#include <cuda.h>  // types and enums only: driver functions come from entry points
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "accel/cuda/cuda_quiet.h"
#include "accel/cuda/memtype_cache.h"

namespace mpiacc {
namespace cuda {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

inline std::uintptr_t as_addr(const void *p) { return reinterpret_cast<std::uintptr_t>(p); }

// "cudaErrorX (description)", for error messages.
std::string cuda_text(cudaError_t e);

// A device's place on the PCI bus as one number, domain << 13 | bus << 5 | device, which
// names one GPU in every process of a node whatever its ordinal there; -1 if unknown.
std::int32_t pci_location(int ordinal);
// "dddd:bb:dd", or "unknown".
std::string pci_text(std::int32_t location);

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
// Fills in every entry point the driver has (once a device is known to exist).
void resolve_driver_api(DriverApi *api);

// What the driver says about `addr` (memory kind, device, allocation range and identity).
// False only when the query itself failed (*why set); host memory is a success.
bool query_pointer(const DriverApi &driver, const void *addr, PointerInfo *info, std::string *why);

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
    static bool should_restore(int device, const DriverApi *driver);

    int saved_ = -1;
    bool restore_ = false;
    cudaError_t error_ = cudaSuccess;
};

}  // namespace cuda
}  // namespace mpiacc
