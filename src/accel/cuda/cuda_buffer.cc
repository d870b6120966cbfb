#include "accel/cuda/cuda_buffer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "accel/cuda/accel_state.h"
#include "util/error.h"

namespace mpiacc {
namespace cuda {

namespace {

// The longest copy the resident copier takes with an end that is not 16-byte aligned: its
// warp then moves a byte a lane at a time, one NVLink or PCIe round trip per 32 bytes.
constexpr std::size_t kResidentUnalignedMax = 256;

}  // namespace

CudaBuffer::CudaBuffer(std::shared_ptr<CudaAccel::State> owner, std::shared_ptr<DeviceState> device, char *ptr,
                       std::size_t capacity, const PointerInfo &info, std::shared_ptr<EventRef> dep, unsigned pair,
                       std::shared_ptr<IpcMapping> mapping)
    : owner_(std::move(owner)),
      device_(std::move(device)),
      ptr_(ptr),
      capacity_(capacity),
      info_(info),
      dep_(std::move(dep)),
      pair_(pair),
      mapping_(std::move(mapping)) {}

std::unique_ptr<Completion> CudaBuffer::dependency() {
    if (!dep_) return nullptr;
    return std::make_unique<EventCompletion>(dep_);
}

int CudaBuffer::copy_to_host(std::size_t offset, void *dst, std::size_t len, std::unique_ptr<Completion> *done,
                             std::string *why, CopyUse use) {
    if (!in_bounds(offset, len, "copy_to_host", why)) return MPI_ERR_INTERN;
    return copy(*this, dst, ptr_ + offset, len, dst, use, done, why);
}

int CudaBuffer::copy_from_host(std::size_t offset, const void *src, std::size_t len, std::unique_ptr<Completion> *done,
                               std::string *why, CopyUse use) {
    if (!in_bounds(offset, len, "copy_from_host", why)) return MPI_ERR_INTERN;
    return copy(*this, ptr_ + offset, src, len, src, use, done, why);
}

int CudaBuffer::copy_to_device(std::size_t offset, DeviceBuffer &dst, std::size_t dst_offset, std::size_t len,
                               std::unique_ptr<Completion> *done, std::string *why) {
    auto *target = dynamic_cast<CudaBuffer *>(&dst);
    if (!target) {
        *why = "copy_to_device: the destination is not a CUDA buffer";
        return MPI_ERR_INTERN;
    }
    if (!in_bounds(offset, len, "copy_to_device (source)", why) ||
        !target->in_bounds(dst_offset, len, "copy_to_device (destination)", why))
        return MPI_ERR_INTERN;
    // The destination's device pulls: with an IPC source that is the device the
    // mapping was opened on, and cudaMemcpyAsync routes a peer copy over NVLink.
    // A pull: waited for by its event whatever the caller does next (route_copy).
    return target->copy(*this, target->ptr_ + dst_offset, ptr_ + offset, len, nullptr, CopyUse::POLLED, done, why);
}

bool CudaBuffer::pin_host_region(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why) {
    return owner_->pin_peer_segment(base, bytes, mapping, why);
}

bool CudaBuffer::copies_from_peer_segments() const { return owner_->settings.ipc; }

bool CudaBuffer::ipc_export(IpcExport *out) {
    // Managed memory has no IPC handle, and an imported mapping is not ours to pass on.
    if (mapping_ || info_.kind != MemoryKind::DEVICE || info_.size == 0) return false;
    IpcExport e;
    std::memset(&e, 0, sizeof e);
    cudaIpcMemHandle_t handle;
    if (!owner_->ipc.export_mem_handle(info_, &handle)) return false;
    std::memcpy(e.mem_handle, &handle, sizeof handle);
    e.offset = as_addr(ptr_) - info_.base;
    e.buffer_id = info_.buffer_id;
    e.device_pci = device_->pci_location;
    if (dep_) {
        std::shared_ptr<EventRef> shareable = exportable_dependency();
        cudaIpcEventHandle_t ev;
        if (!shareable || !shareable->ipc_handle(&ev)) return false;
        std::memcpy(e.event_handle, &ev, sizeof ev);
        e.has_event = 1;
    }
    *out = e;
    return true;
}

// The captured dependency itself when it was captured as an interprocess event (a send
// offered for a pull), else one made on first export, which our stream records after
// waiting on the dependency: a wait and a second record that capturing it as one saves
// (docs/performance.md, 'CUDA driver call costs').
std::shared_ptr<EventRef> CudaBuffer::exportable_dependency() {
    std::lock_guard<std::mutex> lock(export_mutex_);
    if (ipc_dep_) return ipc_dep_;
    cudaIpcEventHandle_t handle;
    if (dep_->ipc_handle(&handle)) {
        ipc_dep_ = dep_;
        return ipc_dep_;
    }
    std::string why;
    auto ev = device_->ipc_events->acquire(&why);
    if (!ev) return nullptr;
    DeviceGuard guard(device_->ordinal, device_->driver.get());
    cudaStream_t s = device_->streams[std::size_t{pair_} * 2];
    if (guard.error() != cudaSuccess || quiet(cudaStreamWaitEvent(s, dep_->get(), 0)) != cudaSuccess ||
        quiet(cudaEventRecord(ev->get(), s)) != cudaSuccess)
        return nullptr;
    ipc_dep_ = std::move(ev);
    return ipc_dep_;
}

bool CudaBuffer::in_bounds(std::size_t offset, std::size_t len, const char *what, std::string *why) const {
    if (offset <= capacity_ && len <= capacity_ - offset) return true;
    *why = format("%s: bytes [%zu, %zu) are outside the %zu-byte CUDA buffer", what, offset, offset + len, capacity_);
    return false;
}

// Whether a copy kernel on device `ordinal` reads or writes this region: plain device
// memory of that device, or a mapping of another process's memory on that device.
// (Managed memory is left to the copy engines: a kernel touching it could fault
// pages away from the host while the application uses them.)
bool CudaBuffer::kernel_addressable(int ordinal) const {
    if (info_.kind != MemoryKind::DEVICE || info_.ordinal != ordinal) return false;
    return !mapping_ || (mapping_->kernel_ok && mapping_->device == ordinal);
}

// Whether a copy of `len` bytes from `src` to `dst`, both device memory, runs as
// mpiacc_copy_small on this buffer's device: small, 16-byte aligned, and both sides
// addressable by the kernel. A copy with a host side stays on a copy engine, which
// issues a host copy faster than a kernel launches (docs/performance.md, 'One-block copy
// kernel').
bool CudaBuffer::by_kernel(const CudaBuffer &other, void *dst, const void *src, std::size_t len) const {
    if (!device_->copy_kernel || len == 0 || len > std::min(kKernelCopyLimit, owner_->settings.cuda_kernel_copy_max))
        return false;
    if ((as_addr(dst) | as_addr(src)) % 16 != 0) return false;
    return kernel_addressable(device_->ordinal) && other.kernel_addressable(device_->ordinal);
}

// Whether the device's resident copier may take a copy of `len` bytes from `src` to
// `dst`, by size: small, and 16-byte aligned at both ends or short enough to go byte
// by byte.
bool CudaBuffer::resident_size_ok(const void *dst, const void *src, std::size_t len) const {
    if (!device_->resident || len == 0 || len > owner_->settings.cuda_kernel_copy_max) return false;
    if (device_->time_sliced.load(std::memory_order_relaxed)) return false;
    return (as_addr(dst) | as_addr(src)) % 16 == 0 || len <= kResidentUnalignedMax;
}

// Whether a peer's region mapped here is one the resident copier on `ordinal` reads.
bool CudaBuffer::resident_readable_mapping(int ordinal) const {
    return mapping_ && mapping_->device == ordinal && mapping_->peer_readable && info_.kind == MemoryKind::DEVICE;
}

// Whether a pull of `len` bytes from `other`, a peer's region mapped here, into `dst`
// in this buffer (plain memory of this device) may go to the device's resident copier.
bool CudaBuffer::by_resident(const CudaBuffer &other, void *dst, const void *src, std::size_t len) const {
    return resident_size_ok(dst, src, len) && !mapping_ && kernel_addressable(device_->ordinal) &&
           other.resident_readable_mapping(device_->ordinal);
}

// Whether a copy of `len` bytes between pinned host memory that State::pinned knows
// (`host_pinned`) and this buffer (plain memory of this device, or a peer's region
// mapped here that this device reads) may go to the device's resident copier, the
// kernel reading or writing the host side at its own address. Staged small messages
// then skip a copy engine's launch and completion on both sides: the sender's copy
// out of its device buffer and the receiver's copy in.
bool CudaBuffer::by_resident_host(const void *dst, const void *src, bool host_pinned, std::size_t len) const {
    if (!host_pinned || !device_->host_at_own_address || !resident_size_ok(dst, src, len)) return false;
    return mapping_ ? resident_readable_mapping(device_->ordinal) : kernel_addressable(device_->ordinal);
}

// Whether a copy of `len` bytes from host memory `src` into `dst`, this buffer's own
// device memory (not an IPC mapping), goes as stream memory writes of its words
// (copy_memop.cc): small, in whole 4-byte words at 4-byte addresses.
bool CudaBuffer::by_memop(void *dst, const void *src, const void *host, std::size_t len) const {
    return device_->memop_writes.load(std::memory_order_relaxed) && host == src && !mapping_ && len > 0 &&
           len <= kMemopMaxBytes && len % 4 == 0 && as_addr(dst) % 4 == 0 && kernel_addressable(device_->ordinal);
}

CopyRoute CudaBuffer::route_copy(const CudaBuffer &other, void *dst, const void *src, std::size_t len, const void *host,
                                 CopyUse use, bool has_dependency) {
    CopyRoute route;
    // A memop write takes its words at the call and never blocks it: no reason to
    // hold it back for a pageable source.
    route.memop = by_memop(dst, src, host, len);
    // Our staging slots and registered buffers (the common case), for the ordering and
    // for the resident copier; then the driver, for the application's pinned memory.
    const bool host_known_pinned = host && !route.memop && owner_->pinned->contains(host, len);
    route.host_orders = host && !route.memop && !host_known_pinned && !owner_->driver_pinned(host);
    const bool pull = mapping_ || other.mapping_;
    route.stream_index = pull ? kPullStream : next_copy_stream();
    // Waited for at once, a copy goes without an event only where synchronizing the
    // stream ends within the copy's own running time: no dependency to wait behind.
    // IPC pulls keep theirs (copy_stream_wait.cc).
    route.waited_at_once = use == CopyUse::WAITED_AT_ONCE && !has_dependency && !pull;
    route.one_block_kernel = !host && by_kernel(other, dst, src, len);
    // A payload that goes as memory writes stays so: it needs no kernel, and its words
    // are taken at the call.
    route.offer_resident = !route.memop && (host ? by_resident_host(dst, src, host_known_pinned, len)
                                                 : pull && by_resident(other, dst, src, len));
    return route;
}

int CudaBuffer::copy(const CudaBuffer &other, void *dst, const void *src, std::size_t len, const void *host,
                     CopyUse use, std::unique_ptr<Completion> *done, std::string *why) {
    std::vector<std::shared_ptr<EventRef>> deps;
    std::vector<std::shared_ptr<void>> keep;
    auto add = [&](const CudaBuffer &b) {
        if (b.dep_) deps.push_back(b.dep_);
        if (b.mapping_) keep.push_back(b.mapping_);
    };
    add(*this);
    if (&other != this) add(other);
    const CopyRoute route = route_copy(other, dst, src, len, host, use, !deps.empty());
    auto op = std::make_unique<CopyCompletion>(device_, route, dst, src, len, std::move(deps), std::move(keep));
    int rc = op->begin(why);
    if (rc != MPI_SUCCESS) return rc;
    *done = std::move(op);
    return MPI_SUCCESS;
}

int CudaBuffer::reduce_local(DeviceBuffer &in_buffer, const ReduceSpec &spec, std::int64_t count, std::string *why) {
    auto *in = dynamic_cast<CudaBuffer *>(&in_buffer);
    if (!in) {
        *why = "inbuf and inoutbuf must both be CUDA memory";
        return MPI_ERR_BUFFER;
    }
    if (in->device_->ordinal != device_->ordinal) {
        *why = format("inbuf is on CUDA device %d and inoutbuf on device %d: a reduction takes both on one device",
                      in->device_->ordinal, device_->ordinal);
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    const std::size_t bytes = static_cast<std::size_t>(count) * spec.extent;
    if (count < 0 || bytes > capacity_ || bytes > in->capacity_) {
        *why = format("%lld elements of %zu bytes are outside the captured CUDA regions", static_cast<long long>(count),
                      spec.extent);
        return MPI_ERR_COUNT;
    }
    if (count == 0) return MPI_SUCCESS;
    DeviceGuard guard(device_->ordinal, device_->driver.get());
    if (guard.error() != cudaSuccess) {
        *why = format("cudaSetDevice(%d): %s", device_->ordinal, cuda_text(guard.error()).c_str());
        return MPI_ERR_OTHER;
    }
    cudaStream_t stream = device_->streams[next_copy_stream()];
    cudaError_t e = cudaSuccess;
    if (dep_) e = quiet(cudaStreamWaitEvent(stream, dep_->get(), 0));
    if (e == cudaSuccess && in->dep_) e = quiet(cudaStreamWaitEvent(stream, in->dep_->get(), 0));
    if (e != cudaSuccess) {
        *why = format("%s on %s: cudaStreamWaitEvent: %s", spec.op_name.c_str(), spec.type_name.c_str(),
                      cuda_text(e).c_str());
        return MPI_ERR_OTHER;
    }
    int rc = owner_->reduces.enqueue(spec, in->ptr_, ptr_, count, stream, why);
    if (rc != MPI_SUCCESS) return rc;
    // A blocking call: its own kernel, behind the user's work it was ordered after.
    e = quiet(cudaStreamSynchronize(stream));
    if (e != cudaSuccess) {
        *why = format("%s on %s: the kernel failed: %s", spec.op_name.c_str(), spec.type_name.c_str(),
                      cuda_text(e).c_str());
        return MPI_ERR_OTHER;
    }
    return MPI_SUCCESS;
}

}  // namespace cuda
}  // namespace mpiacc
