#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "util/counters.h"
#include "protocol/transfer.h"

using namespace mpiacc;

namespace {
constexpr std::size_t kMiB = std::size_t{1} << 20;
}

// Counters, not addresses: a fresh mapping may well get a freed one's address back.
long long reused() { return mpiacc_counter_value("protocol.bounce.reused"); }

TEST(BounceBuffer, ALargeOneIsReusedAfterRelease) {
    char *first;
    {
        BounceBuffer a(4 * kMiB);
        ASSERT_NE(a.data(), nullptr);
        std::memset(a.data(), 0x5a, 4 * kMiB);  // every byte is writable
        first = a.data();
    }
    const long long before = reused();
    BounceBuffer b(4 * kMiB);
    EXPECT_EQ(reused(), before + 1);
    EXPECT_EQ(b.data(), first);
    EXPECT_EQ(b.size(), 4 * kMiB);
}

TEST(BounceBuffer, TheSmallestCachedOneThatFitsIsTaken) {
    char *big, *mid;
    {
        BounceBuffer a(16 * kMiB), c(6 * kMiB);
        big = a.data();
        mid = c.data();
    }
    BounceBuffer small(5 * kMiB);
    EXPECT_EQ(small.data(), mid);
    BounceBuffer large(12 * kMiB);
    EXPECT_EQ(large.data(), big);
}

TEST(BounceBuffer, NoneMoreThanTwiceTheSizeIsTaken) {
    // A receive of 64 KiB after a window of 4 MiB ones gets a buffer of its own size:
    // taking a 4 MiB one would page-lock all of it for a 64 KiB payload.
    char *big;
    {
        BounceBuffer a(4 * kMiB);
        big = a.data();
    }
    const long long before = reused();
    BounceBuffer small(64 << 10);
    EXPECT_NE(small.data(), big);
    EXPECT_EQ(reused(), before);
    BounceBuffer fits(2 * kMiB);  // exactly half: still taken
    EXPECT_EQ(fits.data(), big);
}

TEST(BounceBuffer, AmongEqualSizesTheLastReleasedIsTaken) {
    char *older, *newer;
    {
        BounceBuffer a(20 * kMiB), b(20 * kMiB);  // a size no other test leaves cached
        older = a.data();
        newer = b.data();
        BounceBuffer hold_a(std::move(a));
        { BounceBuffer drop_b(std::move(b)); }  // released first
    }                                           // then a: the most recent
    BounceBuffer again(20 * kMiB);
    EXPECT_EQ(again.data(), older);
    BounceBuffer next(20 * kMiB);
    EXPECT_EQ(next.data(), newer);
}

TEST(BounceBuffer, TheCacheKeepsAtMost128MiBAndFollowsTheSizesInUse) {
    {
        std::vector<BounceBuffer> many;
        for (int i = 0; i < 48; ++i) many.emplace_back(4 * kMiB);
    }
    const long long before = reused();
    std::vector<BounceBuffer> again;
    for (int i = 0; i < 48; ++i) again.emplace_back(4 * kMiB);
    EXPECT_GE(reused() - before, 1);
    EXPECT_LE(reused() - before, 32);  // 128 MiB of buffers of at least 4 MiB
    again.clear();
    // A window of 8 MiB receives after it: the 4 MiB ones make way, oldest first.
    {
        std::vector<BounceBuffer> large;
        for (int i = 0; i < 16; ++i) large.emplace_back(8 * kMiB);
    }
    const long long before_large = reused();
    std::vector<BounceBuffer> large;
    for (int i = 0; i < 16; ++i) large.emplace_back(8 * kMiB);
    EXPECT_EQ(reused() - before_large, 16);
}

TEST(BounceBuffer, AMovedFromBufferHoldsNothing) {
    BounceBuffer a(3 * kMiB);
    char *p = a.data();
    BounceBuffer b(std::move(a));
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(b.data(), p);
    BounceBuffer c;
    c = std::move(b);
    EXPECT_EQ(b.data(), nullptr);
    EXPECT_EQ(c.data(), p);
    EXPECT_EQ(c.size(), 3 * kMiB);
}

TEST(BounceBuffer, SmallOnesWork) {
    BounceBuffer a(200);
    ASSERT_NE(a.data(), nullptr);
    std::memset(a.data(), 1, 200);
    EXPECT_EQ(a.size(), 200u);
}

