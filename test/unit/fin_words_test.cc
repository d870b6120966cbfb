// The FIN words (protocol/fin_words.h): a sender's words, and a receiver writing into
// them. This process plays both sides: the receiver maps the sender's segment through
// /proc/<its pid>/fd, the path a peer on the node takes.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <set>
#include <string>

#include "protocol/envelope.h"
#include "util/node_identity.h"
#include "protocol/fin_words.h"

namespace {

constexpr int kSender = 3;  // the sender's world rank, as the receiver knows it

class FinWordsTest : public ::testing::Test {
protected:
    void SetUp() override {
        std::string why;
        ASSERT_EQ(words_.create(&why), MPI_SUCCESS) << why;
        offer_ = words_.offer(getpid(), mpiacc::local_pid_namespace());
    }
    void TearDown() override {
        peers_.clear();
        mpiacc::unmap_peer_segments();
        words_.destroy();
    }
    bool write(std::uint32_t slot, std::uint64_t id, std::uint16_t status, std::string *why) {
        return peers_.write(kSender, offer_, mpiacc::local_pid_namespace(), slot, mpiacc::fin_word_value(id, status),
                            why);
    }

    mpiacc::FinWords words_;
    mpiacc::FinWordsOffer offer_{};
    mpiacc::PeerFinWords peers_;
};

TEST_F(FinWordsTest, AWordReadsNothingUntilItsTransfersFinIsWritten) {
    ASSERT_EQ(offer_.words, mpiacc::FinWords::kWords);
    const int slot = words_.take();
    ASSERT_GE(slot, 0);
    EXPECT_EQ(words_.read(slot, 41), -1);
    std::string why;
    ASSERT_TRUE(write(static_cast<std::uint32_t>(slot), 41, 0, &why)) << why;
    EXPECT_EQ(words_.read(slot, 41), 0);
    // Another transfer's FIN in that word is not this one's.
    EXPECT_EQ(words_.read(slot, 42), -1);
}

TEST_F(FinWordsTest, TheStatusOfAFailedPullComesThrough) {
    const int slot = words_.take();
    std::string why;
    ASSERT_TRUE(write(static_cast<std::uint32_t>(slot), 7, MPI_ERR_OTHER, &why)) << why;
    EXPECT_EQ(words_.read(slot, 7), MPI_ERR_OTHER);
}

TEST_F(FinWordsTest, IdsPastFortyEightBitsAreComparedOnTheirLowBits) {
    const std::uint64_t id = (std::uint64_t{1} << 50) + 9;
    const int slot = words_.take();
    std::string why;
    ASSERT_TRUE(write(static_cast<std::uint32_t>(slot), id, 0, &why)) << why;
    EXPECT_EQ(words_.read(slot, id), 0);
    EXPECT_EQ(words_.read(slot, 9), 0);  // the same low bits: ids never get that far apart
}

TEST_F(FinWordsTest, ATakenWordIsClearedAndAReleasedOneIsHandedOutAgain) {
    const int slot = words_.take();
    std::string why;
    ASSERT_TRUE(write(static_cast<std::uint32_t>(slot), 5, 0, &why)) << why;
    words_.release(slot);
    const int again = words_.take();
    EXPECT_EQ(again, slot);
    EXPECT_EQ(words_.read(again, 5), -1);  // cleared: the old FIN does not finish a new send
}

TEST_F(FinWordsTest, AnAbandonedWordIsNeverHandedOutAgain) {
    const int slot = words_.take();
    words_.abandon(slot);
    EXPECT_EQ(words_.abandoned(), 1u);
    std::set<int> taken;
    for (int s = words_.take(); s >= 0; s = words_.take()) taken.insert(s);
    EXPECT_EQ(taken.size(), mpiacc::FinWords::kWords - 1);
    EXPECT_EQ(taken.count(slot), 0u);
}

TEST_F(FinWordsTest, WhenEveryWordIsTakenTheNextSendGetsNone) {
    for (std::uint32_t i = 0; i < mpiacc::FinWords::kWords; ++i) ASSERT_GE(words_.take(), 0);
    EXPECT_EQ(words_.take(), -1);
    EXPECT_EQ(words_.free_words(), 0u);
}

TEST_F(FinWordsTest, ASlotPastTheSendersWordsIsRefused) {
    std::string why;
    EXPECT_FALSE(write(mpiacc::FinWords::kWords, 1, 0, &why));
}

TEST_F(FinWordsTest, ASenderInAnotherPidNamespaceIsAnsweredByMessage) {
    offer_.pid_namespace += 1;
    std::string why;
    EXPECT_FALSE(write(0, 1, 0, &why));
    EXPECT_NE(why.find("PID namespace"), std::string::npos) << why;
    // Decided once: the next FIN to that sender goes by message without asking again.
    why.clear();
    EXPECT_FALSE(write(0, 1, 0, &why));
    EXPECT_TRUE(why.empty()) << why;
}

TEST_F(FinWordsTest, ASenderThatOffersNoWordsIsAnsweredByMessage) {
    offer_ = mpiacc::FinWords().offer(getpid(), mpiacc::local_pid_namespace());
    EXPECT_EQ(offer_.words, 0u);
    std::string why;
    EXPECT_FALSE(write(0, 1, 0, &why));
    EXPECT_NE(why.find("offers no FIN words"), std::string::npos) << why;
}

TEST_F(FinWordsTest, AFailedMappingIsTriedAgainAFewTimesThenGivenUp) {
    offer_.where.inode += 1;  // the descriptor names another file now: mapping it fails
    for (int attempt = 0; attempt < mpiacc::PeerFinWords::kMapAttempts; ++attempt) {
        std::string why;
        EXPECT_FALSE(write(0, 1, 0, &why));
        EXPECT_FALSE(why.empty()) << "attempt " << attempt;
    }
    std::string why;
    EXPECT_FALSE(write(0, 1, 0, &why));
    EXPECT_TRUE(why.empty()) << why;  // given up: no more attempts
}

TEST_F(FinWordsTest, AMappingThatFailedOnceIsMadeAtTheNextAttempt) {
    const std::uint64_t inode = offer_.where.inode;
    offer_.where.inode += 1;
    std::string why;
    EXPECT_FALSE(write(0, 1, 0, &why));
    offer_.where.inode = inode;  // what failed has passed
    const int slot = words_.take();
    why.clear();
    ASSERT_TRUE(write(static_cast<std::uint32_t>(slot), 3, 0, &why)) << why;
    EXPECT_EQ(words_.read(slot, 3), 0);
}

TEST_F(FinWordsTest, AWordIsNotReadOnceTheWordsAreGone) {
    const int slot = words_.take();
    words_.destroy();
    EXPECT_EQ(words_.read(slot, 1), -1);
}

}  // namespace
