/* Random nested MPI datatypes for property tests of the flattener and the pack engines
 * (host, CUDA, OpenCL): every constructor, nested, with negative displacements and lower
 * bounds, zero-length blocks, overlapping blocks, resized types repeated, the int and the
 * large-count (`_c`) forms. The same seed gives the same types.
 *
 *   std::mt19937_64 rng(seed);
 *   MPI_Datatype t = random_types::random_type(rng, 3);   // committed
 *   ...
 *   MPI_Type_free(&t);
 *
 * make_type(source, depth) takes its choices from any source with `int pick(lo, hi)`
 * (the fuzzer's input bytes in test/fuzz).
 *
 * Types stay small (packed size up to kMaxPackedBytes, true extent up to
 * kMaxTrueExtent), so that thousands of them test in seconds. */
#pragma once

#include <mpi.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace random_types {

constexpr MPI_Count kMaxPackedBytes = 16 * 1024;
constexpr MPI_Count kMaxTrueExtent = 64 * 1024;

namespace detail {

// Where the choices come from: a random generator here, the fuzzer's input bytes in
// test/fuzz. A source has `int pick(int lo, int hi)` (lo <= result <= hi).
struct RngSource {
    std::mt19937_64 &rng;
    int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
};

template <class Source>
int pick(Source &rng, int lo, int hi) {
    return rng.pick(lo, hi);
}
template <class Source>
bool chance(Source &rng, int percent) {
    return rng.pick(0, 99) < percent;
}

template <class Source>
MPI_Datatype named(Source &rng) {
    // Not MPI_LONG_DOUBLE (nor MPI_LONG_DOUBLE_INT): MPICH packs it by value, 10 bytes and
    // six zeros on x86-64, where a byte engine copies all 16.
    static const MPI_Datatype kinds[] = {MPI_BYTE,  MPI_CHAR,     MPI_SHORT,           MPI_INT,       MPI_DOUBLE,
                                         MPI_FLOAT, MPI_INT64_T,  MPI_DOUBLE_INT,      MPI_SHORT_INT, MPI_FLOAT_INT,
                                         MPI_2INT,  MPI_LONG_INT, MPI_C_DOUBLE_COMPLEX};
    return kinds[pick(rng, 0, static_cast<int>(sizeof(kinds) / sizeof(kinds[0])) - 1)];
}

inline MPI_Aint extent_of(MPI_Datatype t) {
    MPI_Aint lb, extent;
    MPI_Type_get_extent(t, &lb, &extent);
    return extent;
}

// The large-count forms: the int ones refuse a type made by a `_c` constructor.
inline bool is_named(MPI_Datatype t) {
    MPI_Count ni, na, nc, nd;
    int combiner;
    MPI_Type_get_envelope_c(t, &ni, &na, &nc, &nd, &combiner);
    return combiner == MPI_COMBINER_NAMED;
}

inline void release(MPI_Datatype *t) {
    if (!is_named(*t)) MPI_Type_free(t);
}

template <class Source>
MPI_Datatype build(Source &rng, int depth);

// One constructor over a type built one level down (freed here when derived: the new
// type keeps what it needs).
template <class Source>
MPI_Datatype construct(Source &rng, int depth) {
    MPI_Datatype old = build(rng, depth - 1);
    const MPI_Aint e = extent_of(old);
    const bool large = chance(rng, 30);
    MPI_Datatype t = MPI_DATATYPE_NULL;
    const int which = pick(rng, 0, 11);
    const int n = pick(rng, 1, 4);
    switch (which) {
        case 0:
            if (large)
                MPI_Type_contiguous_c(n, old, &t);
            else
                MPI_Type_contiguous(n, old, &t);
            break;
        case 1: {
            const int bl = pick(rng, 0, 3), stride = pick(rng, -4, 5);
            if (large)
                MPI_Type_vector_c(n, bl, stride, old, &t);
            else
                MPI_Type_vector(n, bl, stride, old, &t);
            break;
        }
        case 2: {
            const int bl = pick(rng, 1, 3);
            // Often the abutting stride, so that dimensions merge; sometimes negative.
            const MPI_Aint stride = chance(rng, 30) ? bl * e : static_cast<MPI_Aint>(pick(rng, -64, 96));
            if (large)
                MPI_Type_create_hvector_c(n, bl, stride, old, &t);
            else
                MPI_Type_create_hvector(n, bl, stride, old, &t);
            break;
        }
        case 3:
        case 4: {
            std::vector<int> bl(n), disp(n);
            std::vector<MPI_Aint> hdisp(n);
            std::vector<MPI_Count> cbl(n), cdisp(n);
            for (int i = 0; i < n; ++i) {
                bl[i] = pick(rng, 0, 3);
                disp[i] = pick(rng, -3, 6);
                hdisp[i] = pick(rng, -48, 80);
                cbl[i] = bl[i];
                cdisp[i] = which == 3 ? disp[i] : hdisp[i];
            }
            if (which == 3) {
                if (large)
                    MPI_Type_indexed_c(n, cbl.data(), cdisp.data(), old, &t);
                else
                    MPI_Type_indexed(n, bl.data(), disp.data(), old, &t);
            } else {
                if (large)
                    MPI_Type_create_hindexed_c(n, cbl.data(), cdisp.data(), old, &t);
                else
                    MPI_Type_create_hindexed(n, bl.data(), hdisp.data(), old, &t);
            }
            break;
        }
        case 5:
        case 6: {
            const int bl = pick(rng, 0, 3);
            std::vector<int> disp(n);
            std::vector<MPI_Aint> hdisp(n);
            std::vector<MPI_Count> cdisp(n);
            // Sometimes equally spaced, which the flattener turns into a vector.
            const int step = pick(rng, 1, 4);
            const bool regular = chance(rng, 30);
            for (int i = 0; i < n; ++i) {
                disp[i] = regular ? i * step : pick(rng, -3, 6);
                hdisp[i] = regular ? i * step * e : pick(rng, -48, 80);
                cdisp[i] = which == 5 ? disp[i] : hdisp[i];
            }
            if (which == 5) {
                if (large)
                    MPI_Type_create_indexed_block_c(n, bl, cdisp.data(), old, &t);
                else
                    MPI_Type_create_indexed_block(n, bl, disp.data(), old, &t);
            } else {
                if (large)
                    MPI_Type_create_hindexed_block_c(n, bl, cdisp.data(), old, &t);
                else
                    MPI_Type_create_hindexed_block(n, bl, hdisp.data(), old, &t);
            }
            break;
        }
        case 7: {
            std::vector<MPI_Datatype> types(n);
            std::vector<int> bl(n);
            std::vector<MPI_Aint> disp(n);
            std::vector<MPI_Count> cbl(n), cdisp(n);
            for (int i = 0; i < n; ++i) {
                types[i] = i == 0 ? old : (chance(rng, 50) ? named(rng) : build(rng, depth - 2));
                bl[i] = pick(rng, 0, 2);
                disp[i] = pick(rng, -40, 120);
                cbl[i] = bl[i];
                cdisp[i] = disp[i];
            }
            if (large)
                MPI_Type_create_struct_c(n, cbl.data(), cdisp.data(), types.data(), &t);
            else
                MPI_Type_create_struct(n, bl.data(), disp.data(), types.data(), &t);
            for (int i = 1; i < n; ++i) release(&types[i]);
            break;
        }
        case 8: {
            const int nd = pick(rng, 1, 3);
            std::vector<int> sizes(nd), subsizes(nd), starts(nd);
            std::vector<MPI_Count> cs(nd), csub(nd), cst(nd);
            for (int d = 0; d < nd; ++d) {
                sizes[d] = pick(rng, 1, 5);
                subsizes[d] = pick(rng, 1, sizes[d]);
                starts[d] = pick(rng, 0, sizes[d] - subsizes[d]);
                cs[d] = sizes[d];
                csub[d] = subsizes[d];
                cst[d] = starts[d];
            }
            const int order = chance(rng, 50) ? MPI_ORDER_C : MPI_ORDER_FORTRAN;
            if (large)
                MPI_Type_create_subarray_c(nd, cs.data(), csub.data(), cst.data(), order, old, &t);
            else
                MPI_Type_create_subarray(nd, sizes.data(), subsizes.data(), starts.data(), order, old, &t);
            break;
        }
        case 9: {
            const int nd = pick(rng, 1, 3);
            std::vector<int> gsizes(nd), distribs(nd), dargs(nd), psizes(nd);
            std::vector<MPI_Count> cg(nd);
            int size = 1;
            for (int d = 0; d < nd; ++d) {
                gsizes[d] = pick(rng, 1, 7);
                const int kind = pick(rng, 0, 2);
                distribs[d] = kind == 0   ? MPI_DISTRIBUTE_NONE
                              : kind == 1 ? MPI_DISTRIBUTE_BLOCK
                                          : MPI_DISTRIBUTE_CYCLIC;
                psizes[d] = kind == 0 ? 1 : pick(rng, 1, 3);
                dargs[d] = MPI_DISTRIBUTE_DFLT_DARG;
                if (kind == 1 && chance(rng, 40))  // a block large enough for the whole dimension
                    dargs[d] = (gsizes[d] + psizes[d] - 1) / psizes[d] + pick(rng, 0, 2);
                if (kind == 2 && chance(rng, 60)) dargs[d] = pick(rng, 1, 3);
                cg[d] = gsizes[d];
                size *= psizes[d];
            }
            const int rank = pick(rng, 0, size - 1);
            const int order = chance(rng, 50) ? MPI_ORDER_C : MPI_ORDER_FORTRAN;
            if (large)
                MPI_Type_create_darray_c(size, rank, nd, cg.data(), distribs.data(), dargs.data(), psizes.data(), order,
                                         old, &t);
            else
                MPI_Type_create_darray(size, rank, nd, gsizes.data(), distribs.data(), dargs.data(), psizes.data(),
                                       order, old, &t);
            break;
        }
        case 10: {
            const MPI_Aint lb = pick(rng, -32, 32), extent = pick(rng, 1, static_cast<int>(2 * e + 16));
            if (large)
                MPI_Type_create_resized_c(old, lb, extent, &t);
            else
                MPI_Type_create_resized(old, lb, extent, &t);
            break;
        }
        default: MPI_Type_dup(old, &t); break;
    }
    release(&old);
    return t;
}

template <class Source>
MPI_Datatype build(Source &rng, int depth) {
    if (depth <= 0 || chance(rng, 15)) return named(rng);
    return construct(rng, depth);
}

}  // namespace detail

