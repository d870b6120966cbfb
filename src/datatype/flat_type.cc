#include "datatype/flat_type.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "datatype/flat_tree.h"
#include "datatype/layout.h"
#include "util/counters.h"

namespace mpiacc {

struct FlatType::Shape {
    flat::NodeP root;
    std::int64_t size = 0, extent = 0, true_lb = 0, true_extent = 0;
    bool has_form = false;
    StridedForm form;
    int dims = 0;
};

FlatType::FlatType(std::unique_ptr<Shape> shape) : shape_(std::move(shape)) {
    size_ = shape_->size;
    extent_ = shape_->extent;
    true_lb_ = shape_->true_lb;
    true_extent_ = shape_->true_extent;
    const flat::Node &root = *shape_->root;
    dense_ = size_ > 0 && root.kind == flat::Node::Kind::kRuns && root.runs->size() == 1 && extent_ == size_;
}

FlatType::~FlatType() = default;

bool FlatType::strided(std::int64_t count, StridedForm *form) const {
    if (!shape_->has_form || count <= 0) return false;
    StridedForm f = shape_->form;
    int dims = shape_->dims;
    if (!flat::add_dimension(&f, &dims, count, extent_)) return false;
    *form = f;
    return true;
}

const std::vector<Run> &FlatType::runs() const {
    std::call_once(runs_once_, [this] {
        if (size_ == 0) return;
        auto collect = [this](std::int64_t offset, std::int64_t, std::int64_t length) {
            runs_.push_back(Run{offset, length});
        };
        flat::PieceSink<decltype(collect)> sink(collect);
        flat::walk(*shape_->root, 0, 0, size_, sink);
        sink.flush();
    });
    return runs_;
}

const std::vector<WorkUnit> &FlatType::units() const {
    std::call_once(units_once_, [this] {
        std::int64_t packed = 0;
        for (const Run &r : runs()) {
            for (std::int64_t at = 0; at < r.length; at += kUnitBytes) {
                const std::int64_t n = std::min(kUnitBytes, r.length - at);
                units_.push_back(WorkUnit{r.offset + at, packed + at, n});
            }
            packed += r.length;
        }
    });
    return units_;
}

void FlatType::for_each_piece(
    std::int64_t count, std::int64_t first, std::int64_t len,
    const std::function<void(std::int64_t offset, std::int64_t packed, std::int64_t length)> &f) const {
    if (len <= 0 || size_ == 0 || count <= 0) return;
    if (dense_) {
        // Elements abut: the whole range is one piece.
        f(true_lb_ + first, 0, len);
        return;
    }
    flat::PieceSink<const std::function<void(std::int64_t, std::int64_t, std::int64_t)>> sink(f);
    std::int64_t element = first / size_, within = first - element * size_, done = 0;
    while (done < len) {
        const std::int64_t take = std::min(size_ - within, len - done);
        flat::walk(*shape_->root, element * extent_, within, within + take, sink);
        done += take;
        ++element;
        within = 0;
    }
    sink.flush();
}

std::shared_ptr<void> FlatType::device_copy(const void *key, const std::function<std::shared_ptr<void>()> &make) const {
    std::lock_guard<std::mutex> lock(device_copies_mutex_);
    for (const auto &entry : device_copies_)
        if (entry.first == key) return entry.second;
    std::shared_ptr<void> copy = make();
    if (copy) device_copies_.emplace_back(key, copy);
    return copy;
}

namespace {

std::mutex flat_mutex;
std::unordered_map<MPI_Datatype, std::shared_ptr<const FlatType>> flat_cache;

// MPI has no query for "committed": MPI_Pack_size refuses an uncommitted type, and does
// so through its communicator's handler, so it is asked on a private copy of
// MPI_COMM_SELF whose errors return. Made by a split, which, unlike a dup, runs no
// attribute copy callbacks a program set on MPI_COMM_SELF.
MPI_Comm probe_comm() {
    static MPI_Comm comm = [] {
        MPI_Comm c = MPI_COMM_NULL;
        if (PMPI_Comm_split(MPI_COMM_SELF, 0, 0, &c) == MPI_SUCCESS) PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        return c;
    }();
    return comm;
}

bool usable_type(MPI_Datatype type, int *error, std::string *why) {
    if (is_builtin_type(type)) return true;
    const MPI_Comm comm = probe_comm();
    if (comm == MPI_COMM_NULL) return true;
    int bytes = 0;
    const int rc = PMPI_Pack_size(0, type, comm, &bytes);
    if (rc == MPI_SUCCESS) return true;
    int cls = MPI_ERR_TYPE;
    PMPI_Error_class(rc, &cls);
    char text[MPI_MAX_ERROR_STRING];
    int n = 0;
    PMPI_Error_string(rc, text, &n);
    *error = cls;
    *why = std::string(text, static_cast<std::size_t>(n)).find("commit") != std::string::npos
               ? "the datatype is not committed (MPI_Type_commit)"
               : "the datatype is not a valid datatype";
    return false;
}

std::shared_ptr<const FlatType> flatten(MPI_Datatype type, int *error, std::string *why) {
    if (!usable_type(type, error, why)) return nullptr;
    auto shape = std::make_unique<FlatType::Shape>();
    MPI_Count size, lb, extent, tlb, textent;
    if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS || PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent_x(type, &tlb, &textent) != MPI_SUCCESS) {
        *error = MPI_ERR_TYPE;
        *why = "the datatype is not a valid datatype";
        return nullptr;
    }
    shape->root = flat::decode_type(type, error, why);
    if (!shape->root) return nullptr;
    if (shape->root->size != size) {
        *error = MPI_ERR_INTERN;
        *why = "the flattened datatype has " + std::to_string(shape->root->size) + " bytes, MPI_Type_size says " +
               std::to_string(size);
        return nullptr;
    }
    shape->size = size;
    shape->extent = extent;
    // The true bounds from the flattened form: MPICH 4.0's are wider than the data for a
    // darray of a type with a lower bound.
    shape->true_lb = tlb;
    shape->true_extent = textent;
    if (size > 0) {
        std::int64_t lo, hi;
        flat::bounds(*shape->root, &lo, &hi);
        shape->true_lb = lo;
        shape->true_extent = hi - lo;
    }
    shape->has_form = flat::strided_form(*shape->root, &shape->form, &shape->dims);
    MPIACC_COUNT("datatype.flatten");
    return std::make_shared<const FlatType>(std::move(shape));
}

}  // namespace

