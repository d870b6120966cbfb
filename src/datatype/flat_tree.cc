#include "datatype/flat_tree.h"

#include <algorithm>
#include <cstdint>

namespace mpiacc {
namespace flat {

namespace {

// Sequences with at most this many parts are inlined into their parent, so that struct
// members and indexed blocks end as one list; a larger one stays a shared subtree.
constexpr std::size_t kInlineParts = 64;

std::shared_ptr<const std::vector<std::int64_t>> prefix_starts(const std::vector<std::int64_t> &sizes) {
    auto starts = std::make_shared<std::vector<std::int64_t>>(sizes.size());
    std::int64_t at = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        (*starts)[i] = at;
        at += sizes[i];
    }
    return starts;
}

}  // namespace

NodeP runs_node(std::vector<Run> runs) {
    if (runs.empty()) return empty_node();
    if (runs.size() == 1) return block_node(runs[0].offset, runs[0].length);
    const std::int64_t len = runs[0].length, step = runs[1].offset - runs[0].offset;
    bool regular = true;
    for (std::size_t i = 1; regular && i < runs.size(); ++i)
        regular = runs[i].length == len && runs[i].offset - runs[i - 1].offset == step;
    if (regular) return repeat_node(runs[0].offset, static_cast<std::int64_t>(runs.size()), step, block_node(0, len));
    auto n = std::make_shared<Node>();
    n->kind = Node::Kind::kRuns;
    std::vector<std::int64_t> sizes(runs.size());
    for (std::size_t i = 0; i < runs.size(); ++i) {
        sizes[i] = runs[i].length;
        n->size += runs[i].length;
    }
    n->run_starts = prefix_starts(sizes);
    n->runs = std::make_shared<const std::vector<Run>>(std::move(runs));
    return n;
}

void append_run(std::vector<Run> *runs, std::int64_t offset, std::int64_t length) {
    if (length <= 0) return;
    if (!runs->empty() && runs->back().offset + runs->back().length == offset) {
        runs->back().length += length;
        return;
    }
    runs->push_back(Run{offset, length});
}

NodeP empty_node() {
    static const NodeP empty = [] {
        auto n = std::make_shared<Node>();
        n->kind = Node::Kind::kSeq;
        n->parts = std::make_shared<const std::vector<NodeP>>();
        n->part_starts = std::make_shared<const std::vector<std::int64_t>>();
        return NodeP(n);
    }();
    return empty;
}

NodeP block_node(std::int64_t offset, std::int64_t length) {
    if (length <= 0) return empty_node();
    auto n = std::make_shared<Node>();
    n->kind = Node::Kind::kRuns;
    n->offset = offset;
    n->size = length;
    n->runs = std::make_shared<const std::vector<Run>>(1, Run{0, length});
    n->run_starts = std::make_shared<const std::vector<std::int64_t>>(1, 0);
    return n;
}

NodeP shifted(const NodeP &node, std::int64_t by) {
    if (by == 0 || node->size == 0) return node;
    auto n = std::make_shared<Node>(*node);
    n->offset += by;
    return n;
}

NodeP repeat_node(std::int64_t offset, std::int64_t count, std::int64_t stride, const NodeP &child) {
    if (count <= 0 || child->size == 0) return empty_node();
    if (count == 1) return shifted(child, offset);
    if (is_single_block(*child) && child->size == stride)
        return block_node(offset + child->offset + (*child->runs)[0].offset, count * child->size);
    if (child->kind == Node::Kind::kRepeat && child->count * child->stride == stride)
        return repeat_node(offset + child->offset, count * child->count, child->stride, child->child);
    auto n = std::make_shared<Node>();
    n->kind = Node::Kind::kRepeat;
    n->offset = offset;
    n->size = count * child->size;
    n->count = count;
    n->stride = stride;
    n->child = child;
    return n;
}

NodeP sequence_node(const std::vector<NodeP> &in) {
    // Inline small sequences, then merge consecutive run lists into one.
    std::vector<NodeP> flat;
    flat.reserve(in.size());
    for (const NodeP &p : in) {
        if (p->size == 0) continue;
        if (p->kind == Node::Kind::kSeq && p->parts->size() <= kInlineParts) {
            for (const NodeP &q : *p->parts) flat.push_back(shifted(q, p->offset));
        } else {
            flat.push_back(p);
        }
    }
    std::vector<NodeP> out;
    std::vector<Run> pending;
    auto flush = [&] {
        if (!pending.empty()) out.push_back(runs_node(std::move(pending)));
        pending.clear();
    };
    for (const NodeP &p : flat) {
        if (p->kind == Node::Kind::kRuns) {
            for (const Run &r : *p->runs) append_run(&pending, p->offset + r.offset, r.length);
            continue;
        }
        // A single-block repetition continuing the pending runs stays a repetition.
        flush();
        out.push_back(p);
    }
    if (out.empty()) {
        return runs_node(std::move(pending));
    }
    flush();
    if (out.size() == 1) return out[0];
    auto n = std::make_shared<Node>();
    n->kind = Node::Kind::kSeq;
    std::vector<std::int64_t> sizes(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
        sizes[i] = out[i]->size;
        n->size += out[i]->size;
    }
    n->part_starts = prefix_starts(sizes);
    n->parts = std::make_shared<const std::vector<NodeP>>(std::move(out));
    return n;
}

bool add_dimension(StridedForm *form, int *dims, std::int64_t n, std::int64_t stride) {
    if (n == 1) return true;
    if (*dims == 0 && stride == form->block) {
        form->block *= n;
        return true;
    }
    if (*dims > 0 && form->count[*dims - 1] * form->stride[*dims - 1] == stride) {
        form->count[*dims - 1] *= n;
        return true;
    }
    if (*dims >= kMaxStridedDims) return false;
    form->count[*dims] = n;
    form->stride[*dims] = stride;
    ++*dims;
    return true;
}

void bounds(const Node &node, std::int64_t *lo, std::int64_t *hi) {
    switch (node.kind) {
        case Node::Kind::kRuns: {
            *lo = INT64_MAX;
            *hi = INT64_MIN;
            for (const Run &r : *node.runs) {
                *lo = std::min(*lo, r.offset);
                *hi = std::max(*hi, r.offset + r.length);
            }
            break;
        }
        case Node::Kind::kRepeat: {
            bounds(*node.child, lo, hi);
            const std::int64_t last = (node.count - 1) * node.stride;
            *lo += std::min<std::int64_t>(0, last);
            *hi += std::max<std::int64_t>(0, last);
            break;
        }
        case Node::Kind::kSeq: {
            std::int64_t l = INT64_MAX, h = INT64_MIN;
            for (const NodeP &p : *node.parts) {
                std::int64_t pl, ph;
                bounds(*p, &pl, &ph);
                l = std::min(l, pl);
                h = std::max(h, ph);
            }
            *lo = l;
            *hi = h;
            break;
        }
    }
    *lo += node.offset;
    *hi += node.offset;
}

bool strided_form(const Node &node, StridedForm *form, int *dims) {
    if (node.size == 0) return false;
    if (is_single_block(node)) {
        *form = StridedForm{};
        form->offset = node.offset + (*node.runs)[0].offset;
        form->block = node.size;
        *dims = 0;
        return true;
    }
    if (node.kind != Node::Kind::kRepeat || !strided_form(*node.child, form, dims)) return false;
    form->offset += node.offset;
    return add_dimension(form, dims, node.count, node.stride);
}

}  // namespace flat
}  // namespace mpiacc