// A committed datatype of up to `depth` nested constructors chosen by `source`, or
// MPI_DATATYPE_NULL when the one chosen is too large to test in bulk.
template <class Source>
MPI_Datatype make_type(Source &source, int depth) {
    MPI_Datatype t = detail::construct(source, depth < 1 ? 1 : depth);
    MPI_Count size, lb, extent, tlb, textent;
    MPI_Type_size_c(t, &size);
    MPI_Type_get_extent_c(t, &lb, &extent);
    MPI_Type_get_true_extent_c(t, &tlb, &textent);
    if (size <= kMaxPackedBytes && textent <= kMaxTrueExtent && extent >= -kMaxTrueExtent && extent <= kMaxTrueExtent) {
        MPI_Type_commit(&t);
        return t;
    }
    MPI_Type_free(&t);
    return MPI_DATATYPE_NULL;
}

// A committed random datatype of up to `depth` nested constructors, small enough to test
// in bulk. The caller frees it with MPI_Type_free.
inline MPI_Datatype random_type(std::mt19937_64 &rng, int depth) {
    detail::RngSource source{rng};
    for (;;) {
        MPI_Datatype t = make_type(source, depth);
        if (t != MPI_DATATYPE_NULL) return t;
    }
}

// The bytes `count` elements of `type` touch, relative to the buffer argument:
// [*lo, *hi). Empty (lo == hi == 0) when the type has no bytes.
inline void footprint(MPI_Datatype type, MPI_Count count, MPI_Count *lo, MPI_Count *hi) {
    MPI_Count size, lb, extent, tlb, textent;
    MPI_Type_size_c(type, &size);
    MPI_Type_get_extent_c(type, &lb, &extent);
    MPI_Type_get_true_extent_c(type, &tlb, &textent);
    *lo = *hi = 0;
    if (size == 0 || count == 0) return;
    const MPI_Count last = (count - 1) * extent;
    *lo = tlb + (last < 0 ? last : 0);
    *hi = tlb + textent + (last > 0 ? last : 0);
}

