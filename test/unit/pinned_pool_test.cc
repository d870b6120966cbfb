#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

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

TEST(StagingBuffer, TakesASlotWhenThePayloadFitsAndGivesItBackWhenDestroyed) {
    int allocs = 0, frees = 0;
    mpiacc::PinnedPool pool(std::make_unique<CountingAllocator>(&allocs, &frees, false), 1024, 2048, 2048);
    {
        mpiacc::StagingBuffer staging(&pool, 1024);
        EXPECT_TRUE(staging.pinned());
        EXPECT_EQ(pool.slots_in_use(), 1u);
        std::memset(staging.data(), 0x5a, 1024);  // the whole slot is usable
    }
    EXPECT_EQ(pool.slots_in_use(), 0u);
}

TEST(StagingBuffer, UsesItsOwnMemoryWhenThePayloadIsLargerThanASlotOrNoSlotIsFree) {
    int allocs = 0, frees = 0;
    mpiacc::PinnedPool pool(std::make_unique<CountingAllocator>(&allocs, &frees, false), 1024, 2048, 2048);
    mpiacc::StagingBuffer large(&pool, 1025);
    EXPECT_FALSE(large.pinned());
    EXPECT_EQ(pool.slots_in_use(), 0u);
    std::memset(large.data(), 0x5a, 1025);

    mpiacc::StagingBuffer a(&pool, 8), b(&pool, 8), c(&pool, 8);  // the pool has two slots
    EXPECT_TRUE(a.pinned());
    EXPECT_TRUE(b.pinned());
    EXPECT_FALSE(c.pinned());  // never waits for a slot
    EXPECT_NE(c.data(), nullptr);
    EXPECT_EQ(pool.slots_in_use(), 2u);

    mpiacc::StagingBuffer none(nullptr, 0);  // no pool (no device pool yet), empty payload
    EXPECT_FALSE(none.pinned());
    EXPECT_NE(none.data(), nullptr);
}

TEST(StagingBuffer, MovingHandsTheSlotOnAndResetReturnsItOnce) {
    int allocs = 0, frees = 0;
    mpiacc::PinnedPool pool(std::make_unique<CountingAllocator>(&allocs, &frees, false), 1024, 2048, 2048);
    mpiacc::StagingBuffer first(&pool, 16);
    void *slot = first.data();
    mpiacc::StagingBuffer second(std::move(first));
    EXPECT_FALSE(first.pinned());  // NOLINT(bugprone-use-after-move): moved-from state is defined
    EXPECT_TRUE(second.pinned());
    EXPECT_EQ(second.data(), slot);
    EXPECT_EQ(pool.slots_in_use(), 1u);

    mpiacc::StagingBuffer third(&pool, 16);
    EXPECT_EQ(pool.slots_in_use(), 2u);
    third = std::move(second);  // third's own slot goes back; second's is now third's
    EXPECT_EQ(pool.slots_in_use(), 1u);
    EXPECT_EQ(third.data(), slot);
    third.reset();
    third.reset();
    EXPECT_EQ(pool.slots_in_use(), 0u);
    EXPECT_NE(pool.acquire(), nullptr);  // the slot came back, usable
}

TEST(StagingMemory, IsWholeAlignedHugePagesThatAreWritableAndNotInheritedByAFork) {
    const std::size_t huge = 2u << 20;
    std::string why;
    std::size_t len = 0;
    void *p = mpiacc::map_staging_memory(3u << 20, &len, &why);
    ASSERT_NE(p, nullptr) << why;
    EXPECT_EQ(len, 2 * huge);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % huge, 0u);
    std::memset(p, 0x5a, len);
    EXPECT_EQ(static_cast<unsigned char *>(p)[len - 1], 0x5a);
    // The advice is in the mapping's flags: "hg" (huge pages) and "dc" (do not copy on fork).
    std::FILE *f = std::fopen("/proc/self/smaps", "r");
    ASSERT_NE(f, nullptr);
    char line[512];
    bool in_region = false, found = false;
    std::string flags;
    while (std::fgets(line, sizeof line, f)) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
            in_region = lo <= reinterpret_cast<std::uintptr_t>(p) && reinterpret_cast<std::uintptr_t>(p) < hi;
            continue;
        }
        if (in_region && std::strncmp(line, "VmFlags:", 8) == 0) {
            flags = line;
            found = true;
        }
    }
    std::fclose(f);
    ASSERT_TRUE(found);
    EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
    EXPECT_NE(flags.find(" dc"), std::string::npos) << flags;
    mpiacc::unmap_staging_memory(p, len);
}

TEST(StagingMemory, ZeroBytesStillMapsOneHugePage) {
    std::string why;
    std::size_t len = 0;
    void *p = mpiacc::map_staging_memory(0, &len, &why);
    ASSERT_NE(p, nullptr) << why;
    EXPECT_EQ(len, 2u << 20);
    mpiacc::unmap_staging_memory(p, len);
}
