// Which chunks of a host buffer's pipeline transfer the sender copies into a huge-page
// slot before MPICH sends them (MPIACC_HOST_CHUNK_STAGING): chunks of at least the knob's
// size, but not a lone send's first.
#include <gtest/gtest.h>

#include "core/knobs.h"
#include "protocol/transfer.h"

using mpiacc::Knobs;

namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

Knobs staging_from(std::size_t bytes) {
    Knobs k;
    k.host_chunk_staging = bytes;
    return k;
}

}  // namespace

TEST(HostChunkStaging, DefaultStagesChunksOfOneMiBAndUp) {
    // 1 MiB is the declared default (knobs_test checks it from the environment).
    const Knobs k = staging_from(1 * MiB);
    EXPECT_FALSE(mpiacc::host_chunk_staged(k, 1, 1 * MiB - 1, 2));
    EXPECT_TRUE(mpiacc::host_chunk_staged(k, 1, 1 * MiB, 2));
    EXPECT_TRUE(mpiacc::host_chunk_staged(k, 1, 2 * MiB, 2));
}

TEST(HostChunkStaging, ShortChunksGoFromTheUsersBuffer) {
    const Knobs k = staging_from(1 * MiB);
    // A window of one-chunk messages of 512 KiB: none is copied, first chunk or not.
    EXPECT_FALSE(mpiacc::host_chunk_staged(k, 0, 512 * KiB, 8));
    // A long transfer's short last chunk goes as it is too.
    EXPECT_FALSE(mpiacc::host_chunk_staged(k, 3, 3, 1));
    EXPECT_TRUE(mpiacc::host_chunk_staged(k, 2, 2 * MiB, 1));
}

TEST(HostChunkStaging, ALoneSendsFirstChunkIsNotCopied) {
    const Knobs k = staging_from(1 * MiB);
    EXPECT_FALSE(mpiacc::host_chunk_staged(k, 0, 2 * MiB, 1));
    EXPECT_FALSE(mpiacc::host_chunk_staged(k, 0, 2 * MiB, 0));
    // With another send in flight its first chunk is copied as well.
    EXPECT_TRUE(mpiacc::host_chunk_staged(k, 0, 2 * MiB, 2));
}

TEST(HostChunkStaging, OneMeansEveryChunkAndZeroNone) {
    const Knobs every = staging_from(1);  // the knob's old "on"
    EXPECT_TRUE(mpiacc::host_chunk_staged(every, 3, 3, 1));
    EXPECT_TRUE(mpiacc::host_chunk_staged(every, 0, 64 * KiB, 2));
    EXPECT_FALSE(mpiacc::host_chunk_staged(every, 0, 64 * KiB, 1));
    const Knobs none = staging_from(0);
    EXPECT_FALSE(mpiacc::host_chunk_staged(none, 1, 2 * MiB, 4));
    EXPECT_FALSE(mpiacc::host_chunk_staged(none, 0, 2 * MiB, 4));
}