// Whether a derived type inside `type` (not `type` itself) has no bytes. MPICH 4.0.2 packs a
// type with such a part from a field it leaves unset: MPI_Pack of
// struct{indexed_block(2, 0, ...), hindexed_block(4, 1, ..., MPI_FLOAT)} divides by zero
// where that field reads 0 (under valgrind, and on the GPU machine), so tests whose
// reference is MPICH's MPI_Pack leave such types out.
inline bool has_empty_part(MPI_Datatype type) {
    MPI_Count ni, na, nc, nd;
    int combiner;
    MPI_Type_get_envelope_c(type, &ni, &na, &nc, &nd, &combiner);
    if (combiner == MPI_COMBINER_NAMED) return false;
    std::vector<int> ints(static_cast<std::size_t>(ni));
    std::vector<MPI_Aint> addrs(static_cast<std::size_t>(na));
    std::vector<MPI_Count> counts(static_cast<std::size_t>(nc));
    std::vector<MPI_Datatype> types(static_cast<std::size_t>(nd));
    MPI_Type_get_contents_c(type, ni, na, nc, nd, ints.data(), addrs.data(), counts.data(), types.data());
    bool empty = false;
    for (MPI_Datatype &t : types) {
        if (!detail::is_named(t)) {
            MPI_Count size = 0;
            MPI_Type_size_c(t, &size);
            empty = empty || size == 0 || has_empty_part(t);
        }
        detail::release(&t);
    }
    return empty;
}

