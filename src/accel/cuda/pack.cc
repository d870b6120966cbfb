#include "accel/cuda/pack.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "accel/cuda/driver.h"
#include "accel/cuda/pack_plan.h"
#include "config.h"
#include "util/error.h"

#if MPIACC_HAVE_CUDA_KERNELS
#include "accel/cuda/pack_kernel_fatbin.h"  // generated from pack_kernel.cu
#endif

namespace mpiacc {
namespace cuda {

namespace {

constexpr unsigned kThreadsPerBlock = 256;  // MPIACC_PACK_THREADS in pack_kernel.cu

const char *const kStridedNames[2][5] = {
    {"mpiacc_pack_strided_1", "mpiacc_pack_strided_2", "mpiacc_pack_strided_4", "mpiacc_pack_strided_8",
     "mpiacc_pack_strided_16"},
    {"mpiacc_unpack_strided_1", "mpiacc_unpack_strided_2", "mpiacc_unpack_strided_4", "mpiacc_unpack_strided_8",
     "mpiacc_unpack_strided_16"},
};
const char *const kUnitsNames[2] = {"mpiacc_pack_units", "mpiacc_unpack_units"};

int word_index(unsigned word) {
    int i = 0;
    while ((1u << i) < word) ++i;
    return i;
}

// One device's copy of a type's work units. The copy is enqueued on the stream of the
// first pack that needs it; `ready` tells packs on other streams when it has landed.
class DeviceUnits {
public:
    DeviceUnits(int device, std::shared_ptr<const DriverApi> driver) : device_(device), driver_(std::move(driver)) {}
    ~DeviceUnits() {
        // cudaFree waits for the device to be idle, so no kernel still reads the units.
        DeviceGuard guard(device_, driver_.get());
        if (ready_) quiet(cudaEventDestroy(ready_));
        if (units_) quiet(cudaFree(units_));
    }
    DeviceUnits(const DeviceUnits &) = delete;
    DeviceUnits &operator=(const DeviceUnits &) = delete;

