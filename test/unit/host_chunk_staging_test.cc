// Which chunks of a host buffer's pipeline transfer the sender copies into a huge-page
// slot before MPICH sends them (host_chunk_staged): chunks of at least
// kHostChunkStagingMin (1 MiB), but not a lone send's first.
#include <gtest/gtest.h>

#include "protocol/transfer.h"

namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

}  // namespace

TEST(HostChunkStaging, StagesChunksOfOneMiBAndUp) {
    EXPECT_EQ(mpiacc::kHostChunkStagingMin, 1 * MiB);
    EXPECT_FALSE(mpiacc::host_chunk_staged(1, 1 * MiB - 1, 2));
    EXPECT_TRUE(mpiacc::host_chunk_staged(1, 1 * MiB, 2));
    EXPECT_TRUE(mpiacc::host_chunk_staged(1, 2 * MiB, 2));
}

TEST(HostChunkStaging, ShortChunksGoFromTheUsersBuffer) {
    // A window of one-chunk messages of 512 KiB: none is copied, first chunk or not.
    EXPECT_FALSE(mpiacc::host_chunk_staged(0, 512 * KiB, 8));
    // A long transfer's short last chunk goes as it is too.
    EXPECT_FALSE(mpiacc::host_chunk_staged(3, 3, 1));
    EXPECT_TRUE(mpiacc::host_chunk_staged(2, 2 * MiB, 1));
}

TEST(HostChunkStaging, ALoneSendsFirstChunkIsNotCopied) {
    EXPECT_FALSE(mpiacc::host_chunk_staged(0, 2 * MiB, 1));
    EXPECT_FALSE(mpiacc::host_chunk_staged(0, 2 * MiB, 0));
    // With another send in flight its first chunk is copied as well.
    EXPECT_TRUE(mpiacc::host_chunk_staged(0, 2 * MiB, 2));
}
