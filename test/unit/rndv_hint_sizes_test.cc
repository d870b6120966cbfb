// Which host payloads a device receiver asks to get by RTS/CTS (kHostRndvHintMin), and
// which sends therefore look for that request: the sender's test (host_rndv_hint_size)
// must hold for every size a receiver asks from, or a request would go unread, and the
// entry points must not send such sizes plainly without asking (plain_send_limit).
#include <gtest/gtest.h>

#include "core/knobs.h"
#include "protocol/transfer.h"

using mpiacc::Knobs;

namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

Knobs threshold(std::size_t bytes) {
    Knobs k;
    k.host_rndv_threshold = bytes;
    return k;
}

}  // namespace

TEST(RndvHintSizes, AskedFrom256KiBUnderTheThreshold) {
    const Knobs k = threshold(2 * MiB);
    EXPECT_EQ(mpiacc::kHostRndvHintMin, 256 * KiB);
    EXPECT_FALSE(mpiacc::host_rndv_hint_size(k, 256 * KiB - 1));
    EXPECT_TRUE(mpiacc::host_rndv_hint_size(k, 256 * KiB));
    EXPECT_TRUE(mpiacc::host_rndv_hint_size(k, 2 * MiB - 1));
}

TEST(RndvHintSizes, NeverAtOrPastTheRendezvousThreshold) {
    // Those go by RTS/CTS anyway.
    EXPECT_FALSE(mpiacc::host_rndv_hint_size(threshold(2 * MiB), 2 * MiB));
    EXPECT_FALSE(mpiacc::host_rndv_hint_size(threshold(512 * KiB), 512 * KiB));
    // A threshold at or under the hint's size leaves nothing to ask for.
    EXPECT_FALSE(mpiacc::host_rndv_hint_size(threshold(256 * KiB), 256 * KiB));
}

TEST(RndvHintSizes, WithoutRendezvousEveryLargeHostPayloadMayBeAskedFor) {
    // MPIACC_HOST_RNDV_THRESHOLD=0: host data never goes by RTS/CTS unless asked.
    EXPECT_TRUE(mpiacc::host_rndv_hint_size(threshold(0), 64 * MiB));
    EXPECT_FALSE(mpiacc::host_rndv_hint_size(threshold(0), 64 * KiB));
}

TEST(RndvHintSizes, EntryPointsSendPlainlyOnlyBelowWhatMayBeAskedFor) {
    EXPECT_EQ(mpiacc::plain_send_limit(threshold(2 * MiB)), 256 * KiB);
    EXPECT_EQ(mpiacc::plain_send_limit(threshold(0)), 256 * KiB);
    EXPECT_EQ(mpiacc::plain_send_limit(threshold(128 * KiB)), 128 * KiB);
    for (std::size_t t : {std::size_t{0}, 128 * KiB, 2 * MiB}) {
        for (std::size_t bytes = 64 * KiB; bytes < 4 * MiB; bytes += 64 * KiB) {
            if (mpiacc::host_rndv_hint_size(threshold(t), bytes)) {
                EXPECT_GE(bytes, mpiacc::plain_send_limit(threshold(t))) << bytes << " B, threshold " << t;
            }
        }
    }
}
