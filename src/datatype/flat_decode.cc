// Decodes a datatype from its constructor (MPI_Type_get_envelope/contents, large-count
// forms) into the flattener's tree. MPICH keeps the arguments of a type made by an int
// constructor in the int and address arrays, and those of a `_c` constructor in the
// count array; both are read.
#include <algorithm>
#include <map>
#include <new>
#include <stdexcept>

#include "datatype/flat_tree.h"

namespace mpiacc {
namespace flat {

namespace {

struct Failure {
    int error;
    std::string why;
};

// The arguments of one constructor; the types it returns are freed on leaving, as the
// standard asks for every derived one.
class Contents {
public:
    explicit Contents(MPI_Datatype type) {
        MPI_Count ni, na, nc, nd;
        if (PMPI_Type_get_envelope_c(type, &ni, &na, &nc, &nd, &combiner) != MPI_SUCCESS)
            throw Failure{MPI_ERR_TYPE, "the datatype is not a valid datatype"};
        if (combiner == MPI_COMBINER_NAMED || combiner == MPI_COMBINER_F90_REAL ||
            combiner == MPI_COMBINER_F90_COMPLEX || combiner == MPI_COMBINER_F90_INTEGER)
            return;
        ints.resize(static_cast<std::size_t>(ni));
        addrs.resize(static_cast<std::size_t>(na));
        counts.resize(static_cast<std::size_t>(nc));
        types.resize(static_cast<std::size_t>(nd));
        if (PMPI_Type_get_contents_c(type, ni, na, nc, nd, ints.data(), addrs.data(), counts.data(), types.data()) !=
            MPI_SUCCESS)
            throw Failure{MPI_ERR_TYPE, "MPI_Type_get_contents refused the datatype"};
    }
    ~Contents() {
        for (MPI_Datatype t : types) {
            MPI_Count ni, na, nc, nd;
            int c;
            // Predefined ones (named, and the F90 ones, which count as predefined) stay.
            if (PMPI_Type_get_envelope_c(t, &ni, &na, &nc, &nd, &c) == MPI_SUCCESS && c != MPI_COMBINER_NAMED &&
                c != MPI_COMBINER_F90_REAL && c != MPI_COMBINER_F90_COMPLEX && c != MPI_COMBINER_F90_INTEGER)
                PMPI_Type_free(&t);
        }
    }
    Contents(const Contents &) = delete;
    Contents &operator=(const Contents &) = delete;

    bool large() const { return !counts.empty(); }
    // Integer argument i: from the count array for a `_c` constructor, else the int array.
    std::int64_t count_arg(std::size_t i) const { return large() ? counts.at(i) : ints.at(i); }
    // Byte displacement i: the count array for `_c`, else the address array.
    std::int64_t byte_arg(std::size_t large_index, std::size_t addr_index) const {
        return large() ? counts.at(large_index) : addrs.at(addr_index);
    }

    int combiner = MPI_COMBINER_NAMED;
    std::vector<int> ints;
    std::vector<MPI_Aint> addrs;
    std::vector<MPI_Count> counts;
    std::vector<MPI_Datatype> types;
};

std::int64_t extent_of(MPI_Datatype type) {
    MPI_Count lb, extent;
    if (PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS)
        throw Failure{MPI_ERR_TYPE, "MPI_Type_get_extent refused a constituent datatype"};
    return extent;
}

// The blocks of an indexed type or struct, in order: `length` copies of a child of
// extent `extent` at `offset`. A block of a dense child is one run, listed directly: an
// indexed type of a million ints makes a run list, not a million nodes.
class Blocks {
public:
    void add(std::int64_t offset, std::int64_t length, std::int64_t extent, const NodeP &child) {
        if (length <= 0 || child->size == 0) return;
        if (child->kind == Node::Kind::kRuns && child->runs->size() == 1 && child->size == extent) {
            append_run(&pending_, offset + child->offset + (*child->runs)[0].offset, length * extent);
            return;
        }
        flush();
        parts_.push_back(repeat_node(offset, length, extent, child));
    }
    NodeP finish() {
        if (parts_.empty()) return runs_node(std::move(pending_));
        flush();
        return sequence_node(parts_);
    }

private:
    void flush() {
        if (!pending_.empty()) parts_.push_back(runs_node(std::move(pending_)));
        pending_.clear();
    }
    std::vector<Run> pending_;
    std::vector<NodeP> parts_;
};

class Decoder {
public:
    NodeP decode(MPI_Datatype type) {
        auto it = memo_.find(type);
        if (it != memo_.end()) return it->second;
        NodeP n = decode_uncached(type);
        memo_[type] = n;
        return n;
    }

private:
    NodeP named(MPI_Datatype type) {
        MPI_Count size, tlb, textent;
        if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS ||
            PMPI_Type_get_true_extent_x(type, &tlb, &textent) != MPI_SUCCESS)
            throw Failure{MPI_ERR_TYPE, "the datatype is not a valid datatype"};
        if (size == textent) return block_node(tlb, size);
        // The value-index pairs are structs with padding before the int (MPI_SHORT_INT,
        // MPI_DOUBLE_INT, ...): the value at 0, the int last.
        if (type == MPI_FLOAT_INT || type == MPI_DOUBLE_INT || type == MPI_LONG_INT || type == MPI_SHORT_INT ||
            type == MPI_LONG_DOUBLE_INT) {
            const std::int64_t int_bytes = sizeof(int);
            return sequence_node({block_node(tlb, size - int_bytes), block_node(tlb + textent - int_bytes, int_bytes)});
        }
        throw Failure{MPI_ERR_UNSUPPORTED_OPERATION, "a predefined datatype with gaps that MPI-ACC does not know"};
    }

