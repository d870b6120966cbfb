// A derived datatype on a device buffer, seen by the protocol as plain packed bytes: a
// DeviceBuffer whose byte offsets are positions in the type's packed stream and whose
// copies pack and unpack on the device (DeviceBuffer::pack_to_host / unpack_from_host of
// the buffer captured over the type's footprint). The protocol already speaks packed
// offsets, so eager payloads, pipeline chunks, bounces and truncation need no change.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "accel/accel.h"
#include "datatype/flat_type.h"

namespace mpiacc {

// The bytes `count` elements of `flat` touch, as [lo, hi) relative to the origin (the
// call's buffer argument). Empty (lo == hi) when they touch none.
void type_footprint(const FlatType &flat, std::int64_t count, std::int64_t *lo, std::int64_t *hi);

class TypedDeviceBuffer final : public DeviceBuffer {
public:
    // `inner` was captured over the footprint; the origin lies `origin` bytes from its
    // start (-lo).
    TypedDeviceBuffer(std::unique_ptr<DeviceBuffer> inner, std::shared_ptr<const FlatType> flat, std::int64_t origin,
                      std::int64_t count);

    BufKind kind() const override { return inner_->kind(); }
    int device_ordinal() const override { return inner_->device_ordinal(); }
    std::size_t capacity() const override { return packed_; }
    int copy_to_host(std::size_t offset, void *dst, std::size_t len, std::unique_ptr<Completion> *done,
                     std::string *why, CopyUse use = CopyUse::POLLED) override;
    int copy_from_host(std::size_t offset, const void *src, std::size_t len, std::unique_ptr<Completion> *done,
                       std::string *why, CopyUse use = CopyUse::POLLED) override;
    PinnedPool *staging_pool() override { return inner_->staging_pool(); }
    void *acquire_receive_bounce(std::size_t bytes) override { return inner_->acquire_receive_bounce(bytes); }
    void release_receive_bounce(void *bounce) override { inner_->release_receive_bounce(bounce); }
    void note_pageable_payload(std::size_t bytes) override { inner_->note_pageable_payload(bytes); }
    std::unique_ptr<Completion> dependency() override { return inner_->dependency(); }
    bool copies_wait_for_user_work() const override { return inner_->copies_wait_for_user_work(); }
    bool stages_nonblocking_sends() const override { return inner_->stages_nonblocking_sends(); }
    // A peer's staging segment is host memory like any other to unpack from.
    bool pin_host_region(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why) override {
        return inner_->pin_host_region(base, bytes, mapping, why);
    }
    bool copies_from_peer_segments() const override { return inner_->copies_from_peer_segments(); }
    // Not offered for a pull, nor pulled into: a peer would take the footprint for packed
    // bytes (ipc_export's default refusal stands). A device-to-device copy packs into, or
    // unpacks from, a plain buffer of the same kind (MPI_Pack between device buffers).
    bool holds_plain_bytes() const override { return false; }
    int copy_to_device(std::size_t offset, DeviceBuffer &dst, std::size_t dst_offset, std::size_t len,
                       std::unique_ptr<Completion> *done, std::string *why) override;
    int copy_from_device(std::size_t offset, DeviceBuffer &src, std::size_t src_offset, std::size_t len,
                         std::unique_ptr<Completion> *done, std::string *why) override;

private:
    bool in_range(std::size_t offset, std::size_t len, const char *what, std::string *why) const;

    std::unique_ptr<DeviceBuffer> inner_;
    std::shared_ptr<const FlatType> flat_;
    std::int64_t origin_;
    std::int64_t count_;
    std::size_t packed_;
};

}  // namespace mpiacc
