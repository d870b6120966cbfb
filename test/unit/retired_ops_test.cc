#include <gtest/gtest.h>

#include <memory>

#include "core/progress.h"

using namespace mpiacc;

namespace {
// Counts what retirement does to it.
struct Tally {
    int released = 0;   // release_pooled calls
    int destroyed = 0;  // destructor runs
};

class CountingOp final : public Op {
public:
    explicit CountingOp(Tally *tally) : tally_(tally) { complete = true; }
    ~CountingOp() override { ++tally_->destroyed; }
    void progress() override {}
    void release_pooled() override { ++tally_->released; }

private:
    Tally *tally_;
};

class RetiredOps : public testing::Test {
protected:
    void SetUp() override { destroy_retired_ops(); }
    void TearDown() override { destroy_retired_ops(); }
};
}  // namespace

TEST_F(RetiredOps, ARetiredOpGivesBackItsPooledBuffersAtOnceAndIsDestroyedLater) {
    Tally t;
    retire_later(std::make_unique<CountingOp>(&t));
    EXPECT_EQ(t.released, 1) << "the bounce buffers and slots must go back before the next call";
    EXPECT_EQ(t.destroyed, 0) << "destroyed on the caller's way back";
    EXPECT_EQ(context().retired_ops.size(), 1u);
    destroy_retired_ops();
    EXPECT_EQ(t.destroyed, 1);
    EXPECT_EQ(t.released, 1);
    EXPECT_TRUE(context().retired_ops.empty());
}

TEST_F(RetiredOps, TheListStaysBoundedWithoutAWaitToEmptyIt) {
    Tally t;
    for (int i = 0; i < 16; ++i) retire_later(std::make_unique<CountingOp>(&t));
    EXPECT_EQ(t.destroyed, 0);
    retire_later(std::make_unique<CountingOp>(&t));  // the 17th: the 16 before it go
    EXPECT_EQ(t.destroyed, 16);
    EXPECT_EQ(context().retired_ops.size(), 1u);
    EXPECT_EQ(t.released, 17);
}
