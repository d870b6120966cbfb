#include "coll/coll_call.h"

#include <algorithm>

#include "accel/reduce_op.h"
#include "core/buffer_desc.h"
#include "datatype/layout.h"
#include "protocol/transfer.h"
#include "util/error.h"

namespace mpiacc {

namespace {

// Whether `count` elements of `type` leave no gap between their bytes.
bool dense(std::int64_t count, MPI_Datatype type) {
    MPI_Count size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
    PMPI_Type_size_x(type, &size);
    PMPI_Type_get_extent_x(type, &lb, &extent);
    PMPI_Type_get_true_extent_x(type, &true_lb, &true_extent);
    return size == true_extent && (count <= 1 || extent == size);
}

}  // namespace

void CollCall::name(int slot, const char *arg, const void *user) {
    buf_[slot].arg = arg;
    buf_[slot].user = const_cast<void *>(user);
}

int CollCall::describe(int slot, bool in, bool out, const std::vector<CollPiece> &pieces, std::string *why) {
    CollBuffer &b = buf_[slot];
    b.significant = true;
    b.in = in;
    b.out = out;
    b.types.clear();
    // The footprint, and whether the written pieces tile it.
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;
    bool all_dense = true;
    for (const CollPiece &p : pieces) {
        if (p.type == MPI_DATATYPE_NULL) continue;  // MPICH reports it
        b.types.push_back(p.type);
        note_predefined(p.type);
        if (p.count <= 0) continue;
        MPI_Count lb = 0, extent = 0, true_lb = 0, true_extent = 0;
        if (PMPI_Type_get_extent_x(p.type, &lb, &extent) != MPI_SUCCESS ||
            PMPI_Type_get_true_extent_x(p.type, &true_lb, &true_extent) != MPI_SUCCESS)
            continue;  // an invalid type: MPICH reports it
        const std::int64_t last = (p.count - 1) * static_cast<std::int64_t>(extent);
        const std::int64_t lo = p.disp + true_lb + std::min<std::int64_t>(0, last);
        const std::int64_t hi = p.disp + true_lb + std::max<std::int64_t>(0, last) + true_extent;
        if (hi <= lo) continue;
        spans.emplace_back(lo, hi);
        all_dense = all_dense && dense(p.count, p.type);
    }
    b.lo = b.hi = 0;
    if (!spans.empty()) {
        std::sort(spans.begin(), spans.end());
        b.lo = spans.front().first;
        b.hi = b.lo;
        bool gap = false;
        for (const auto &s : spans) {
            gap = gap || s.first > b.hi;
            b.hi = std::max(b.hi, s.second);
        }
        b.covered = all_dense && !gap;
    }
    // The kind: every type of the argument must say the same (a "w" collective's types).
    const MPI_Datatype first = b.types.empty() ? MPI_BYTE : b.types.front();
    int rc = classify_buffer(b.user, first, &b.attrs, why, b.arg);
    if (rc != MPI_SUCCESS) {
        if (why->rfind(std::string(b.arg) + ": ", 0) != 0) *why = format("%s: %s", b.arg, why->c_str());
        return rc;
    }
    for (std::size_t i = 1; i < b.types.size(); ++i) {
        if (b.types[i] == first) continue;
        BufferAttrs other;
        rc = classify_buffer(b.user, b.types[i], &other, why, b.arg);
        if (rc != MPI_SUCCESS) return rc;
        if (other.kind != b.attrs.kind || other.offset != b.attrs.offset) {
            *why = format("%s: its datatypes describe it as %s memory and as %s memory (or at different offsets)",
                          b.arg, buf_kind_word(b.attrs.kind), buf_kind_word(other.kind));
            return MPI_ERR_ARG;
        }
    }
    return MPI_SUCCESS;
}

void CollCall::note_array(const void *array, std::size_t bytes) {
    if (!array || bytes == 0) return;
    for (const Array &a : arrays_)
        if (a.user == array) return;
    arrays_.push_back(Array{array, bytes, {}});
}

const void *CollCall::keep_array(const void *array) {
    for (Array &a : arrays_) {
        if (a.user != array) continue;
        if (a.copy.empty()) a.copy.assign(static_cast<const char *>(array), static_cast<const char *>(array) + a.bytes);
        return a.copy.data();
    }
    return array;
}

void CollCall::set_type_array(int slot, const MPI_Datatype *types, int n) {
    buf_[slot].type_array = types;
    buf_[slot].ntypes = n;
}

void CollCall::note_predefined(MPI_Datatype t) {
    if (is_builtin_type(t)) return;
    for (const auto &k : kept_)
        if (k.first == t) return;
    const MPI_Datatype base = undup_type(t);
    if (base != t && is_builtin_type(base)) {
        kept_.emplace_back(t, base);
    }
}

MPI_Datatype CollCall::type(MPI_Datatype t) const {
    for (const auto &k : kept_)
        if (k.first == t) return k.second;
    return t;
}

const MPI_Datatype *CollCall::types(int slot) const {
    return kept_arrays_[slot].empty() ? buf_[slot].type_array : kept_arrays_[slot].data();
}

void CollCall::keep_types() {
    auto keep = [this](MPI_Datatype t) {
        if (t == MPI_DATATYPE_NULL || is_builtin_type(t) || type(t) != t) return type(t);
        MPI_Datatype dup = MPI_DATATYPE_NULL;
        if (PMPI_Type_dup(t, &dup) != MPI_SUCCESS) return t;
        note_type_duplicated(dup);
        kept_.emplace_back(t, dup);
        return dup;
    };
    for (int slot = 0; slot < 2; ++slot) {
        for (MPI_Datatype t : buf_[slot].types) keep(t);
        if (buf_[slot].type_array) {
            kept_arrays_[slot].assign(buf_[slot].type_array, buf_[slot].type_array + buf_[slot].ntypes);
            for (MPI_Datatype &t : kept_arrays_[slot]) t = keep(t);
        }
    }
}

void CollCall::release_types() {
    for (auto &k : kept_)
        if (!is_builtin_type(k.second)) free_datatype(&k.second);
    kept_.clear();
}

}  // namespace mpiacc
