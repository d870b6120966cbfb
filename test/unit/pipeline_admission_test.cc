// How a receiver admits pipeline transfers per sender (RecvOp::admit_pipeline): what each
// transfer holds of the budget (pipeline_share), whether one may start beside what the
// others hold (pipeline_admits) under MPIACC_PIPELINE_TRANSFERS, and the depth of a
// pipeline from a sender on this node (node_transfer_depth).
#include <gtest/gtest.h>

#include "core/knobs.h"
#include "protocol/transfer.h"

using mpiacc::Knobs;
using mpiacc::PipelineShare;

namespace {

Knobs budget(long transfers) {
    Knobs k;
    k.pipeline_depth = 4;
    k.pipeline_transfers = transfers;
    return k;
}

}  // namespace

TEST(PipelineShare, OneChunkHoldsOneChunk) {
    const PipelineShare s = mpiacc::pipeline_share(1, 4);
    EXPECT_EQ(s.chunks, 1);
    EXPECT_FALSE(s.several());
    EXPECT_EQ(s.depth, 4);
}

TEST(PipelineShare, SeveralChunksHoldTheDepth) {
    const PipelineShare big = mpiacc::pipeline_share(8, 4);
    EXPECT_EQ(big.chunks, 4);
    EXPECT_TRUE(big.several());
    // Fewer chunks than the depth still hold the depth.
    EXPECT_EQ(mpiacc::pipeline_share(3, 4).chunks, 4);
    // A transfer of several at depth 2 (a pipeline from a sender on this node) holds 2,
    // and one whose sender proposed a depth under 2 still counts 2.
    const PipelineShare shallow = mpiacc::pipeline_share(8, 2);
    EXPECT_EQ(shallow.chunks, 2);
    EXPECT_EQ(shallow.depth, 2);
    EXPECT_EQ(mpiacc::pipeline_share(8, 1).chunks, 2);
}

TEST(NodeTransferDepth, IsTwoWithinThePipelineDepth) {
    Knobs k = budget(3);
    EXPECT_EQ(mpiacc::node_transfer_depth(k), mpiacc::kNodePipelineDepth);
    EXPECT_EQ(mpiacc::kNodePipelineDepth, 2);
    k.pipeline_depth = 8;
    EXPECT_EQ(mpiacc::node_transfer_depth(k), 2);
    k.pipeline_depth = 1;  // double buffering at least, on either route
    EXPECT_EQ(mpiacc::transfer_depth(k), 2);
    EXPECT_EQ(mpiacc::node_transfer_depth(k), 2);
}

// Under MPIACC_PIPELINE_TRANSFERS=3, transfers `depth` deep: three times `depth`
// transfers of one chunk, or three of several.
static void expect_chunk_budget(long depth) {
    const Knobs k = budget(3);
    const long limit = 3 * depth;
    const PipelineShare one{1, depth}, several{depth, depth};
    EXPECT_TRUE(mpiacc::pipeline_admits(k, limit - 1, 0, one)) << "depth " << depth;
    EXPECT_FALSE(mpiacc::pipeline_admits(k, limit, 0, one)) << "depth " << depth;
    EXPECT_TRUE(mpiacc::pipeline_admits(k, limit - depth, 0, several)) << "depth " << depth;
    EXPECT_FALSE(mpiacc::pipeline_admits(k, limit - depth + 1, 0, several)) << "depth " << depth;
}

TEST(PipelineAdmits, TheBudgetIsTheTransfersTimesTheirDepth) {
    expect_chunk_budget(4);
    // From a sender on this node at depth 2: three transfers of several, or six of one.
    expect_chunk_budget(2);
}

TEST(PipelineAdmits, TheFirstTransferStartsHoweverLarge) {
    EXPECT_TRUE(mpiacc::pipeline_admits(budget(1), 0, 0, PipelineShare{4, 2}));
    EXPECT_FALSE(mpiacc::pipeline_admits(budget(1), 1, 0, PipelineShare{4, 2}));
}

TEST(PipelineAdmits, ASingleChunkDoesNotPassAWaitingTransferOfSeveral) {
    const PipelineShare one{1, 4};
    EXPECT_FALSE(mpiacc::pipeline_admits(budget(3), 1, 1, one));
    // Even with nothing held.
    EXPECT_FALSE(mpiacc::pipeline_admits(budget(3), 0, 1, one));
    // Another transfer of several may go, budget permitting.
    EXPECT_TRUE(mpiacc::pipeline_admits(budget(3), 1, 1, PipelineShare{4, 4}));
}

TEST(PipelineAdmits, ZeroTransfersMeansNoBound) {
    EXPECT_TRUE(mpiacc::pipeline_admits(budget(0), 100, 3, PipelineShare{1, 4}));
    EXPECT_TRUE(mpiacc::pipeline_admits(budget(0), 100, 0, PipelineShare{4, 4}));
}