std::shared_ptr<const FlatType> flat_type(MPI_Datatype type, int *error, std::string *why) {
    if (type == MPI_DATATYPE_NULL) {
        *error = MPI_ERR_TYPE;
        *why = "the datatype is MPI_DATATYPE_NULL";
        return nullptr;
    }
    {
        std::lock_guard<std::mutex> lock(flat_mutex);
        auto it = flat_cache.find(type);
        if (it != flat_cache.end()) return it->second;
    }
    // Flattened outside the lock: decoding calls MPICH, and a large type takes a while.
    std::shared_ptr<const FlatType> made = flatten(type, error, why);
    if (!made) return nullptr;
    std::lock_guard<std::mutex> lock(flat_mutex);
    auto inserted = flat_cache.emplace(type, made);
    return inserted.first->second;
}

void forget_flat_type(MPI_Datatype type) {
    std::shared_ptr<const FlatType> dropped;
    {
        std::lock_guard<std::mutex> lock(flat_mutex);
        auto it = flat_cache.find(type);
        if (it == flat_cache.end()) return;
        dropped = std::move(it->second);
        flat_cache.erase(it);
    }
    // Released here, out of the lock: device copies free device memory.
}

namespace {

// memcpy of a size the compiler sees for the common small blocks.
inline void copy_bytes(char *to, const char *from, std::int64_t n) {
    switch (n) {
        case 1: *to = *from; return;
        case 2: std::memcpy(to, from, 2); return;
        case 4: std::memcpy(to, from, 4); return;
        case 8: std::memcpy(to, from, 8); return;
        case 16: std::memcpy(to, from, 16); return;
        default: std::memcpy(to, from, static_cast<std::size_t>(n)); return;
    }
}

// n blocks of `take` bytes, `stride` apart, to or from consecutive packed bytes; the
// common small sizes are constants to the compiler.
template <bool kPack, std::int64_t kTake>
void copy_row_of(char *at, std::int64_t stride, char *packed, std::int64_t n) {
    for (std::int64_t k = 0; k < n; ++k, at += stride, packed += kTake) {
        if (kPack) {
            std::memcpy(packed, at, kTake);
        } else {
            std::memcpy(at, packed, kTake);
        }
    }
}

template <bool kPack>
void copy_row(char *at, std::int64_t stride, char *packed, std::int64_t take, std::int64_t n) {
    switch (take) {
        case 4: copy_row_of<kPack, 4>(at, stride, packed, n); return;
        case 8: copy_row_of<kPack, 8>(at, stride, packed, n); return;
        case 16: copy_row_of<kPack, 16>(at, stride, packed, n); return;
        default: break;
    }
    for (std::int64_t k = 0; k < n; ++k, at += stride, packed += take) {
        if (kPack) {
            copy_bytes(packed, at, take);
        } else {
            copy_bytes(at, packed, take);
        }
    }
}

// Packed bytes [first, first + len) of a strided form, indices computed from `first`:
// the loop nest of the form, without a piece callback per block.
template <bool kPack>
void copy_strided(const StridedForm &f, const void *buf, std::int64_t first, std::int64_t len, char *packed) {
    const std::int64_t b = first / f.block;
    std::int64_t within = first - b * f.block;
    std::int64_t i0 = b % f.count[0], i1 = (b / f.count[0]) % f.count[1], i2 = b / (f.count[0] * f.count[1]);
    for (std::int64_t done = 0; done < len;) {
        char *at = typed_address(
            buf, static_cast<MPI_Aint>(f.offset + i0 * f.stride[0] + i1 * f.stride[1] + i2 * f.stride[2] + within));
        // Whole blocks along the innermost dimension, then at most one part of a block.
        std::int64_t n = within == 0 ? std::min(f.count[0] - i0, (len - done) / f.block) : 0;
        std::int64_t take = f.block;
        if (n == 0) {
            n = 1;
            take = std::min(f.block - within, len - done);
        }
        copy_row<kPack>(at, f.stride[0], packed + done, take, n);
        done += n * take;
        within = take < f.block - within ? within + take : 0;
        if (within != 0) break;  // the range ended inside a block
        i0 += n;
        if (i0 == f.count[0]) {
            i0 = 0;
            if (++i1 == f.count[1]) {
                i1 = 0;
                ++i2;
            }
        }
    }
}

}  // namespace

