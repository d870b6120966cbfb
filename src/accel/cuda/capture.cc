// Making buffers: a user's region captured with its dependency at call time, and a
// peer's region mapped through IPC.
#include <cstring>

#include "accel/cuda/accel_state.h"
#include "accel/cuda/cuda_buffer.h"
#include "util/counters.h"
#include "util/error.h"
#include "util/probe.h"

namespace mpiacc {

using cuda::as_addr;
using cuda::cuda_text;
using cuda::DeviceGuard;

int CudaAccel::State::capture(void *addr, std::size_t bytes, const BufferAttrs &attrs,
                              std::unique_ptr<DeviceBuffer> *out, std::string *why) {
    out->reset();
    if (!available()) {
        *why = format("buf %p is a CUDA buffer, but no CUDA device is usable in this process (%s)", addr,
                      unavailable_why.c_str());
        return MPI_ERR_BUFFER;
    }
    if (!addr) {
        if (bytes == 0) return MPI_SUCCESS;  // nothing to move: host path
        *why = format("buf is NULL but the datatype says MPIX_ACC_BUF_CUDA (%zu bytes)", bytes);
        return MPI_ERR_BUFFER;
    }

    PointerInfo info, stale;
    std::string query_why;
    MPIACC_PROBE("capture.resolve");
    const bool resolved = cache.resolve(addr, &info, &stale, &query_why);
    MPIACC_PROBE("capture.resolved");
    if (!resolved) {
        *why = format("buf %p: the CUDA driver could not classify the pointer: %s", addr, query_why.c_str());
        return MPI_ERR_BUFFER;
    }
    if (info.kind == MemoryKind::HOST_PINNED) return MPI_SUCCESS;  // host memory, already pinned
    if (info.kind == MemoryKind::HOST) {
        if (!attrs.kind_given) return MPI_SUCCESS;  // autodetected from a stale range: host after all
        if (stale.is_cuda())
            *why = format("buf %p is in a CUDA allocation that has been freed (it was %zu bytes at %p on device %d)",
                          addr, stale.size, reinterpret_cast<void *>(stale.base), stale.ordinal);
        else
            *why = format(
                "buf %p is not CUDA memory (host memory, or a freed device allocation) but the datatype "
                "says MPIX_ACC_BUF_CUDA",
                addr);
        return MPI_ERR_BUFFER;
    }

    if (info.size != 0) {
        const std::size_t offset = as_addr(addr) - info.base;
        if (bytes > info.size - offset) {
            *why = format("buf %p with %zu bytes runs %zu bytes past the end of its CUDA allocation (%zu bytes at %p)",
                          addr, bytes, bytes - (info.size - offset), info.size, reinterpret_cast<void *>(info.base));
            return MPI_ERR_COUNT;
        }
    }

    const bool managed = info.kind == MemoryKind::MANAGED;
    int device = info.ordinal;
    if (attrs.device_given) {
        const int wanted = static_cast<int>(reinterpret_cast<std::intptr_t>(attrs.device));
        if (wanted < 0 || wanted >= device_count) {
            *why = format("MPIX_ACC_DEVICE %d is not a CUDA device ordinal (this process sees %d device%s)", wanted,
                          device_count, device_count == 1 ? "" : "s");
            return MPI_ERR_ARG;
        }
        if (!managed && wanted != device) {
            *why =
                format("MPIX_ACC_DEVICE says CUDA device %d but buf %p is memory of device %d", wanted, addr, device);
            return MPI_ERR_ARG;
        }
        device = wanted;  // managed memory: the caller's choice of device runs the copies
    }
    if (attrs.stream) {
        auto stream = static_cast<cudaStream_t>(attrs.stream);
        // Asked first: other stream queries on a stream under capture invalidate the
        // user's capture (seen on the H200 machine with CUDA 13).
        cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        if (quiet(cudaStreamIsCapturing(stream, &capturing)) == cudaSuccess &&
            capturing != cudaStreamCaptureStatusNone) {
            *why = format(
                "MPIX_ACC_STREAM %p is being captured into a CUDA graph; MPI-ACC cannot order a transfer "
                "after work that has not been launched",
                attrs.stream);
            return MPI_ERR_ARG;
        }
        int stream_device = -1;
        cudaError_t e = quiet(cudaStreamGetDevice(stream, &stream_device));
        if (e != cudaSuccess) {
            *why = format("MPIX_ACC_STREAM %p is not a valid CUDA stream (cudaStreamGetDevice: %s)", attrs.stream,
                          cuda_text(e).c_str());
            return MPI_ERR_ARG;
        }
        if (stream_device != device && (!managed || attrs.device_given)) {
            *why = format("MPIX_ACC_STREAM %p belongs to CUDA device %d but buf %p is %s device %d", attrs.stream,
                          stream_device, addr, managed ? "given by MPIX_ACC_DEVICE as" : "memory of", device);
            return MPI_ERR_ARG;
        }
        device = stream_device;
    }
    if (attrs.event) {
        cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(attrs.event));
        if (e != cudaSuccess && e != cudaErrorNotReady) {
            *why = format("MPIX_ACC_EVENT %p is not a valid CUDA event (cudaEventQuery: %s)", attrs.event,
                          cuda_text(quiet(e)).c_str());
            return MPI_ERR_ARG;
        }
    }
    if (device < 0 || device >= device_count) {
        // Managed memory the driver ties to no device: use the caller's current one.
        if (quiet(cudaGetDevice(&device)) != cudaSuccess) device = 0;
    }

