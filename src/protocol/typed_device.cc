#include "protocol/typed_device.h"

#include <algorithm>

#include "util/error.h"

namespace mpiacc {

void type_footprint(const FlatType &flat, std::int64_t count, std::int64_t *lo, std::int64_t *hi) {
    *lo = *hi = 0;
    if (count <= 0 || flat.size() == 0) return;
    // Element i touches [true_lb + i * extent, + true_extent); the extent may be negative.
    const std::int64_t last = (count - 1) * flat.extent();
    *lo = flat.true_lb() + std::min<std::int64_t>(0, last);
    *hi = flat.true_lb() + flat.true_extent() + std::max<std::int64_t>(0, last);
}

TypedDeviceBuffer::TypedDeviceBuffer(std::unique_ptr<DeviceBuffer> inner, std::shared_ptr<const FlatType> flat,
                                     std::int64_t origin, std::int64_t count)
    : inner_(std::move(inner)),
      flat_(std::move(flat)),
      origin_(origin),
      count_(count),
      packed_(static_cast<std::size_t>(flat_->size() * count)) {}

bool TypedDeviceBuffer::in_range(std::size_t offset, std::size_t len, const char *what, std::string *why) const {
    if (offset <= packed_ && len <= packed_ - offset) return true;
    *why = format("%s: packed bytes [%zu, %zu) are outside the datatype's %zu packed bytes", what, offset, offset + len,
                  packed_);
    return false;
}

int TypedDeviceBuffer::copy_to_host(std::size_t offset, void *dst, std::size_t len, std::unique_ptr<Completion> *done,
                                    std::string *why, CopyUse /*use*/) {
    if (!in_range(offset, len, "copy_to_host", why)) return MPI_ERR_INTERN;
    return inner_->pack_to_host(*flat_, origin_, count_, offset, dst, len, done, why);
}

int TypedDeviceBuffer::copy_from_host(std::size_t offset, const void *src, std::size_t len,
                                      std::unique_ptr<Completion> *done, std::string *why, CopyUse /*use*/) {
    if (!in_range(offset, len, "copy_from_host", why)) return MPI_ERR_INTERN;
    return inner_->unpack_from_host(*flat_, origin_, count_, offset, src, len, done, why);
}

int TypedDeviceBuffer::copy_to_device(std::size_t offset, DeviceBuffer &dst, std::size_t dst_offset, std::size_t len,
                                      std::unique_ptr<Completion> *done, std::string *why) {
    if (!in_range(offset, len, "copy_to_device", why)) return MPI_ERR_INTERN;
    return inner_->pack_to_device(*flat_, origin_, count_, offset, dst, dst_offset, len, done, why);
}

int TypedDeviceBuffer::copy_from_device(std::size_t offset, DeviceBuffer &src, std::size_t src_offset, std::size_t len,
                                        std::unique_ptr<Completion> *done, std::string *why) {
    if (!in_range(offset, len, "copy_from_device", why)) return MPI_ERR_INTERN;
    return inner_->unpack_from_device(*flat_, origin_, count_, offset, src, src_offset, len, done, why);
}

}  // namespace mpiacc