    NodeP subarray(const Contents &c) {
        const int ndims = c.ints.at(0);
        const std::size_t n = static_cast<std::size_t>(ndims);
        std::vector<std::int64_t> sizes(n), subsizes(n), starts(n);
        int order;
        for (std::size_t d = 0; d < n; ++d) {
            sizes[d] = c.large() ? c.counts.at(d) : c.ints.at(1 + d);
            subsizes[d] = c.large() ? c.counts.at(n + d) : c.ints.at(1 + n + d);
            starts[d] = c.large() ? c.counts.at(2 * n + d) : c.ints.at(1 + 2 * n + d);
        }
        order = c.large() ? c.ints.at(1) : c.ints.at(1 + 3 * n);
        NodeP node = decode(c.types[0]);
        std::int64_t stride = extent_of(c.types[0]);
        // Innermost the fastest dimension: the last in C order, the first in Fortran's.
        for (std::size_t k = 0; k < n; ++k) {
            const std::size_t d = order == MPI_ORDER_C ? n - 1 - k : k;
            node = repeat_node(starts[d] * stride, subsizes[d], stride, node);
            stride *= sizes[d];
        }
        return node;
    }

    // The indices of one dimension a process owns, per the standard's definition of
    // MPI_Type_create_darray: all (NONE), one block (BLOCK), or blocks of darg dealt
    // round the processes (CYCLIC).
    static NodeP darray_dimension(int distrib, std::int64_t darg, std::int64_t gsize, std::int64_t psize,
                                  std::int64_t coord, std::int64_t stride, const NodeP &inner) {
        if (distrib == MPI_DISTRIBUTE_NONE) return repeat_node(0, gsize, stride, inner);
        if (distrib == MPI_DISTRIBUTE_BLOCK) {
            const std::int64_t b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (gsize + psize - 1) / psize : darg;
            const std::int64_t start = coord * b;
            const std::int64_t n = std::max<std::int64_t>(0, std::min(b, gsize - start));
            return repeat_node(start * stride, n, stride, inner);
        }
        if (distrib != MPI_DISTRIBUTE_CYCLIC)
            throw Failure{MPI_ERR_TYPE, "a darray with a distribution MPI-ACC does not know"};
        const std::int64_t k = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
        const std::int64_t first = coord * k, step = k * psize;
        if (first >= gsize) return empty_node();
        const std::int64_t nblocks = (gsize - first + step - 1) / step;
        const std::int64_t last_start = first + (nblocks - 1) * step;
        const std::int64_t last_len = std::min(k, gsize - last_start);
        NodeP full = repeat_node(0, k, stride, inner);
        if (last_len == k) return repeat_node(first * stride, nblocks, step * stride, full);
        return sequence_node({repeat_node(first * stride, nblocks - 1, step * stride, full),
                              repeat_node(last_start * stride, last_len, stride, inner)});
    }

    NodeP darray(const Contents &c) {
        const std::int64_t rank = c.ints.at(1);
        const std::size_t n = static_cast<std::size_t>(c.ints.at(2));
        // int form: size rank ndims gsizes distribs dargs psizes order; `_c` form: the
        // gsizes move to the count array.
        const std::size_t at = c.large() ? 3 : 3 + n;
        std::vector<std::int64_t> gsizes(n), dargs(n), psizes(n);
        std::vector<int> distribs(n);
        for (std::size_t d = 0; d < n; ++d) {
            gsizes[d] = c.large() ? c.counts.at(d) : c.ints.at(3 + d);
            distribs[d] = c.ints.at(at + d);
            dargs[d] = c.ints.at(at + n + d);
            psizes[d] = c.ints.at(at + 2 * n + d);
        }
        const int order = c.ints.at(at + 3 * n);
        // Process coordinates: the process grid is row-major whatever the array order.
        std::vector<std::int64_t> coords(n);
        std::int64_t rest = rank;
        for (std::size_t k = n; k-- > 0;) {
            coords[k] = rest % psizes[k];
            rest /= psizes[k];
        }
        NodeP node = decode(c.types[0]);
        std::int64_t stride = extent_of(c.types[0]);
        for (std::size_t k = 0; k < n; ++k) {
            const std::size_t d = order == MPI_ORDER_C ? n - 1 - k : k;
            node = darray_dimension(distribs[d], dargs[d], gsizes[d], psizes[d], coords[d], stride, node);
            stride *= gsizes[d];
        }
        return node;
    }