    auto state = device_state(device, why);
    if (!state) return MPI_ERR_OTHER;
    const unsigned pair = state->next_pair.fetch_add(1, std::memory_order_relaxed) % cuda::kStreamPairs;
    std::shared_ptr<cuda::EventRef> dep;
    int rc = capture_dependency(*state, pair, attrs, &dep, why);
    if (rc != MPI_SUCCESS) return rc;
    *out = std::make_unique<cuda::CudaBuffer>(shared_from_this(), state, static_cast<char *>(addr), bytes, info,
                                              std::move(dep), pair, nullptr);
    return MPI_SUCCESS;
}

// The dependency as it stands now (BRIEF S1): later work the user puts on the stream, or a
// later re-record of the event, does not move it. For a send offered for an IPC pull it is
// an interprocess event, which the envelope carries as it is (exportable_dependency).
int CudaAccel::State::capture_dependency(cuda::DeviceState &device, unsigned pair, const BufferAttrs &attrs,
                                         std::shared_ptr<cuda::EventRef> *dep, std::string *why) {
    DeviceGuard guard(device.ordinal, driver.get());
    if (guard.error() != cudaSuccess) {
        *why = format("cudaSetDevice(%d): %s", device.ordinal, cuda_text(guard.error()).c_str());
        return MPI_ERR_OTHER;
    }
    cuda::EventPool &pool = attrs.ipc_offer ? *device.ipc_events : *device.events;
    if (!attrs.stream && !attrs.event) return capture_default_streams(device, pair, pool, dep, why);
    std::shared_ptr<cuda::EventRef> marker;
    if (attrs.stream) {
        marker = (attrs.event ? *device.events : pool).acquire(why);
        if (!marker) return MPI_ERR_OTHER;
        cudaError_t e = quiet(cudaEventRecord(marker->get(), static_cast<cudaStream_t>(attrs.stream)));
        if (e != cudaSuccess) {
            *why = format("cudaEventRecord on MPIX_ACC_STREAM %p: %s", attrs.stream, cuda_text(e).c_str());
            return MPI_ERR_OTHER;
        }
        if (!attrs.event) {
            *dep = std::move(marker);
            return MPI_SUCCESS;
        }
    }
    // The user's event is only ever waited on by our stream, never re-recorded by us: a
    // wait captures the event's state at the time it is enqueued.
    cudaStream_t s = device.streams[std::size_t{pair} * 2];
    auto joined = pool.acquire(why);
    if (!joined) return MPI_ERR_OTHER;
    cudaError_t e = quiet(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(attrs.event), 0));
    if (e == cudaSuccess && marker) e = quiet(cudaStreamWaitEvent(s, marker->get(), 0));
    if (e == cudaSuccess) e = quiet(cudaEventRecord(joined->get(), s));
    if (e != cudaSuccess) {
        *why = format("ordering after MPIX_ACC_EVENT %p: %s", attrs.event, cuda_text(e).c_str());
        return MPI_ERR_OTHER;
    }
    *dep = std::move(joined);
    return MPI_SUCCESS;
}

