#include "accel/cuda/device_state.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "accel/cuda/kernels.h"
#include "accel/cuda/pull_batch.h"
#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {
namespace cuda {

namespace {

ResidentCopier::Settings resident_settings(const AccelSettings &s) {
    ResidentCopier::Settings r;
    if (s.cuda_resident_idle_us > 0) r.idle_us = s.cuda_resident_idle_us;
    r.fault_spec = s.fault_resident;
    r.world_rank = s.world_rank;
    return r;
}

}  // namespace

DeviceState::~DeviceState() {
    staging.reset();
    if (streams.empty()) return;
    DeviceGuard guard(ordinal, driver.get());
    resident.reset();  // stops its kernel, which reads peer mappings
    // A kernel copy abandoned unfinished (at finalize) would still write into
    // done_words: drain the streams first.
    if (done_words)
        for (cudaStream_t s : streams) quiet(cudaStreamSynchronize(s));
    // Returns at once; the driver releases each stream after its queued work.
    for (cudaStream_t s : streams) quiet(cudaStreamDestroy(s));
    if (ready_stream) quiet(cudaStreamDestroy(ready_stream));
    if (done_words) quiet(cudaFreeHost(done_words));
}

void DeviceState::configure(const AccelSettings &settings) {
    fault_pull = settings.fault_pull;
    fault_memop = settings.fault_memop;
    world_rank = settings.world_rank;
    if (resident) resident->configure(resident_settings(settings));
}

std::shared_ptr<DeviceState> make_device_state(int ordinal, const DeviceSetup &setup, std::string *why) {
    const AccelSettings &settings = *setup.settings;
    const std::shared_ptr<const DriverApi> &driver = setup.driver;
    auto state = std::make_shared<DeviceState>();
    state->ordinal = ordinal;
    state->driver = driver;
    DeviceGuard guard(ordinal, driver.get());
    if (guard.error() != cudaSuccess) {
        *why = format("cudaSetDevice(%d): %s", ordinal, cuda_text(guard.error()).c_str());
        return nullptr;
    }
    // The highest priority: a kernel copy's one block then goes to the first SM that frees
    // up, ahead of the blocks of the user's kernels still queued.
    int least_priority = 0, greatest_priority = 0;
    if (quiet(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority)) != cudaSuccess)
        greatest_priority = 0;
    for (unsigned i = 0; i <= kPullStream; ++i) {
        cudaStream_t s = nullptr;
        // Non-blocking: never serialised with work on the legacy default stream (BRIEF S4).
        cudaError_t e = quiet(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest_priority));
        if (e != cudaSuccess) {
            *why = format("cudaStreamCreateWithFlags on device %d: %s", ordinal, cuda_text(e).c_str());
            return nullptr;  // the streams made so far go with `state`
        }
        state->streams.push_back(s);
        state->trackers.push_back(std::make_unique<StreamTracker>());
        MPIACC_COUNT("cuda.stream.created");
    }
    // MPIACC_CUDA_KERNEL_COPY_MAX bounds both kernels; 0 leaves every copy to the engines.
    const bool kernel_copies = settings.cuda_kernel_copy_max > 0;
    if (kernel_copies) setup.kernels->load();
    cudaKernel_t kernel = kernel_copies ? setup.kernels->small_copy() : nullptr;
    if (setup.kernels->resident_copy() && kernel_copies) {
        std::string why;  // without it, small pulls go to copy engines as before
        state->resident =
            ResidentCopier::create(ordinal, setup.kernels->resident_copy(), resident_settings(settings), &why);
        if (!state->resident) {
            MPIACC_COUNT("cuda.resident.unavailable");
            if (settings.verbose > 0) std::fprintf(stderr, "mpiacc: device %d: %s\n", ordinal, why.c_str());
        }
        int same = 0;
        state->host_at_own_address = quiet(cudaDeviceGetAttribute(&same, cudaDevAttrCanUseHostPointerForRegisteredMem,
                                                                  ordinal)) == cudaSuccess &&
                                     same != 0;
#if CUDART_VERSION >= 12040
        int mps = 0;
        state->mps = quiet(cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, ordinal)) == cudaSuccess && mps != 0;
#endif
    }
    bool mem_ops = false;  // 64-bit stream memory operations
    if (driver->device_get_attribute && driver->device_get) {
        CUdevice dev = 0;
        int can = 0;
        mem_ops = driver->device_get(&dev, ordinal) == CUDA_SUCCESS &&
                  driver->device_get_attribute(&can, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev) ==
                      CUDA_SUCCESS &&
                  can != 0;
    }
    const bool memops = mem_ops && driver->stream_batch_mem_op;
    if (kernel || memops) {
        void *words = nullptr, *dev = nullptr;
        const std::size_t bytes = sizeof(std::uint64_t) * state->streams.size();
        if (quiet(cudaHostAlloc(&words, bytes, cudaHostAllocMapped | cudaHostAllocPortable)) == cudaSuccess) {
            if (quiet(cudaHostGetDevicePointer(&dev, words, 0)) == cudaSuccess) {
                std::memset(words, 0, bytes);
                state->done_words = static_cast<std::uint64_t *>(words);
                state->done_words_dev = static_cast<std::uint64_t *>(dev);
                state->copy_kernel = kernel;
                state->memop_writes.store(memops, std::memory_order_relaxed);
                for (std::size_t i = 0; i < state->trackers.size(); ++i)
                    state->trackers[i]->set_done_word(&state->done_words[i]);
            } else {
                quiet(cudaFreeHost(words));
            }
        }
    }
    char bus_id[32] = {};
    std::string pci;
    if (quiet(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, ordinal)) == cudaSuccess) pci = bus_id;
    state->pci_location = pci_location(ordinal);
    int driver_version = 0;
    if (CUDART_VERSION >= 12080 && quiet(cudaDriverGetVersion(&driver_version)) == cudaSuccess &&
        driver_version >= 12080)
        state->pull_batch = std::make_shared<PullBatch>(state.get());
    state->events = std::make_shared<EventPool>(ordinal, false, driver);
    state->ipc_events = std::make_shared<EventPool>(ordinal, true, driver);
    const std::size_t slot = std::max<std::size_t>(settings.slot_size, 4096);
    state->staging = std::make_unique<PinnedPool>(
        std::make_unique<CudaPinnedAllocator>(ordinal, pci, driver, setup.pinned), slot, settings.pool_bytes);
    state->configure(settings);
    return state;
}

}  // namespace cuda
}  // namespace mpiacc