    // Copies `units` to the device on `stream`; the host vector outlives the copy (it is
    // the FlatType's). On failure, *step names the call that failed.
    cudaError_t copy(const std::vector<WorkUnit> &units, cudaStream_t stream, const char **step) {
        const std::size_t bytes = units.size() * sizeof(WorkUnit);
        *step = "cudaMalloc";
        cudaError_t e = quiet(cudaMalloc(&units_, bytes));
        if (e == cudaSuccess) {
            *step = "cudaMemcpyAsync";
            e = quiet(cudaMemcpyAsync(units_, units.data(), bytes, cudaMemcpyHostToDevice, stream));
        }
        if (e == cudaSuccess) {
            *step = "cudaEventCreateWithFlags";
            e = quiet(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
        }
        if (e == cudaSuccess) {
            *step = "cudaEventRecord";
            e = quiet(cudaEventRecord(ready_, stream));
        }
        return e;
    }

    // Orders `stream` after the copy until the copy is seen done; then costs nothing.
    cudaError_t wait(cudaStream_t stream) {
        if (landed_.load(std::memory_order_acquire)) return cudaSuccess;
        cudaError_t e = quiet(cudaEventQuery(ready_));
        if (e == cudaSuccess) {
            landed_.store(true, std::memory_order_release);
            return e;
        }
        if (e != cudaErrorNotReady) return e;
        return quiet(cudaStreamWaitEvent(stream, ready_, 0));
    }

    const DeviceUnit *units() const { return static_cast<const DeviceUnit *>(units_); }

private:
    int device_;
    std::shared_ptr<const DriverApi> driver_;
    void *units_ = nullptr;
    cudaEvent_t ready_ = nullptr;
    std::atomic<bool> landed_{false};
};

static_assert(sizeof(DeviceUnit) == sizeof(WorkUnit), "DeviceUnit mirrors WorkUnit");

}  // namespace

// A full grid is as many blocks as the device holds at once: more would only queue behind
// the first wave, and the kernels' grid-stride loops cover any length.
struct PackKernels::Device {
    std::once_flag once;
    std::uint64_t strided_grid[2][5] = {};
    std::uint64_t units_grid[2] = {};
    cudaError_t error = cudaSuccess;
};

PackKernels::PackKernels(std::shared_ptr<const DriverApi> driver) : driver_(std::move(driver)) {}
PackKernels::~PackKernels() = default;

bool PackKernels::load(std::string *why) {
    std::call_once(once_, [this] {
#if MPIACC_HAVE_CUDA_KERNELS
        cudaError_t e = quiet(cudaGetDeviceCount(&device_count_));
        if (e != cudaSuccess || device_count_ <= 0) {
            why_none_ = "pack kernels: no CUDA device (cudaGetDeviceCount: " + cuda_text(e) + ")";
            return;
        }
        devices_ = std::make_unique<Device[]>(static_cast<std::size_t>(device_count_));
        cudaLibrary_t library = nullptr;
        e = quiet(cudaLibraryLoadData(&library, mpiacc_pack_kernel_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0));
        const char *name = "the pack kernels' fatbin";
        for (int kind = 0; kind < 2 && e == cudaSuccess; ++kind) {
            for (int w = 0; w < 5 && e == cudaSuccess; ++w) {
                name = kStridedNames[kind][w];
                e = quiet(cudaLibraryGetKernel(&strided_[kind][w], library, name));
            }
            if (e == cudaSuccess) {
                name = kUnitsNames[kind];
                e = quiet(cudaLibraryGetKernel(&units_[kind], library, name));
            }
        }
        if (e != cudaSuccess) {
            units_[0] = units_[1] = nullptr;
            why_none_ = format("pack kernels: loading %s: %s", name, cuda_text(e).c_str());
        }
#else
        why_none_ = "pack kernels: not built (configure found no nvcc)";
#endif
    });
    if (!why_none_.empty()) {
        *why = why_none_;
        return false;
    }
    return true;
}

int PackKernels::enqueue_pack(const FlatType &flat, const char *origin, std::int64_t count, std::int64_t first,
                              std::int64_t len, void *out, cudaStream_t stream, std::string *why) {
    return enqueue(flat, const_cast<char *>(origin), count, first, len, static_cast<char *>(out), true, stream, why);
}

int PackKernels::enqueue_unpack(const FlatType &flat, char *origin, std::int64_t count, std::int64_t first,
                                std::int64_t len, const void *in, cudaStream_t stream, std::string *why) {
    return enqueue(flat, origin, count, first, len, static_cast<char *>(const_cast<void *>(in)), false, stream, why);
}

int PackKernels::enqueue(const FlatType &flat, char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
                         char *packed, bool pack, cudaStream_t stream, std::string *why) {
    const char *verb = pack ? "pack" : "unpack";
    PackChoice choice;
    const int rc = choose_pack(flat, origin, count, first, len, packed, pack, &choice, why);
    if (rc != MPI_SUCCESS || choice.kind == PackChoice::Kind::NOTHING) return rc;
    if (choice.kind == PackChoice::Kind::COPY) {
        cudaError_t e = quiet(cudaMemcpyAsync(choice.copy_to, choice.copy_from,
                                              static_cast<std::size_t>(choice.copy_bytes), cudaMemcpyDefault, stream));
        if (e != cudaSuccess) {
            *why = format("device %s of %lld dense bytes: cudaMemcpyAsync: %s", verb, static_cast<long long>(len),
                          cuda_text(e).c_str());
            return MPI_ERR_OTHER;
        }
        return MPI_SUCCESS;
    }
    if (!load(why)) return MPI_ERR_UNSUPPORTED_OPERATION;
    int ordinal = -1;
    cudaError_t e = quiet(cudaGetDevice(&ordinal));
    if (e != cudaSuccess || ordinal < 0 || ordinal >= device_count_) {
        *why = format("device %s: cudaGetDevice: %s (device %d of %d)", verb, cuda_text(e).c_str(), ordinal,
                      device_count_);
        return MPI_ERR_OTHER;
    }
    Device &device = devices_[static_cast<std::size_t>(ordinal)];
    std::call_once(device.once, [this, &device, ordinal] {
        int multiprocessors = 0;
        device.error = quiet(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, ordinal));
        // Where the occupancy is unknown, two blocks a multiprocessor fit any of these
        // kernels (at most 128 registers a thread) and keep enough bytes in flight.
        auto full = [&](cudaKernel_t kernel, std::uint64_t *grid) {
            int blocks = 0;
            if (quiet(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, reinterpret_cast<const void *>(kernel),
                                                                    kThreadsPerBlock, 0)) != cudaSuccess)
                blocks = 2;
            *grid = static_cast<std::uint64_t>(std::max(blocks, 1)) * static_cast<std::uint64_t>(multiprocessors);
        };
        for (int kind = 0; kind < 2; ++kind) {
            for (int w = 0; w < 5; ++w) full(strided_[kind][w], &device.strided_grid[kind][w]);
            full(units_[kind], &device.units_grid[kind]);
        }
    });
    if (device.error != cudaSuccess) {
        *why = format("device %s: cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount, %d): %s", verb, ordinal,
                      cuda_text(device.error).c_str());
        return MPI_ERR_OTHER;
    }
    if (choice.kind == PackChoice::Kind::UNITS)
        return enqueue_units(flat, device, origin, first, len, packed, pack, stream, why);