// A buffer named without a stream or event is ordered after the work the calling thread
// put on the default streams (legacy, and per-thread for code built for it): CUDA-aware
// codes write a buffer with cudaMemcpy or cudaMemset and call MPI at once, while our
// streams are non-blocking and pageable cudaMemcpy may return before its bytes land. An
// idle default stream, the usual case, leaves no dependency. A query costs 0.2 us, but
// over a microsecond while any kernel runs (docs/performance.md, 'Ordering after the
// default stream', which also has the cheaper-looking ways that measured worse).
int CudaAccel::State::capture_default_streams(cuda::DeviceState &device, unsigned pair, cuda::EventPool &pool,
                                              std::shared_ptr<cuda::EventRef> *dep, std::string *why) {
    std::shared_ptr<cuda::EventRef> markers[2];
    int busy = 0;
    for (cudaStream_t s : {cudaStreamLegacy, cudaStreamPerThread}) {
        cudaError_t e = quiet(cudaStreamQuery(s));
        if (e == cudaSuccess) continue;
        if (e != cudaErrorNotReady) {
            *why = format("cudaStreamQuery on the %s default stream: %s",
                          s == cudaStreamLegacy ? "legacy" : "per-thread", cuda_text(e).c_str());
            return MPI_ERR_OTHER;
        }
        auto marker = pool.acquire(why);
        if (!marker) return MPI_ERR_OTHER;
        e = quiet(cudaEventRecord(marker->get(), s));
        if (e != cudaSuccess) {
            *why = "cudaEventRecord on the default stream: " + cuda_text(e);
            return MPI_ERR_OTHER;
        }
        markers[busy++] = std::move(marker);
    }
    if (busy > 0) MPIACC_COUNT("cuda.capture.default_stream");
    if (busy < 2) {
        *dep = std::move(markers[0]);  // null when both were idle
        return MPI_SUCCESS;
    }
    // Both busy (a program that uses both): one event that fires after the two.
    cudaStream_t s = device.streams[std::size_t{pair} * 2];
    auto joined = pool.acquire(why);
    if (!joined) return MPI_ERR_OTHER;
    cudaError_t e = quiet(cudaStreamWaitEvent(s, markers[0]->get(), 0));
    if (e == cudaSuccess) e = quiet(cudaStreamWaitEvent(s, markers[1]->get(), 0));
    if (e == cudaSuccess) e = quiet(cudaEventRecord(joined->get(), s));
    if (e != cudaSuccess) {
        *why = "ordering after the default streams: " + cuda_text(e);
        return MPI_ERR_OTHER;
    }
    *dep = std::move(joined);
    return MPI_SUCCESS;
}

int CudaAccel::State::ipc_import(const IpcExport &peer, std::size_t bytes, int device,
                                 std::unique_ptr<DeviceBuffer> *out, std::string *why) {
    out->reset();
    if (!available()) {
        *why = "CUDA IPC: no CUDA device is usable in this process (" + unavailable_why + ")";
        return MPI_ERR_OTHER;
    }
    // Mapped on the device that pulls: the receive buffer's, whose stream issues the copy
    // (copy_to_device); into host memory, the device this thread works with.
    if (device < 0) {
        cudaError_t e = quiet(cudaGetDevice(&device));
        if (e != cudaSuccess) {
            *why = "CUDA IPC: cudaGetDevice: " + cuda_text(e);
            return MPI_ERR_OTHER;
        }
    }
    auto state = device_state(device, why);
    if (!state) return MPI_ERR_OTHER;

    std::shared_ptr<cuda::IpcMapping> mapping;
    std::shared_ptr<cuda::EventRef> ready;
    int rc = ipc.open(peer, *state, device_count, settings.verbose, &mapping, &ready, why);
    if (rc != MPI_SUCCESS) return rc;
    if (mapping->size != 0 && (peer.offset > mapping->size || bytes > mapping->size - peer.offset)) {
        *why = format("CUDA IPC: the peer's region (offset %llu, %zu bytes) runs past its %zu-byte allocation",
                      static_cast<unsigned long long>(peer.offset), bytes, mapping->size);
        return MPI_ERR_OTHER;
    }
    PointerInfo info;
    info.kind = MemoryKind::DEVICE;
    info.ordinal = device;
    info.base = as_addr(mapping->base);
    info.size = mapping->size;
    const unsigned pair = state->next_pair.fetch_add(1, std::memory_order_relaxed) % cuda::kStreamPairs;
    char *region = static_cast<char *>(mapping->base) + peer.offset;
    *out = std::make_unique<cuda::CudaBuffer>(shared_from_this(), state, region, bytes, info, std::move(ready), pair,
                                              std::move(mapping));
    return MPI_SUCCESS;
}

}  // namespace mpiacc
