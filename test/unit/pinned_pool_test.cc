#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "pool/pinned_pool.h"

namespace {

// Stands in for cudaMallocHost / mapped CL buffers: plain heap memory, counted.
class CountingAllocator : public mpiacc::PinnedAllocator {
public:
    CountingAllocator(int *allocs, int *frees, bool fail) : allocs_(allocs), frees_(frees), fail_(fail) {}
    void *allocate(std::size_t bytes, std::string *why) override {
        if (fail_) {
            *why = "pinned allocation refused";
            return nullptr;
        }
        ++*allocs_;
        return std::malloc(bytes);
    }
    void release(void *p) override {
        ++*frees_;
        std::free(p);
    }

private:
    int *allocs_, *frees_;
    bool fail_;
};

}  // namespace

TEST(PinnedPool, HandsOutDistinctSlotsUpToCapacityThenReportsExhaustion) {
    int allocs = 0, frees = 0;
    {
        mpiacc::PinnedPool pool(std::make_unique<CountingAllocator>(&allocs, &frees, false), 1024, 8 * 1024, 4 * 1024);
        std::set<void *> slots;
        for (int i = 0; i < 8; ++i) {
            void *s = pool.acquire();
            ASSERT_NE(s, nullptr);
            slots.insert(s);
        }
        EXPECT_EQ(slots.size(), 8u);
        EXPECT_EQ(pool.acquire(), nullptr);  // back-pressure, not a new allocation
        EXPECT_EQ(pool.exhausted_count(), 1u);
        EXPECT_EQ(pool.slots_in_use(), 8u);
        EXPECT_EQ(allocs, 2);  // two 4 KiB segments
        pool.release(*slots.begin());
        EXPECT_NE(pool.acquire(), nullptr);
    }
    EXPECT_EQ(frees, 2);  // segments go back only when the pool dies
}

TEST(PinnedPool, ReusesReleasedSlotsWithoutAllocatingAgain) {
    int allocs = 0, frees = 0;
    mpiacc::PinnedPool pool(std::make_unique<CountingAllocator>(&allocs, &frees, false), 4096, 1 << 20);
    for (int i = 0; i < 1000; ++i) {
        void *s = pool.acquire();
        ASSERT_NE(s, nullptr);
        pool.release(s);
    }
    EXPECT_EQ(pool.allocations(), 1u);
    EXPECT_EQ(allocs, 1);
}

TEST(PinnedPool, AlwaysHasAtLeastTwoSlotsForDoubleBuffering) {
    int allocs = 0, frees = 0;
    mpiacc::PinnedPool pool(std::make_unique<CountingAllocator>(&allocs, &frees, false), 1 << 20, 1024);
    EXPECT_EQ(pool.slots_total(), 2u);
    EXPECT_NE(pool.acquire(), nullptr);
    EXPECT_NE(pool.acquire(), nullptr);
    EXPECT_EQ(pool.acquire(), nullptr);
}

TEST(PinnedPool, AllocatorFailureIsReportedWithItsReason) {
    int allocs = 0, frees = 0;
    mpiacc::PinnedPool pool(std::make_unique<CountingAllocator>(&allocs, &frees, true), 1024, 8192);
    EXPECT_EQ(pool.acquire(), nullptr);
    EXPECT_EQ(pool.allocations(), 0u);
    EXPECT_EQ(pool.last_error(), "pinned allocation refused");
}

TEST(NumaAllocationScope, UnknownBusIdFallsBackToTheProcessNodes) {
    mpiacc::NumaAllocationScope scope("ffff:ff:1f.7");
    // On a single-node machine nothing is bound; on several, a node is chosen.
    EXPECT_GE(scope.node(), -1);
    void *p = std::malloc(1 << 16);
    ASSERT_NE(p, nullptr);
    std::free(p);
}