    const unsigned word = choice.word;
    const std::uint64_t words = static_cast<std::uint64_t>(len) / word;
    std::uint64_t blocks = (words + kThreadsPerBlock - 1) / kThreadsPerBlock;
    blocks = std::min(blocks, device.strided_grid[pack ? 0 : 1][word_index(word)]);
    StridedArgs args = plan_strided(choice.form, choice.base, packed, first, len, word, blocks * kThreadsPerBlock);
    void *params[] = {&args};
    const cudaKernel_t kernel = strided_[pack ? 0 : 1][word_index(word)];
    e = quiet(cudaLaunchKernel(reinterpret_cast<const void *>(kernel), dim3(static_cast<unsigned>(blocks)),
                               dim3(kThreadsPerBlock), params, 0, stream));
    if (e != cudaSuccess) {
        *why = format("device %s of %lld bytes: cudaLaunchKernel (%s): %s", verb, static_cast<long long>(len),
                      kStridedNames[pack ? 0 : 1][word_index(word)], cuda_text(e).c_str());
        return MPI_ERR_OTHER;
    }
    return MPI_SUCCESS;
}

int PackKernels::enqueue_units(const FlatType &flat, Device &device, char *origin, std::int64_t first, std::int64_t len,
                               char *packed, bool pack, cudaStream_t stream, std::string *why) {
    const char *verb = pack ? "pack" : "unpack";
    const std::vector<WorkUnit> &units = flat.units();
    if (units.empty()) {
        *why = format("device %s of %lld bytes: the type has no work units", verb, static_cast<long long>(len));
        return MPI_ERR_INTERN;
    }
    bool made = false;
    const char *step = nullptr;
    cudaError_t e = cudaSuccess;
    const int ordinal = static_cast<int>(&device - devices_.get());
    std::shared_ptr<void> copy = flat.device_copy(&device, [&]() -> std::shared_ptr<void> {
        made = true;
        auto fresh = std::make_shared<DeviceUnits>(ordinal, driver_);
        e = fresh->copy(units, stream, &step);
        if (e != cudaSuccess) return nullptr;
        return fresh;
    });
    if (!copy) {
        if (made)
            *why = format("device %s: copying %zu work units to device %d: %s: %s", verb, units.size(), ordinal, step,
                          cuda_text(e).c_str());
        else
            *why = format("device %s: no copy of %zu work units on device %d", verb, units.size(), ordinal);
        return MPI_ERR_OTHER;
    }
    DeviceUnits &on_device = *static_cast<DeviceUnits *>(copy.get());
    if (!made) {
        e = on_device.wait(stream);
        if (e != cudaSuccess) {
            *why = format("device %s: waiting for the work units' copy to device %d: %s", verb, ordinal,
                          cuda_text(e).c_str());
            return MPI_ERR_OTHER;
        }
    }
    UnitsArgs args = plan_units(units, flat.size(), flat.extent(), origin, packed, first, len);
    args.units = on_device.units();
    const std::uint64_t groups_per_block = kThreadsPerBlock >> args.lane_shift;
    std::uint64_t blocks = (args.pairs + groups_per_block - 1) / groups_per_block;
    blocks = std::min(blocks, device.units_grid[pack ? 0 : 1]);
    void *params[] = {&args};
    e = quiet(cudaLaunchKernel(reinterpret_cast<const void *>(units_[pack ? 0 : 1]),
                               dim3(static_cast<unsigned>(blocks)), dim3(kThreadsPerBlock), params, 0, stream));
    if (e != cudaSuccess) {
        *why = format("device %s of %lld bytes: cudaLaunchKernel (%s): %s", verb, static_cast<long long>(len),
                      kUnitsNames[pack ? 0 : 1], cuda_text(e).c_str());
        return MPI_ERR_OTHER;
    }
    return MPI_SUCCESS;
}

}  // namespace cuda
}  // namespace mpiacc
