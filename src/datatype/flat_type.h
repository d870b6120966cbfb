// Any committed MPI datatype, flattened once into a description that does not depend on
// the buffer's address (BRIEF D1), cached until the type is freed: the form device pack
// kernels and the host engine read instead of asking MPICH per message.
//
// Offsets are bytes from the buffer argument of the call (the type's origin, so they may
// be negative; at MPI_BOTTOM they are absolute addresses). Element i of a count starts
// at i * extent(). The packed stream is the type map's order, as MPI_Pack writes it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mpiacc {

// TEMPI's canonical strided form (BRIEF D2): up to kMaxStridedDims loops over one
// contiguous block. In packed order the bytes are
//   for i2 < count[2]: for i1 < count[1]: for i0 < count[0]:
//     `block` bytes at offset + i0 * stride[0] + i1 * stride[1] + i2 * stride[2]
// A dimension not used has count 1 and stride 0.
constexpr int kMaxStridedDims = 3;
struct StridedForm {
    std::int64_t offset = 0;
    std::int64_t block = 0;
    std::int64_t count[kMaxStridedDims] = {1, 1, 1};
    std::int64_t stride[kMaxStridedDims] = {0, 0, 0};
};

// `length` contiguous bytes at `offset`. A type's runs are in packed order; runs that
// follow each other in memory as in the packed stream are merged.
struct Run {
    std::int64_t offset;
    std::int64_t length;
};

// A work unit of the generic device kernels (BRIEF D3): at most kUnitBytes bytes of one
// element, `length` bytes at `offset`, which are bytes [packed, packed + length) of that
// element's packed form. A kernel repeats an element's units for each element of a count.
constexpr std::int64_t kUnitBytes = 1024;
struct WorkUnit {
    std::int64_t offset;
    std::int64_t packed;
    std::int64_t length;
};

class FlatType {
public:
    // Packed bytes of one element (MPI_Type_size).
    std::int64_t size() const { return size_; }
    // Element i of a count starts at i * extent() (MPI_Type_get_extent).
    std::int64_t extent() const { return extent_; }
    // The bytes an element touches lie in [true_lb, true_lb + true_extent).
    std::int64_t true_lb() const { return true_lb_; }
    std::int64_t true_extent() const { return true_extent_; }
    // One element is one run of size() bytes at true_lb() and extent() == size(): count
    // elements are one run, copied as plain bytes.
    bool dense() const { return dense_; }

    // The strided form of `count` elements, when one exists: the element's own form, with
    // a dimension added for count > 1 (none is needed when elements abut). False for a
    // type that has none (indexed, struct, ...), or when count needs a fourth dimension.
    bool strided(std::int64_t count, StridedForm *form) const;
    // One element's runs, in packed order. Made on first use: a strided type with many
    // blocks is never materialised unless a caller asks.
    const std::vector<Run> &runs() const;
    // runs() cut at kUnitBytes, each with its packed position in the element.
    const std::vector<WorkUnit> &units() const;

    // Calls f(offset, packed, length) for each contiguous piece of packed bytes
    // [first, first + len) of `count` elements, in packed order; `packed` counts from
    // `first`. Pieces are as long as the layout allows (a dense type gives one).
    void for_each_piece(std::int64_t count, std::int64_t first, std::int64_t len,
                        const std::function<void(std::int64_t offset, std::int64_t packed, std::int64_t length)> &f) const;

    // A device kind's copy of units() (key: its device or context), made by `make` on
    // first use and released with this FlatType, so it lives as long as the datatype.
    std::shared_ptr<void> device_copy(const void *key, const std::function<std::shared_ptr<void>()> &make) const;

    // Filled by the flattener (flat_type.cc).
    struct Shape;
    explicit FlatType(std::unique_ptr<Shape> shape);
    ~FlatType();
    FlatType(const FlatType &) = delete;
    FlatType &operator=(const FlatType &) = delete;

private:
    std::int64_t size_ = 0, extent_ = 0, true_lb_ = 0, true_extent_ = 0;
    bool dense_ = false;
    std::unique_ptr<Shape> shape_;
    mutable std::once_flag runs_once_, units_once_;
    mutable std::vector<Run> runs_;
    mutable std::vector<WorkUnit> units_;
    mutable std::mutex device_copies_mutex_;
    mutable std::vector<std::pair<const void *, std::shared_ptr<void>>> device_copies_;
};

// The flattened form of `type`, made on first use and kept until free_datatype frees the
// type (a second send of the same type flattens nothing: counter datatype.flatten).
// Null on an invalid or uncommitted type, with an MPI error class in *error and the
// reason in *why.
std::shared_ptr<const FlatType> flat_type(MPI_Datatype type, int *error, std::string *why);

// Drops the cached form of a type being freed (called by free_datatype).
void forget_flat_type(MPI_Datatype type);

// Host engine: packed bytes [first, first + len) of (buf, count, type) into `out`, and
// back. Any range, any type; MPI_BOTTOM (buf null) with absolute displacements.
int pack_bytes(const FlatType &flat, const void *buf, std::int64_t count, std::int64_t first, std::int64_t len,
               void *out);
int unpack_bytes(const FlatType &flat, const void *in, std::int64_t len, void *buf, std::int64_t count,
                 std::int64_t first);

}  // namespace mpiacc
