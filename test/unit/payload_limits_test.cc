// Which messages travel as the plain payload: the receiver's side (largest_payload) and
// the blocking device sender's (staged_eager_max) must agree, or a payload would be
// truncated by the receiver's bounce buffer.
#include <gtest/gtest.h>

#include "core/knobs.h"
#include "protocol/transfer.h"

using mpiacc::Knobs;

namespace {

Knobs defaults() {
    Knobs k;
    k.host_rndv_threshold = 2u << 20;
    k.device_eager_max = 16u << 10;
    k.chunk_size = 2u << 20;
    k.device_isend_eager_max = 64u << 10;
    return k;
}

}  // namespace

TEST(PayloadLimits, WithoutIpcADeviceSendBelowOneChunkGoesAsOnePayload) {
    Knobs k = defaults();
    EXPECT_EQ(mpiacc::staged_eager_max(k), (2u << 20) - 1);
    EXPECT_LE(mpiacc::staged_eager_max(k), mpiacc::largest_payload(k));
}

TEST(PayloadLimits, NeverLargerThanWhatReceiversTakeAsAPayload) {
    Knobs k = defaults();
    k.host_rndv_threshold = 256u << 10;  // receivers post bounces of 256 KiB - 1
    EXPECT_EQ(mpiacc::staged_eager_max(k), (256u << 10) - 1);
    EXPECT_EQ(mpiacc::largest_payload(k), (256u << 10) - 1);
}

TEST(PayloadLimits, NeverASecondChunkWorth) {
    Knobs k = defaults();
    k.chunk_size = 512u << 10;
    EXPECT_EQ(mpiacc::staged_eager_max(k), (512u << 10) - 1);
    k.host_rndv_threshold = 0;  // no host rendezvous: receivers take payloads of any size
    EXPECT_EQ(mpiacc::staged_eager_max(k), (512u << 10) - 1);
}

TEST(PayloadLimits, TheIpcEagerLimitIsAFloor) {
    Knobs k = defaults();
    k.device_eager_max = 4u << 20;
    k.host_rndv_threshold = 0;
    EXPECT_EQ(mpiacc::staged_eager_max(k), std::size_t{4u << 20});
}

TEST(PayloadLimits, NonblockingSendsStageAtTheCallUpToTheirOwnKnob) {
    Knobs k = defaults();
    EXPECT_EQ(mpiacc::staged_isend_eager_max(k), std::size_t{64u << 10});
    // ...a peer that declined a pull gets them staged up to the same size
    EXPECT_EQ(mpiacc::eager_after_decline_max(k), std::size_t{64u << 10});
    k.device_isend_eager_max = 0;  // off: blocking sends keep their limit
    EXPECT_EQ(mpiacc::staged_isend_eager_max(k), 0u);
    EXPECT_EQ(mpiacc::eager_after_decline_max(k), std::size_t{16u << 10});
}

TEST(PayloadLimits, NonblockingSendsNeverStageMoreThanBlockingOnes) {
    Knobs k = defaults();
    k.device_isend_eager_max = 8u << 20;
    k.host_rndv_threshold = 256u << 10;
    EXPECT_EQ(mpiacc::staged_isend_eager_max(k), mpiacc::staged_eager_max(k));
    EXPECT_LE(mpiacc::staged_isend_eager_max(k), mpiacc::largest_payload(k));
}
