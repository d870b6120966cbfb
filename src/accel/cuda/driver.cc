#include "accel/cuda/driver.h"

#include "util/error.h"

namespace mpiacc {
namespace cuda {

namespace {

template <class Fn>
void resolve_entry(const char *symbol, unsigned version, Fn *fn) {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (quiet(cudaGetDriverEntryPointByVersion(symbol, &p, version, cudaEnableDefault, &found)) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
        *fn = reinterpret_cast<Fn>(p);
}

}  // namespace

std::string cuda_text(cudaError_t e) { return format("%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e)); }

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

void resolve_driver_api(DriverApi *api) {
    // Versions name the ABI the PFN types were written for.
    resolve_entry("cuPointerGetAttributes", 7000, &api->pointer_get_attributes);
    resolve_entry("cuPointerGetAttribute", 4000, &api->pointer_get_attribute);
    resolve_entry("cuMemGetAddressRange", 3020, &api->mem_get_address_range);
    resolve_entry("cuDeviceGet", 2000, &api->device_get);
    resolve_entry("cuDevicePrimaryCtxGetState", 7000, &api->primary_ctx_state);
    resolve_entry("cuDeviceGetAttribute", 2000, &api->device_get_attribute);
    resolve_entry("cuStreamBatchMemOp", 11070, &api->stream_batch_mem_op);
}

bool query_pointer(const DriverApi &d, const void *addr, PointerInfo *info, std::string *why) {
    *info = PointerInfo{};
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

bool DeviceGuard::should_restore(int device, const DriverApi *d) {
    if (!d || !d->device_get || !d->primary_ctx_state) return true;
    CUdevice dev = 0;
    if (d->device_get(&dev, device) != CUDA_SUCCESS) return true;
    unsigned flags = 0;
    int active = 0;
    if (d->primary_ctx_state(dev, &flags, &active) != CUDA_SUCCESS) return true;
    return active != 0;
}

}  // namespace cuda
}  // namespace mpiacc
