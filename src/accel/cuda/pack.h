// Packing derived datatypes on device buffers by kernel (pack_kernel.cu): the launchers.
// A type with a strided form (vector, subarray and their nests, BRIEF D2) goes to the
// strided kernels with the widest word its layout allows; any other to the generic
// kernel over its work units (BRIEF D3), whose device copy lives as long as the type's
// FlatType; a dense type to one cudaMemcpyAsync. The packed side may be device memory
// or pinned host memory the GPU reaches (BRIEF D5: pack straight into a staging slot).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "datatype/flat_type.h"

namespace mpiacc {
namespace cuda {

struct DriverApi;

class PackKernels {
public:
    // `driver` (may be null) tells whether a device's context exists, so that freeing a
    // type's device units on another device never makes a context on device 0
    // (DeviceGuard).
    explicit PackKernels(std::shared_ptr<const DriverApi> driver = nullptr);
    ~PackKernels();
    PackKernels(const PackKernels &) = delete;
    PackKernels &operator=(const PackKernels &) = delete;

    // Packs bytes [first, first + len) of the packed form of (origin, count, flat) into
    // `out` (device memory, or pinned host memory the device reaches), in order on
    // `stream`, whose device must be current. `origin` is the buffer argument the type's
    // offsets count from (a device address; null at MPI_BOTTOM). Returns at once: the
    // bytes are there when the stream reaches that point. The first generic pack of a
    // type on a device allocates its units there (cudaMalloc, once). An MPI error class,
    // with *why naming what failed; MPI_ERR_UNSUPPORTED_OPERATION where a kernel is
    // needed and the kernels are not built in or did not load.
    int enqueue_pack(const FlatType &flat, const char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
                     void *out, cudaStream_t stream, std::string *why);
    // The reverse: packed bytes [first, first + len) from `in` into (origin, count, flat).
    int enqueue_unpack(const FlatType &flat, char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
                       const void *in, cudaStream_t stream, std::string *why);

    // Loads the kernels once for every device (never unloaded, as CopyKernels). False
    // with *why when they are not built in or did not load.
    bool load(std::string *why);

    struct Device;

private:
    int enqueue(const FlatType &flat, char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
                char *packed, bool pack, cudaStream_t stream, std::string *why);
    int enqueue_units(const FlatType &flat, Device &device, char *origin, std::int64_t first, std::int64_t len,
                      char *packed, bool pack, cudaStream_t stream, std::string *why);

    std::shared_ptr<const DriverApi> driver_;
    std::once_flag once_;
    std::string why_none_;
    // [kind][word]: kind 0 pack, 1 unpack; words 1, 2, 4, 8, 16 bytes
    cudaKernel_t strided_[2][5] = {};
    cudaKernel_t units_[2] = {};
    int device_count_ = 0;
    // One per device: its grid sizes, and (its address) the key of its copies of units.
    std::unique_ptr<Device[]> devices_;
};

}  // namespace cuda
}  // namespace mpiacc
