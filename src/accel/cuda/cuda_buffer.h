// A captured CUDA region, or a peer's region mapped through IPC: the DeviceBuffer of the
// CUDA component. Its copies run on its device's streams, after the dependency captured
// with it; route_copy chooses, in one place, how each copy runs (copy.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "accel/accel.h"
#include "accel/cuda/copy.h"
#include "accel/cuda/cuda_accel.h"
#include "accel/cuda/device_state.h"
#include "accel/cuda/events.h"
#include "accel/cuda/ipc.h"
#include "accel/cuda/memtype_cache.h"

namespace mpiacc {
namespace cuda {

class CudaBuffer final : public DeviceBuffer {
public:
    CudaBuffer(std::shared_ptr<CudaAccel::State> owner, std::shared_ptr<DeviceState> device, char *ptr,
               std::size_t capacity, const PointerInfo &info, std::shared_ptr<EventRef> dep, unsigned pair,
               std::shared_ptr<IpcMapping> mapping);

    BufKind kind() const override { return BufKind::CUDA; }
    int device_ordinal() const override { return device_->ordinal; }
    std::size_t capacity() const override { return capacity_; }
    PinnedPool *staging_pool() override { return device_->staging.get(); }
    std::unique_ptr<Completion> dependency() override;
    // A captured buffer's dependency is the user's stream or event (MPIX_ACC_STREAM,
    // MPIX_ACC_EVENT); an imported one's is the peer's, not this process's user's.
    bool copies_wait_for_user_work() const override { return dep_ != nullptr && !mapping_; }

    int copy_to_host(std::size_t offset, void *dst, std::size_t len, std::unique_ptr<Completion> *done,
                     std::string *why, CopyUse use = CopyUse::POLLED) override;
    int copy_from_host(std::size_t offset, const void *src, std::size_t len, std::unique_ptr<Completion> *done,
                       std::string *why, CopyUse use = CopyUse::POLLED) override;
    int copy_to_device(std::size_t offset, DeviceBuffer &dst, std::size_t dst_offset, std::size_t len,
                       std::unique_ptr<Completion> *done, std::string *why) override;

    bool pin_host_region(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why) override;
    // Not with MPIACC_IPC=0, which makes a node's transfers take the path between nodes.
    bool copies_from_peer_segments() const override;

    bool ipc_export(IpcExport *out) override;

    // The pack kernels (pack.h) on this buffer's stream after the dependency: straight
    // into or out of pinned memory this device reaches at its own address, otherwise
    // through a device scratch and a copy (typed_copy.cc).
    int pack_to_host(const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first, void *dst,
                     std::size_t len, std::unique_ptr<Completion> *done, std::string *why) override;
    int unpack_from_host(const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first,
                         const void *src, std::size_t len, std::unique_ptr<Completion> *done,
                         std::string *why) override;

    // The same with the packed bytes in `packed`, CUDA memory on this buffer's device,
    // which the kernel reads or writes itself.
    int pack_to_device(const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first,
                       DeviceBuffer &packed, std::size_t at, std::size_t len, std::unique_ptr<Completion> *done,
                       std::string *why) override;
    int unpack_from_device(const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first,
                           DeviceBuffer &packed, std::size_t at, std::size_t len, std::unique_ptr<Completion> *done,
                           std::string *why) override;

    // The reduction kernel (reduce.h) on this buffer's stream after both dependencies;
    // waits for it. `in` must be CUDA memory this buffer's device reaches.
    int reduce_local(DeviceBuffer &in, const ReduceSpec &spec, std::int64_t count, std::string *why) override;

private:
    // `host` is host memory, or bytes of `on_device` (device memory this device reaches).
    int typed_copy(bool pack, const FlatType &flat, std::int64_t origin, std::int64_t count, std::size_t first,
                   void *host, std::size_t len, std::unique_ptr<Completion> *done, std::string *why,
                   const CudaBuffer *on_device = nullptr);
    // `packed` as a CUDA buffer on this device holding [at, at + len), or null with *why.
    const CudaBuffer *same_device_packed(DeviceBuffer &packed, std::size_t at, std::size_t len, std::string *why) const;
    // An interprocess event that fires with the captured dependency (see cuda_buffer.cc).
    std::shared_ptr<EventRef> exportable_dependency();
    bool in_bounds(std::size_t offset, std::size_t len, const char *what, std::string *why) const;

    // How a copy of `len` bytes from `src` to `dst` runs; `host` is the side in host
    // memory, if one is, and `has_dependency` whether either buffer captured one.
    CopyRoute route_copy(const CudaBuffer &other, void *dst, const void *src, std::size_t len, const void *host,
                         CopyUse use, bool has_dependency);
    bool kernel_addressable(int ordinal) const;
    bool by_kernel(const CudaBuffer &other, void *dst, const void *src, std::size_t len) const;
    bool resident_size_ok(const void *dst, const void *src, std::size_t len) const;
    bool resident_readable_mapping(int ordinal) const;
    bool by_resident(const CudaBuffer &other, void *dst, const void *src, std::size_t len) const;
    bool by_resident_host(const void *dst, const void *src, bool host_pinned, std::size_t len) const;
    bool by_memop(void *dst, const void *src, const void *host, std::size_t len) const;

    // Runs on this buffer's device and stream pair, after both buffers' dependencies.
    int copy(const CudaBuffer &other, void *dst, const void *src, std::size_t len, const void *host, CopyUse use,
             std::unique_ptr<Completion> *done, std::string *why);

    std::shared_ptr<CudaAccel::State> owner_;
    std::shared_ptr<DeviceState> device_;
    char *ptr_;
    std::size_t capacity_;
    PointerInfo info_;
    std::shared_ptr<EventRef> dep_;  // the dependency captured at call time (may be null)
    std::mutex export_mutex_;
    std::shared_ptr<EventRef> ipc_dep_;  // dep_ as an interprocess event, once exported
    unsigned pair_;
    std::atomic<unsigned> flip_{0};
    // The index of this buffer's next copy stream: its pair's two, in turn.
    std::size_t next_copy_stream() {
        return std::size_t{pair_} * 2 + (flip_.fetch_add(1, std::memory_order_relaxed) & 1u);
    }
    std::shared_ptr<IpcMapping> mapping_;  // set for a peer's region
};

}  // namespace cuda
}  // namespace mpiacc