namespace {
// Records registrations, as CudaAccel's cudaHostRegister would make them.
class RecordingAccel final : public Accel {
public:
    BufKind kind() const override { return BufKind::CUDA; }
    const char *name() const override { return "recording"; }
    bool available() override { return true; }
    int capture(void *, std::size_t, const BufferAttrs &, std::unique_ptr<DeviceBuffer> *, std::string *) override {
        return MPI_ERR_INTERN;
    }
    bool register_host(void *p, std::size_t) override {
        registered.push_back(p);
        return !refuse;
    }
    bool refuse = false;
    void unregister_host(void *p) override { unregistered.push_back(p); }
    std::vector<void *> registered, unregistered;
};
}  // namespace

TEST(BounceBuffer, APinnedOneStaysPinnedInTheCacheAndIsUnpinnedWhenFreed) {
    clear_bounce_cache();
    RecordingAccel accel;
    char *p;
    {
        BounceBuffer a(24 * kMiB);
        EXPECT_FALSE(a.pinned());
        ASSERT_TRUE(a.pin(&accel));
        EXPECT_TRUE(a.pin(&accel));  // once only
        p = a.data();
    }
    ASSERT_EQ(accel.registered.size(), 1u);
    EXPECT_EQ(accel.registered[0], p);
    {
        BounceBuffer again(24 * kMiB);  // from the cache, still registered
        EXPECT_EQ(again.data(), p);
        EXPECT_TRUE(again.pinned());
        EXPECT_TRUE(again.pin(&accel));
    }
    EXPECT_EQ(accel.registered.size(), 1u);
    EXPECT_TRUE(accel.unregistered.empty());
    clear_bounce_cache();  // MPI_Finalize: unregistered before the accelerator goes
    ASSERT_EQ(accel.unregistered.size(), 1u);
    EXPECT_EQ(accel.unregistered[0], p);
}

TEST(BounceBuffer, APinnedOneTooLargeToCacheIsUnpinnedWhenReleased) {
    RecordingAccel accel;
    {
        BounceBuffer huge(200 * kMiB);
        ASSERT_TRUE(huge.pin(&accel));
    }
    EXPECT_EQ(accel.unregistered.size(), 1u);
}

TEST(BounceBuffer, ARefusedRegistrationIsNotAskedAgain) {
    clear_bounce_cache();
    RecordingAccel accel;
    accel.refuse = true;
    char *p;
    {
        BounceBuffer a(3 * kMiB);
        EXPECT_FALSE(a.pin(&accel));
        EXPECT_FALSE(a.pin(&accel));
        p = a.data();
    }
    {
        BounceBuffer again(3 * kMiB);  // the same buffer, from the cache
        ASSERT_EQ(again.data(), p);
        EXPECT_FALSE(again.pin(&accel));
        EXPECT_FALSE(again.pinned());
    }
    EXPECT_EQ(accel.registered.size(), 1u);
    EXPECT_TRUE(accel.unregistered.empty());
    clear_bounce_cache();
}

TEST(BounceBuffer, ARefusalOrARegistrationByOneKindDoesNotDecideForAnother) {
    clear_bounce_cache();
    RecordingAccel refusing, registering;
    refusing.refuse = true;
    {
        BounceBuffer a(5 * kMiB);
        EXPECT_FALSE(a.pin(&refusing));  // e.g. a kind that cannot register host memory
        EXPECT_TRUE(a.pin(&registering));
        EXPECT_FALSE(a.pin(&refusing));  // pinned for the other kind only
        EXPECT_TRUE(a.pin(&registering));
    }
    EXPECT_EQ(refusing.registered.size(), 1u);
    EXPECT_EQ(registering.registered.size(), 1u);
    clear_bounce_cache();
    EXPECT_EQ(registering.unregistered.size(), 1u);
}

TEST(BounceBuffer, CachedSizesAreWholePages) {
    // Registration pins whole pages: two buffers must never share one.
    for (std::size_t n : {std::size_t{64} << 10, (std::size_t{64} << 10) + 1, std::size_t{3} * kMiB + 5}) {
        BounceBuffer b(n);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 4096, 0u) << n;
        EXPECT_EQ(b.size(), n);
        std::memset(b.data(), 1, n);
    }
}