// The constructor nest of a type, for failure messages: "vector(contiguous(MPI_INT))".
inline std::string describe(MPI_Datatype type) {
    if (detail::is_named(type)) {
        char name[MPI_MAX_OBJECT_NAME];
        int len = 0;
        MPI_Type_get_name(type, name, &len);
        return std::string(name, static_cast<std::size_t>(len));
    }
    MPI_Count cni, cna, cnc, cnd;
    int combiner;
    MPI_Type_get_envelope_c(type, &cni, &cna, &cnc, &cnd, &combiner);
    std::string out;
    switch (combiner) {
        case MPI_COMBINER_DUP: out = "dup"; break;
        case MPI_COMBINER_CONTIGUOUS: out = "contiguous"; break;
        case MPI_COMBINER_VECTOR: out = "vector"; break;
        case MPI_COMBINER_HVECTOR: out = "hvector"; break;
        case MPI_COMBINER_INDEXED: out = "indexed"; break;
        case MPI_COMBINER_HINDEXED: out = "hindexed"; break;
        case MPI_COMBINER_INDEXED_BLOCK: out = "indexed_block"; break;
        case MPI_COMBINER_HINDEXED_BLOCK: out = "hindexed_block"; break;
        case MPI_COMBINER_STRUCT: out = "struct"; break;
        case MPI_COMBINER_SUBARRAY: out = "subarray"; break;
        case MPI_COMBINER_DARRAY: out = "darray"; break;
        case MPI_COMBINER_RESIZED: out = "resized"; break;
        default: out = "combiner" + std::to_string(combiner); break;
    }
    std::vector<int> ints(static_cast<std::size_t>(cni));
    std::vector<MPI_Aint> addrs(static_cast<std::size_t>(cna));
    std::vector<MPI_Count> counts(static_cast<std::size_t>(cnc));
    std::vector<MPI_Datatype> types(static_cast<std::size_t>(cnd));
    MPI_Type_get_contents_c(type, cni, cna, cnc, cnd, ints.data(), addrs.data(), counts.data(), types.data());
    out += "[";
    for (int v : ints) out += std::to_string(v) + " ";
    for (MPI_Aint v : addrs) out += "a" + std::to_string(v) + " ";
    for (MPI_Count v : counts) out += "c" + std::to_string(v) + " ";
    out += "](";
    for (std::size_t i = 0; i < types.size(); ++i) {
        out += (i ? ", " : "") + describe(types[i]);
        detail::release(&types[i]);
    }
    return out + ")";
}

}  // namespace random_types