int pack_bytes(const FlatType &flat, const void *buf, std::int64_t count, std::int64_t first, std::int64_t len,
               void *out) {
    if (count < 0 || first < 0 || len < 0 || first + len > count * flat.size()) return MPI_ERR_COUNT;
    if (len == 0) return MPI_SUCCESS;
    char *to = static_cast<char *>(out);
    StridedForm form;
    if (flat.strided(count, &form)) {
        copy_strided<true>(form, buf, first, len, to);
        return MPI_SUCCESS;
    }
    flat.for_each_piece(count, first, len, [&](std::int64_t offset, std::int64_t packed, std::int64_t length) {
        std::memcpy(to + packed, typed_address(buf, static_cast<MPI_Aint>(offset)), static_cast<std::size_t>(length));
    });
    return MPI_SUCCESS;
}

int unpack_bytes(const FlatType &flat, const void *in, std::int64_t len, void *buf, std::int64_t count,
                 std::int64_t first) {
    if (count < 0 || first < 0 || len < 0 || first + len > count * flat.size()) return MPI_ERR_COUNT;
    if (len == 0) return MPI_SUCCESS;
    char *from = const_cast<char *>(static_cast<const char *>(in));
    StridedForm form;
    if (flat.strided(count, &form)) {
        copy_strided<false>(form, buf, first, len, from);
        return MPI_SUCCESS;
    }
    flat.for_each_piece(count, first, len, [&](std::int64_t offset, std::int64_t packed, std::int64_t length) {
        std::memcpy(typed_address(buf, static_cast<MPI_Aint>(offset)), from + packed, static_cast<std::size_t>(length));
    });
    return MPI_SUCCESS;
}

}  // namespace mpiacc
