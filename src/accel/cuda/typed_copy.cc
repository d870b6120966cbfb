// Derived datatypes on CUDA buffers: the pack kernels (pack.h) between a captured region
// and host memory. Pinned memory this device reaches at its own address (staging slots,
// registered bounces) is written or read by the kernel itself, one pass (BRIEF D5). Any
// other host memory goes through a device scratch from the stream-ordered allocator and
// a copy on the device's ready stream, which only ever holds copies whose input is ready:
// a copy with pageable memory blocks its caller until the stream reaches it, and must
// never reach it behind a user's work (BRIEF S1).
#include <cstdint>

#include "accel/cuda/accel_state.h"
#include "accel/cuda/cuda_buffer.h"
#include "accel/cuda/cuda_quiet.h"
#include "util/error.h"

namespace mpiacc {
namespace cuda {

namespace {

cudaStream_t ready_stream(DeviceState &device, std::string *why) {
    std::lock_guard<std::mutex> lock(device.ready_mutex);
    if (!device.ready_stream) {
        cudaError_t e = quiet(cudaStreamCreateWithFlags(&device.ready_stream, cudaStreamNonBlocking));
        if (e != cudaSuccess) {
            device.ready_stream = nullptr;
            *why = "cudaStreamCreateWithFlags for datatype copies: " + cuda_text(e);
            return nullptr;
        }
    }
    return device.ready_stream;
}

// A pack into a device scratch, then (once test() sees the pack done) a copy of the
// packed bytes into host memory on the ready stream: that copy blocks only for itself.
class ScratchPackCompletion final : public Completion {
public:
    ScratchPackCompletion(std::shared_ptr<DeviceState> device, std::shared_ptr<EventRef> packed, cudaStream_t stream,
                          void *scratch, void *dst, std::size_t len)
        : device_(std::move(device)),
          packed_(std::move(packed)),
          stream_(stream),
          scratch_(scratch),
          dst_(dst),
          len_(len) {}
    ~ScratchPackCompletion() override {
        if (!scratch_) return;
        DeviceGuard guard(device_->ordinal, device_->driver.get());
        quiet(cudaFreeAsync(scratch_, stream_));  // after the pack, in stream order
    }
    bool test() override {
        if (finished_) return true;
        cudaError_t e = quiet(cudaEventQuery(packed_->get()));
        if (e == cudaErrorNotReady) return false;
        finished_ = true;
        if (e != cudaSuccess) return fail("the device pack", e);
        DeviceGuard guard(device_->ordinal, device_->driver.get());
        std::string why;
        cudaStream_t ready = ready_stream(*device_, &why);
        if (!ready) {
            error_ = MPI_ERR_OTHER;
            what_ = why;
            return true;
        }
        e = quiet(cudaMemcpyAsync(dst_, scratch_, len_, cudaMemcpyDeviceToHost, ready));
        if (e == cudaSuccess) e = quiet(cudaStreamSynchronize(ready));
        if (e != cudaSuccess) return fail("copying the packed bytes to host memory", e);
        quiet(cudaFreeAsync(scratch_, ready));
        scratch_ = nullptr;
        return true;
    }
    int error() const override { return error_; }
    std::string what() const override { return what_; }

private:
    bool fail(const char *step, cudaError_t e) {
        error_ = MPI_ERR_OTHER;
        what_ = format("%s of %zu bytes: %s", step, len_, cuda_text(e).c_str());
        return true;
    }
    std::shared_ptr<DeviceState> device_;
    std::shared_ptr<EventRef> packed_;
    cudaStream_t stream_;
    void *scratch_;
    void *dst_;
    std::size_t len_;
    bool finished_ = false;
    int error_ = MPI_SUCCESS;
    std::string what_;
};

}  // namespace

int CudaBuffer::pack_to_host(const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first,
                             void *dst, std::size_t len, std::unique_ptr<Completion> *done, std::string *why) {
    return typed_copy(true, flat, origin, count, first, dst, len, done, why);
}

int CudaBuffer::unpack_from_host(const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first,
                                 const void *src, std::size_t len, std::unique_ptr<Completion> *done,
                                 std::string *why) {
    return typed_copy(false, flat, origin, count, first, const_cast<void *>(src), len, done, why);
}

const CudaBuffer *CudaBuffer::same_device_packed(DeviceBuffer &packed, std::size_t at, std::size_t len,
                                                 std::string *why) const {
    auto *p = dynamic_cast<CudaBuffer *>(&packed);
    if (!p || p->device_->ordinal != device_->ordinal || p->mapping_) {
        *why = "the packed bytes are not CUDA memory of the typed buffer's device";
        return nullptr;
    }
    if (!p->in_bounds(at, len, "packed bytes", why)) return nullptr;
    return p;
}

int CudaBuffer::pack_to_device(const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first,
                               DeviceBuffer &packed, std::size_t at, std::size_t len, std::unique_ptr<Completion> *done,
                               std::string *why) {
    const CudaBuffer *p = same_device_packed(packed, at, len, why);
    if (!p) return MPI_ERR_UNSUPPORTED_OPERATION;
    return typed_copy(true, flat, origin, count, first, p->ptr_ + at, len, done, why, p);
}

int CudaBuffer::unpack_from_device(const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first,
                                   DeviceBuffer &packed, std::size_t at, std::size_t len,
                                   std::unique_ptr<Completion> *done, std::string *why) {
    const CudaBuffer *p = same_device_packed(packed, at, len, why);
    if (!p) return MPI_ERR_UNSUPPORTED_OPERATION;
    return typed_copy(false, flat, origin, count, first, p->ptr_ + at, len, done, why, p);
}

int CudaBuffer::typed_copy(bool pack, const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first,
                           void *host, std::size_t len, std::unique_ptr<Completion> *done, std::string *why,
                           const CudaBuffer *on_device) {
    const char *verb = pack ? "device pack" : "device unpack";
    DeviceGuard guard(device_->ordinal, device_->driver.get());
    if (guard.error() != cudaSuccess) {
        *why = format("%s: cudaSetDevice(%d): %s", verb, device_->ordinal, cuda_text(guard.error()).c_str());
        return MPI_ERR_OTHER;
    }
    char *at = reinterpret_cast<char *>(as_addr(ptr_) + static_cast<std::uintptr_t>(origin));
    const auto first64 = static_cast<std::int64_t>(first);
    const auto len64 = static_cast<std::int64_t>(len);
    cudaStream_t stream = device_->streams[next_copy_stream()];
    auto fail = [&](const char *step, cudaError_t e) {
        *why = format("%s of %zu bytes: %s: %s", verb, len, step, cuda_text(e).c_str());
        return MPI_ERR_OTHER;
    };
    std::shared_ptr<EventRef> finished = device_->events->acquire(why);
    if (!finished) return MPI_ERR_OTHER;
    const bool reachable =
        on_device || (len > 0 && device_->host_at_own_address && owner_->pinned->contains(host, len));
    void *scratch = nullptr;
    cudaError_t e = cudaSuccess;
    if (!reachable && len > 0) {
        // An unpack's host bytes go to the scratch first, on the ready stream: they do
        // not wait for the user's work, and the caller may reuse them once this returns.
        cudaStream_t alloc_on = stream;
        if (!pack) {
            alloc_on = ready_stream(*device_, why);
            if (!alloc_on) return MPI_ERR_OTHER;
        }
        e = quiet(cudaMallocAsync(&scratch, len, alloc_on));
        if (e != cudaSuccess) {
            *why = format("%s of %zu bytes: cudaMallocAsync of its scratch: %s", verb, len, cuda_text(e).c_str());
            return MPI_ERR_NO_MEM;
        }
        if (!pack) {
            std::shared_ptr<EventRef> landed = device_->events->acquire(why);
            if (!landed) return MPI_ERR_OTHER;
            e = quiet(cudaMemcpyAsync(scratch, host, len, cudaMemcpyHostToDevice, alloc_on));
            if (e == cudaSuccess) e = quiet(cudaEventRecord(landed->get(), alloc_on));
            if (e == cudaSuccess) e = quiet(cudaStreamWaitEvent(stream, landed->get(), 0));
            if (e != cudaSuccess) {
                quiet(cudaFreeAsync(scratch, alloc_on));
                return fail("copying the packed bytes to the device", e);
            }
        }
    }
    if (dep_) e = quiet(cudaStreamWaitEvent(stream, dep_->get(), 0));
    if (e == cudaSuccess && on_device && on_device->dep_)
        e = quiet(cudaStreamWaitEvent(stream, on_device->dep_->get(), 0));
    if (e != cudaSuccess) {
        if (scratch) quiet(cudaFreeAsync(scratch, stream));
        return fail("cudaStreamWaitEvent", e);
    }
    void *packed = scratch ? scratch : host;
    int rc = len == 0 ? MPI_SUCCESS
             : pack   ? owner_->packs.enqueue_pack(flat, at, count, first64, len64, packed, stream, why)
                      : owner_->packs.enqueue_unpack(flat, at, count, first64, len64, packed, stream, why);
    if (rc != MPI_SUCCESS) {
        if (scratch) quiet(cudaFreeAsync(scratch, stream));
        return rc;
    }
    if (scratch && !pack) quiet(cudaFreeAsync(scratch, stream));
    e = quiet(cudaEventRecord(finished->get(), stream));
    if (e != cudaSuccess) {
        if (scratch && pack) quiet(cudaFreeAsync(scratch, stream));
        return fail("cudaEventRecord", e);
    }
    if (scratch && pack)
        *done = std::make_unique<ScratchPackCompletion>(device_, std::move(finished), stream, scratch, host, len);
    else
        *done = std::make_unique<EventCompletion>(std::move(finished));
    return MPI_SUCCESS;
}

}  // namespace cuda
}  // namespace mpiacc
