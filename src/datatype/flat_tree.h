// The flattener's own description of one element of a datatype: a small tree of byte
// blocks, repetitions and sequences, after yaksa's type trees, simplified while it is
// built so that vectors, subarrays and their nests end as one repetition nest (TEMPI's
// canonical strided form) and runs are never listed unless a caller asks for them.
// Private to src/datatype (flat_type.cc, flat_decode.cc).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <algorithm>
#include <vector>

#include "datatype/flat_type.h"

namespace mpiacc {
namespace flat {

struct Node;
using NodeP = std::shared_ptr<const Node>;

// Every node's bytes are relative to `offset`, which a parent adds to its own.
struct Node {
    enum class Kind { kRuns, kRepeat, kSeq };
    Kind kind = Kind::kRuns;
    std::int64_t offset = 0;
    std::int64_t size = 0;  // packed bytes
    // kRuns: runs (offsets relative to `offset`) in packed order; run_starts[i] is the packed
    // position of run i. One run is a plain block of bytes.
    std::shared_ptr<const std::vector<Run>> runs;
    std::shared_ptr<const std::vector<std::int64_t>> run_starts;
    // kRepeat: `count` copies of child, copy i at offset + i * stride.
    std::int64_t count = 0, stride = 0;
    NodeP child;
    // kSeq: parts in packed order; part_starts[i] is the packed position of part i.
    std::shared_ptr<const std::vector<NodeP>> parts;
    std::shared_ptr<const std::vector<std::int64_t>> part_starts;
};

// Constructors that simplify as they build: count-1 and zero-size repetitions vanish, a
// repetition of abutting blocks becomes one block, nested repetitions whose strides
// line up merge into one, adjacent blocks in a sequence merge, a sequence of equal
// blocks at a constant distance becomes a repetition.
NodeP empty_node();
NodeP block_node(std::int64_t offset, std::int64_t length);
NodeP shifted(const NodeP &node, std::int64_t by);
NodeP repeat_node(std::int64_t offset, std::int64_t count, std::int64_t stride, const NodeP &child);
NodeP sequence_node(const std::vector<NodeP> &parts);
// Runs (offsets from 0) as a node: built with append_run, which merges a run that
// continues the last; equal runs at one distance become a repetition of one block.
void append_run(std::vector<Run> *runs, std::int64_t offset, std::int64_t length);
NodeP runs_node(std::vector<Run> runs);

// The node's strided form with up to kMaxStridedDims dimensions (dims: how many are
// used); false when it has none.
bool strided_form(const Node &node, StridedForm *form, int *dims);
// The bytes the node touches: [*lo, *hi), relative to its parent (size > 0).
void bounds(const Node &node, std::int64_t *lo, std::int64_t *hi);
// Adds an outer dimension of n copies `stride` apart to a form, merging where it can.
bool add_dimension(StridedForm *form, int *dims, std::int64_t n, std::int64_t stride);

inline bool is_single_block(const Node &n) { return n.kind == Node::Kind::kRuns && n.runs->size() == 1; }

// Gathers walked pieces, merging one that continues the last in memory, and hands the
// merged ones to fn(offset, packed, length), packed counting from the first piece.
template <class Fn>
class PieceSink {
public:
    explicit PieceSink(Fn &fn) : fn_(fn) {}
    void add(std::int64_t offset, std::int64_t length) {
        if (length <= 0) return;
        if (length_ > 0 && offset == offset_ + length_) {
            length_ += length;
            return;
        }
        flush();
        offset_ = offset;
        length_ = length;
    }
    void flush() {
        if (length_ > 0) fn_(offset_, packed_, length_);
        packed_ += length_;
        length_ = 0;
    }

private:
    Fn &fn_;
    std::int64_t offset_ = 0, packed_ = 0, length_ = 0;
};

// Packed bytes [from, to) of `node` placed at `base` (0 <= from < to <= node.size), to
// the sink in packed order. A template, so that the host engine's copy inlines.
template <class Sink>
void walk(const Node &node, std::int64_t base, std::int64_t from, std::int64_t to, Sink &sink) {
    base += node.offset;
    switch (node.kind) {
        case Node::Kind::kRuns: {
            const std::vector<std::int64_t> &starts = *node.run_starts;
            const std::vector<Run> &runs = *node.runs;
            std::size_t i =
                static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), from) - starts.begin()) - 1;
            for (; i < runs.size() && starts[i] < to; ++i) {
                const std::int64_t a = std::max(from, starts[i]) - starts[i];
                const std::int64_t b = std::min(to, starts[i] + runs[i].length) - starts[i];
                sink.add(base + runs[i].offset + a, b - a);
            }
            return;
        }
        case Node::Kind::kRepeat: {
            const Node &child = *node.child;
            const std::int64_t cs = child.size;
            std::int64_t i = from / cs, pos = from;
            // Indices computed, not listed: a strided type is never materialised.
            if (is_single_block(child)) {
                const std::int64_t at = base + child.offset + (*child.runs)[0].offset;
                while (pos < to) {
                    const std::int64_t within = pos - i * cs, take = std::min(cs - within, to - pos);
                    sink.add(at + i * node.stride + within, take);
                    pos += take;
                    ++i;
                }
                return;
            }
            while (pos < to) {
                const std::int64_t within = pos - i * cs, take = std::min(cs - within, to - pos);
                walk(child, base + i * node.stride, within, within + take, sink);
                pos += take;
                ++i;
            }
            return;
        }
        case Node::Kind::kSeq: {
            const std::vector<std::int64_t> &starts = *node.part_starts;
            const std::vector<NodeP> &parts = *node.parts;
            std::size_t i =
                static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), from) - starts.begin()) - 1;
            for (; i < parts.size() && starts[i] < to; ++i) {
                const std::int64_t a = std::max(from, starts[i]) - starts[i];
                const std::int64_t b = std::min(to, starts[i] + parts[i]->size) - starts[i];
                walk(*parts[i], base, a, b, sink);
            }
            return;
        }
    }
}

// Decodes a committed datatype into a node for one element. Null with an MPI error class
// and reason for a type it cannot decode.
NodeP decode_type(MPI_Datatype type, int *error, std::string *why);

}  // namespace flat
}  // namespace mpiacc