    NodeP decode_uncached(MPI_Datatype type) {
        if (++depth_ > 1000) throw Failure{MPI_ERR_TYPE, "the datatype nests deeper than 1000 constructors"};
        struct Leave {
            int *d;
            ~Leave() { --*d; }
        } leave{&depth_};
        Contents c(type);
        switch (c.combiner) {
            case MPI_COMBINER_NAMED:
            case MPI_COMBINER_F90_REAL:
            case MPI_COMBINER_F90_COMPLEX:
            case MPI_COMBINER_F90_INTEGER: return named(type);
            case MPI_COMBINER_DUP:
            case MPI_COMBINER_RESIZED: return decode(c.types[0]);
            case MPI_COMBINER_CONTIGUOUS: {
                return repeat_node(0, c.count_arg(0), extent_of(c.types[0]), decode(c.types[0]));
            }
            case MPI_COMBINER_VECTOR:
            case MPI_COMBINER_HVECTOR: {
                const std::int64_t e = extent_of(c.types[0]);
                const std::int64_t count = c.count_arg(0), length = c.count_arg(1);
                const std::int64_t stride = c.combiner == MPI_COMBINER_VECTOR ? c.count_arg(2) * e : c.byte_arg(2, 0);
                return repeat_node(0, count, stride, repeat_node(0, length, e, decode(c.types[0])));
            }
            case MPI_COMBINER_INDEXED:
            case MPI_COMBINER_HINDEXED: {
                const std::int64_t e = extent_of(c.types[0]);
                const NodeP child = decode(c.types[0]);
                const std::int64_t count = c.count_arg(0);
                Blocks blocks;
                for (std::int64_t i = 0; i < count; ++i) {
                    const std::size_t k = static_cast<std::size_t>(i);
                    const std::int64_t disp = c.combiner == MPI_COMBINER_INDEXED ? c.count_arg(1 + count + k) * e
                                                                                 : c.byte_arg(1 + count + k, k);
                    blocks.add(disp, c.count_arg(1 + k), e, child);
                }
                return blocks.finish();
            }
            case MPI_COMBINER_INDEXED_BLOCK:
            case MPI_COMBINER_HINDEXED_BLOCK: {
                const std::int64_t e = extent_of(c.types[0]);
                const NodeP child = decode(c.types[0]);
                const std::int64_t count = c.count_arg(0), length = c.count_arg(1);
                Blocks blocks;
                for (std::int64_t i = 0; i < count; ++i) {
                    const std::size_t k = static_cast<std::size_t>(i);
                    const std::int64_t disp =
                        c.combiner == MPI_COMBINER_INDEXED_BLOCK ? c.count_arg(2 + k) * e : c.byte_arg(2 + k, k);
                    blocks.add(disp, length, e, child);
                }
                return blocks.finish();
            }
            case MPI_COMBINER_STRUCT: {
                const std::int64_t count = c.count_arg(0);
                Blocks blocks;
                for (std::int64_t i = 0; i < count; ++i) {
                    const std::size_t k = static_cast<std::size_t>(i);
                    blocks.add(c.byte_arg(1 + count + k, k), c.count_arg(1 + k), extent_of(c.types[k]),
                               decode(c.types[k]));
                }
                return blocks.finish();
            }
            case MPI_COMBINER_SUBARRAY: return subarray(c);
            case MPI_COMBINER_DARRAY: return darray(c);
            default: break;
        }
        // The MPI-1 Fortran constructors (MPI_COMBINER_HVECTOR_INTEGER, _HINDEXED_INTEGER,
        // _STRUCT_INTEGER) are not decoded: no C program can make one to test them with.
        throw Failure{MPI_ERR_UNSUPPORTED_OPERATION, "the datatype was made by a constructor (combiner " +
                                                         std::to_string(c.combiner) + ") that MPI-ACC does not decode"};
    }

    std::map<MPI_Datatype, NodeP> memo_;
    int depth_ = 0;
};

}  // namespace

NodeP decode_type(MPI_Datatype type, int *error, std::string *why) {
    try {
        Decoder d;
        return d.decode(type);
    } catch (const Failure &f) {
        *error = f.error;
        *why = f.why;
    } catch (const std::out_of_range &) {
        *error = MPI_ERR_TYPE;
        *why = "the datatype's constructor arguments are not in the form MPI-ACC reads";
    } catch (const std::bad_alloc &) {
        *error = MPI_ERR_NO_MEM;
        *why = "out of memory flattening the datatype";
    }
    return nullptr;
}

}  // namespace flat
}  // namespace mpiacc
