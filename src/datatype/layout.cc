#include "datatype/layout.h"

#include "datatype/flat_type.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mpiacc {

namespace {

struct TypeFacts {
    MPI_Count size;
    MPI_Count true_lb, true_extent;
    MPI_Count lb, extent;
    bool contiguous;  // one element is one dense run in order
};

std::mutex facts_mutex;
std::unordered_map<MPI_Datatype, TypeFacts> facts_cache;

// A type is dense when its elements' bytes fill [true_lb, true_lb+size) in order. Decoded
// from the type's constructor, because size == extent alone misses reordered blocks.
bool type_is_dense(MPI_Datatype type) {
    if (is_builtin_type(type)) return true;
    // The large-count forms: the int ones fail for a type made with a count past INT_MAX
    // (MPI_Send_c's, large_count.cc).
    MPI_Count ni, na, nc, nd;
    int combiner;
    if (PMPI_Type_get_envelope_c(type, &ni, &na, &nc, &nd, &combiner) != MPI_SUCCESS) return false;
    if (combiner == MPI_COMBINER_NAMED) return true;
    std::vector<int> ints(static_cast<std::size_t>(ni));
    std::vector<MPI_Aint> addrs(static_cast<std::size_t>(na));
    std::vector<MPI_Count> counts(static_cast<std::size_t>(nc));
    std::vector<MPI_Datatype> types(static_cast<std::size_t>(nd));
    PMPI_Type_get_contents_c(type, ni, na, nc, nd, ints.data(), addrs.data(), counts.data(), types.data());
    bool dense = false;
    MPI_Count size, lb, extent, tlb, textent;
    PMPI_Type_size_x(type, &size);
    PMPI_Type_get_extent_x(type, &lb, &extent);
    PMPI_Type_get_true_extent_x(type, &tlb, &textent);
    if (combiner == MPI_COMBINER_DUP) {
        dense = type_is_dense(types[0]);
    } else if (combiner == MPI_COMBINER_CONTIGUOUS) {
        MPI_Count isize, ilb, iext;
        PMPI_Type_size_x(types[0], &isize);
        PMPI_Type_get_extent_x(types[0], &ilb, &iext);
        const MPI_Count n = nc > 0 ? counts[0] : ints[0];
        dense = type_is_dense(types[0]) && (n <= 1 || isize == iext);
    } else if (combiner == MPI_COMBINER_RESIZED) {
        dense = type_is_dense(types[0]);
    }
    // Whatever the constructor, the element must exactly fill its true extent.
    if (dense) dense = (size == textent);
    for (MPI_Datatype t : types) {
        MPI_Count tni, tna, tnc, tnd;
        int tc;
        PMPI_Type_get_envelope_c(t, &tni, &tna, &tnc, &tnd, &tc);
        if (tc != MPI_COMBINER_NAMED) PMPI_Type_free(&t);
    }
    return dense;
}

bool facts_for(MPI_Datatype type, TypeFacts *out) {
    {
        std::lock_guard<std::mutex> lock(facts_mutex);
        auto it = facts_cache.find(type);
        if (it != facts_cache.end()) {
            *out = it->second;
            return true;
        }
    }
    TypeFacts f{};
    if (PMPI_Type_size_x(type, &f.size) != MPI_SUCCESS) return false;
    PMPI_Type_get_true_extent_x(type, &f.true_lb, &f.true_extent);
    PMPI_Type_get_extent_x(type, &f.lb, &f.extent);
    f.contiguous = type_is_dense(type);
    std::lock_guard<std::mutex> lock(facts_mutex);
    facts_cache[type] = f;
    *out = f;
    return true;
}

}  // namespace

long long derived_packed_bytes(int count, MPI_Datatype type) {
    TypeFacts f;
    if (!facts_for(type, &f)) return -1;
    return static_cast<long long>(count) * f.size;
}

Layout describe_layout(int count, MPI_Datatype type) {
    Layout l;
    if (count < 0) {
        l.error = MPI_ERR_COUNT;
        return l;
    }
    if (is_builtin_type(type)) {
        l.bytes = static_cast<std::size_t>(count) * builtin_type_size(type);
        return l;
    }
    TypeFacts f;
    if (type == MPI_DATATYPE_NULL || !facts_for(type, &f)) {
        l.error = MPI_ERR_TYPE;
        return l;
    }
    l.bytes = static_cast<std::size_t>(count) * static_cast<std::size_t>(f.size);
    l.true_lb = static_cast<MPI_Aint>(f.true_lb);
    // count elements are one run when each element is dense and consecutive elements
    // abut (extent == size).
    l.contiguous = f.contiguous && (count <= 1 || f.extent == f.size);
    if (count == 0) l.contiguous = true;
    return l;
}

int free_datatype(MPI_Datatype *type) {
    const MPI_Datatype freed = *type;
    // Not under the cache's lock: PMPI_Type_free runs our attribute delete callbacks,
    // which take the state lock, and the state lock is held around describe_layout.
    int rc = PMPI_Type_free(type);
    if (rc == MPI_SUCCESS) {
        {
            std::lock_guard<std::mutex> lock(facts_mutex);
            facts_cache.erase(freed);
        }
        forget_flat_type(freed);
    }
    return rc;
}

// Non-contiguous layouts are copied piece by piece from the flattened type: any byte
// range, without packing the whole message first, and MPI_BOTTOM with absolute
// displacements (which MPICH 4.0.2's MPI_Pack refuses as a null buffer).
int pack_range(const void *buf, int count, MPI_Datatype type, std::size_t offset, void *out, std::size_t len) {
    Layout l = describe_layout(count, type);
    if (l.error != MPI_SUCCESS) return l.error;
    if (offset + len > l.bytes) return MPI_ERR_COUNT;
    if (len == 0) return MPI_SUCCESS;
    if (l.contiguous) {
        std::memcpy(out, typed_address(buf, l.true_lb + static_cast<MPI_Aint>(offset)), len);
        return MPI_SUCCESS;
    }
    int error = MPI_SUCCESS;
    std::string why;
    std::shared_ptr<const FlatType> flat = flat_type(type, &error, &why);
    if (!flat) return error;
    return pack_bytes(*flat, buf, count, static_cast<std::int64_t>(offset), static_cast<std::int64_t>(len), out);
}

// A message shorter than the buffer fills the first len bytes of its type map, the last
// element partly, as MPICH's own receives do.
int unpack_range(const void *packed, std::size_t len, void *buf, int count, MPI_Datatype type, std::size_t offset) {
    Layout l = describe_layout(count, type);
    if (l.error != MPI_SUCCESS) return l.error;
    if (offset + len > l.bytes) return MPI_ERR_COUNT;
    if (len == 0) return MPI_SUCCESS;
    if (l.contiguous) {
        std::memcpy(typed_address(buf, l.true_lb + static_cast<MPI_Aint>(offset)), packed, len);
        return MPI_SUCCESS;
    }
    int error = MPI_SUCCESS;
    std::string why;
    std::shared_ptr<const FlatType> flat = flat_type(type, &error, &why);
    if (!flat) return error;
    return unpack_bytes(*flat, packed, static_cast<std::int64_t>(len), buf, count, static_cast<std::int64_t>(offset));
}

}  // namespace mpiacc
