#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "accel/accel.h"

using namespace mpiacc;

namespace {
// Counts its flushes; `hold_again` times it defers once more from inside a flush.
class CountingHolder final : public CopyBatch::Holder, public std::enable_shared_from_this<CountingHolder> {
public:
    void flush() override {
        ++flushes;
        if (hold_again > 0) {
            --hold_again;
            CopyBatch::hold(shared_from_this());
        }
    }
    int flushes = 0;
    int hold_again = 0;
};
}  // namespace

TEST(CopyBatch, HeldCopiesAreFlushedOnceWhenTheOutermostBatchCloses) {
    auto h = std::make_shared<CountingHolder>();
    EXPECT_FALSE(CopyBatch::open());
    {
        CopyBatch outer;
        {
            CopyBatch inner;
            EXPECT_TRUE(CopyBatch::open());
            CopyBatch::hold(h);
            CopyBatch::hold(h);  // a second deferred copy of the same holder
        }
        EXPECT_TRUE(CopyBatch::open());
        EXPECT_EQ(h->flushes, 0) << "the inner batch's close flushed";
    }
    EXPECT_FALSE(CopyBatch::open());
    EXPECT_EQ(h->flushes, 1);
    {
        CopyBatch again;  // a later batch holds nothing of the last one's
    }
    EXPECT_EQ(h->flushes, 1);
}

TEST(CopyBatch, EveryHolderOfTheBatchIsFlushed) {
    auto a = std::make_shared<CountingHolder>(), b = std::make_shared<CountingHolder>();
    {
        CopyBatch batch;
        CopyBatch::hold(a);
        CopyBatch::hold(b);
    }
    EXPECT_EQ(a->flushes, 1);
    EXPECT_EQ(b->flushes, 1);
}

TEST(CopyBatch, AHolderHeldWithNoBatchOpenIsFlushedAtOnce) {
    auto h = std::make_shared<CountingHolder>();
    CopyBatch::hold(h);
    EXPECT_EQ(h->flushes, 1);
}

TEST(CopyBatch, AFlushThatDefersAgainIsFlushedAgainNotLost) {
    auto h = std::make_shared<CountingHolder>();
    h->hold_again = 1;
    {
        CopyBatch batch;
        CopyBatch::hold(h);
    }
    EXPECT_EQ(h->flushes, 2);
    EXPECT_FALSE(CopyBatch::open());
}

TEST(CopyBatch, BatchesArePerThread) {
    auto mine = std::make_shared<CountingHolder>(), theirs = std::make_shared<CountingHolder>();
    CopyBatch batch;
    CopyBatch::hold(mine);
    bool open_there = true;
    std::thread t([&] {
        open_there = CopyBatch::open();
        CopyBatch theirs_batch;
        CopyBatch::hold(theirs);
    });
    t.join();
    EXPECT_FALSE(open_there) << "this thread's batch was open on another";
    EXPECT_EQ(theirs->flushes, 1) << "the other thread's batch did not flush its own holder";
    EXPECT_EQ(mine->flushes, 0) << "the other thread's batch flushed this thread's holder";
}
