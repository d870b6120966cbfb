// How a receiver admits pipeline transfers per sender (RecvOp::admit_pipeline): what each
// transfer holds of the budget (pipeline_share), and whether one may start beside what
// the others hold (pipeline_admits) under MPIACC_PIPELINE_TRANSFERS and
// MPIACC_PIPELINE_BYTES, and the depth of a pipeline from a sender on this node
// (node_transfer_depth, MPIACC_NODE_PIPELINE_DEPTH).
#include <gtest/gtest.h>

#include "core/knobs.h"
#include "protocol/transfer.h"

using mpiacc::Knobs;
using mpiacc::PipelineShare;

namespace {

constexpr std::size_t MiB = 1024 * 1024;

Knobs budget(long transfers, std::size_t bytes) {
    Knobs k;
    k.pipeline_depth = 4;
    k.pipeline_transfers = transfers;
    k.pipeline_bytes = bytes;
    return k;
}

}  // namespace

TEST(PipelineShare, OneChunkHoldsOneChunkAndItsBytes) {
    const PipelineShare s = mpiacc::pipeline_share(1, 2 * MiB, 4, 2 * MiB);
    EXPECT_EQ(s.chunks, 1);
    EXPECT_FALSE(s.several());
    EXPECT_EQ(s.bytes, 2 * MiB);
    const PipelineShare short_one = mpiacc::pipeline_share(1, 2 * MiB, 4, MiB + 3);
    EXPECT_EQ(short_one.bytes, MiB + 3);
}

TEST(PipelineShare, SeveralChunksHoldTheDepthAndTheBytesInFlight) {
    // 16 MiB in 2 MiB chunks, depth 4: 4 chunks, 8 MiB in flight at most.
    const PipelineShare big = mpiacc::pipeline_share(8, 2 * MiB, 4, 16 * MiB);
    EXPECT_EQ(big.chunks, 4);
    EXPECT_TRUE(big.several());
    EXPECT_EQ(big.bytes, 8 * MiB);
    // 4 MiB + 3 in three chunks: the share is still the depth's, the bytes all of it.
    const PipelineShare three = mpiacc::pipeline_share(3, 2 * MiB, 4, 4 * MiB + 3);
    EXPECT_EQ(three.chunks, 4);
    EXPECT_EQ(three.bytes, 4 * MiB + 3);
    // A transfer of several at depth 2 (a pipeline from a sender on this node) holds 2,
    // and one whose sender proposed a depth under 2 still counts 2.
    const PipelineShare shallow = mpiacc::pipeline_share(8, 2 * MiB, 2, 16 * MiB);
    EXPECT_EQ(shallow.chunks, 2);
    EXPECT_EQ(shallow.depth, 2);
    EXPECT_EQ(shallow.bytes, 4 * MiB);
    EXPECT_EQ(mpiacc::pipeline_share(8, 2 * MiB, 1, 16 * MiB).chunks, 2);
}

TEST(NodeTransferDepth, IsTheNodeKnobWithinTwoAndThePipelineDepth) {
    Knobs k = budget(3, 0);
    k.node_pipeline_depth = 2;
    EXPECT_EQ(mpiacc::node_transfer_depth(k), 2);
    k.node_pipeline_depth = 1;  // double buffering at least
    EXPECT_EQ(mpiacc::node_transfer_depth(k), 2);
    k.node_pipeline_depth = 8;  // never deeper than MPIACC_PIPELINE_DEPTH
    EXPECT_EQ(mpiacc::node_transfer_depth(k), 4);
    k.node_pipeline_depth = 0;  // off: MPIACC_PIPELINE_DEPTH
    EXPECT_EQ(mpiacc::node_transfer_depth(k), 4);
}

// Under MPIACC_PIPELINE_TRANSFERS=3 alone, transfers `depth` deep (2 MiB chunks): three
// times `depth` transfers of one chunk, or three of several.
static void expect_chunk_budget(long depth) {
    const Knobs k = budget(3, 0);
    const long limit = 3 * depth;
    const std::size_t held = static_cast<std::size_t>(limit) * 2 * MiB;
    const PipelineShare one{1, 2 * MiB, depth}, several{depth, static_cast<std::size_t>(depth) * 2 * MiB, depth};
    EXPECT_TRUE(mpiacc::pipeline_admits(k, limit - 1, held, 0, one)) << "depth " << depth;
    EXPECT_FALSE(mpiacc::pipeline_admits(k, limit, held, 0, one)) << "depth " << depth;
    EXPECT_TRUE(mpiacc::pipeline_admits(k, limit - depth, held, 0, several)) << "depth " << depth;
    EXPECT_FALSE(mpiacc::pipeline_admits(k, limit - depth + 1, held, 0, several)) << "depth " << depth;
}

TEST(PipelineAdmits, ChunkBudgetAloneIsTheDefault) {
    expect_chunk_budget(4);
    // Bytes do not count without MPIACC_PIPELINE_BYTES.
    EXPECT_TRUE(mpiacc::pipeline_admits(budget(3, 0), 1, 1024 * MiB, 0, PipelineShare{1, 2 * MiB, 4}));
}

TEST(PipelineAdmits, TheChunkBudgetIsTheTransfersTimesTheirDepth) {
    // From a sender on this node at depth 2: three transfers of several, or six of one.
    expect_chunk_budget(2);
    // The first transfer starts whatever its share: here more chunks than the budget.
    EXPECT_TRUE(mpiacc::pipeline_admits(budget(1, 0), 0, 0, 0, PipelineShare{4, 8 * MiB, 2}));
}

TEST(PipelineAdmits, ByteBudgetBoundsOneChunkTransfers) {
    const Knobs k = budget(3, 12 * MiB);
    const PipelineShare one{1, 2 * MiB, 4};
    // Twelve 2 MiB transfers fit the chunk budget; the byte budget stops at six.
    EXPECT_TRUE(mpiacc::pipeline_admits(k, 5, 10 * MiB, 0, one));
    EXPECT_FALSE(mpiacc::pipeline_admits(k, 6, 12 * MiB, 0, one));
    // 1 MiB ones: twelve fit both.
    EXPECT_TRUE(mpiacc::pipeline_admits(k, 11, 11 * MiB, 0, PipelineShare{1, MiB, 4}));
}

TEST(PipelineAdmits, TheFirstTransferStartsHoweverLarge) {
    const Knobs k = budget(3, 4 * MiB);
    EXPECT_TRUE(mpiacc::pipeline_admits(k, 0, 0, 0, PipelineShare{4, 8 * MiB, 4}));
    EXPECT_FALSE(mpiacc::pipeline_admits(k, 1, 1, 0, PipelineShare{4, 8 * MiB, 4}));
}

TEST(PipelineAdmits, ASingleChunkDoesNotPassAWaitingTransferOfSeveral) {
    const PipelineShare one{1, MiB, 4};
    EXPECT_FALSE(mpiacc::pipeline_admits(budget(3, 0), 1, MiB, 1, one));
    EXPECT_FALSE(mpiacc::pipeline_admits(budget(0, 64 * MiB), 1, MiB, 1, one));
    // Another transfer of several may go, budget permitting.
    EXPECT_TRUE(mpiacc::pipeline_admits(budget(3, 0), 1, MiB, 1, PipelineShare{4, 8 * MiB, 4}));
    // With no bound at all nothing waits.
    EXPECT_TRUE(mpiacc::pipeline_admits(budget(0, 0), 100, 1024 * MiB, 3, one));
}
