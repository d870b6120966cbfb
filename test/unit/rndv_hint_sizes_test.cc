// Which host payloads a device receiver asks to get by RTS/CTS (MPIACC_HOST_RNDV_HINT_MIN
// and _PIPELINE), and which sends therefore look for that request: the sender's test
// (host_rndv_hint_size) must hold for every size any receiver may ask from, or a request
// would go unread.
#include <gtest/gtest.h>

#include "core/context.h"  // plain_send_limit
#include "core/knobs.h"
#include "protocol/transfer.h"

using mpiacc::Knobs;

namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

Knobs defaults() {
    Knobs k;
    k.host_rndv_threshold = 2 * MiB;
    k.host_rndv_hint_min = 256 * KiB;
    k.host_rndv_hint_min_pipeline = 512 * KiB;
    return k;
}

}  // namespace

TEST(RndvHintSizes, SharedSlotsAskFromTheSmallerSize) {
    const Knobs k = defaults();
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 256 * KiB - 1, true), 0u);
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 256 * KiB, true), 256 * KiB);
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 384 * KiB, true), 256 * KiB);
}

TEST(RndvHintSizes, ThroughMpichItAsksFromThePipelinesSize) {
    const Knobs k = defaults();
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 384 * KiB, false), 0u);
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 512 * KiB - 1, false), 0u);
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 512 * KiB, false), 512 * KiB);
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 1 * MiB, false), 512 * KiB);
}

TEST(RndvHintSizes, NeverAtOrPastTheRendezvousThreshold) {
    const Knobs k = defaults();
    // Those go by RTS/CTS anyway.
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 2 * MiB, true), 0u);
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 2 * MiB, false), 0u);
    EXPECT_FALSE(mpiacc::host_rndv_hint_size(k, 2 * MiB));
}

TEST(RndvHintSizes, SendersLookFromTheSmallerOfTheTwo) {
    Knobs k = defaults();
    EXPECT_EQ(mpiacc::host_rndv_hint_floor(k), 256 * KiB);
    EXPECT_FALSE(mpiacc::host_rndv_hint_size(k, 256 * KiB - 1));
    EXPECT_TRUE(mpiacc::host_rndv_hint_size(k, 256 * KiB));
    // A pipeline size below the other: senders look from it, and shared slots still ask
    // from theirs.
    k.host_rndv_hint_min_pipeline = 128 * KiB;
    EXPECT_EQ(mpiacc::host_rndv_hint_floor(k), 128 * KiB);
    EXPECT_TRUE(mpiacc::host_rndv_hint_size(k, 128 * KiB));
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 128 * KiB, false), 128 * KiB);
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 128 * KiB, true), 0u);
    // Entry points send plainly below that floor, and no lower.
    EXPECT_EQ(mpiacc::plain_send_limit(k), 128 * KiB);
}

TEST(RndvHintSizes, EveryAskedSizeIsOneSendersLookFor) {
    for (std::size_t pipeline : {std::size_t{0}, 128 * KiB, 512 * KiB, 4 * MiB}) {
        Knobs k = defaults();
        k.host_rndv_hint_min_pipeline = pipeline;
        for (bool shared : {true, false})
            for (std::size_t bytes = 64 * KiB; bytes < 4 * MiB; bytes += 64 * KiB) {
                const std::size_t from = mpiacc::host_rndv_hint_ask(k, bytes, shared);
                if (from == 0) continue;
                EXPECT_LE(from, bytes);
                EXPECT_TRUE(mpiacc::host_rndv_hint_size(k, from)) << from << " asked, pipeline " << pipeline;
            }
    }
}

TEST(RndvHintSizes, ZeroTurnsARouteOrEveryRouteOff) {
    Knobs k = defaults();
    k.host_rndv_hint_min_pipeline = 0;  // never through MPICH; shared slots still ask
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 1 * MiB, false), 0u);
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 1 * MiB, true), 256 * KiB);
    EXPECT_EQ(mpiacc::host_rndv_hint_floor(k), 256 * KiB);
    k = defaults();
    k.host_rndv_hint_min = 0;  // never, on either route
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 1 * MiB, false), 0u);
    EXPECT_EQ(mpiacc::host_rndv_hint_ask(k, 1 * MiB, true), 0u);
    EXPECT_EQ(mpiacc::host_rndv_hint_floor(k), 0u);
    EXPECT_FALSE(mpiacc::host_rndv_hint_size(k, 1 * MiB));
    EXPECT_EQ(mpiacc::plain_send_limit(k), 2 * MiB);
}
