// The cache of peers' staging segments (pool/shared_memory.h). This process plays both
// the owner and the peer: it maps its own segments through /proc/<its pid>/fd, which is
// the path a peer on the node takes.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "pool/shared_memory.h"

namespace {

constexpr int kOwner = 7;  // the owner's world rank, as a notice names it
constexpr std::size_t kSegment = 64u << 10;

class PeerSegments : public ::testing::Test {
protected:
    void SetUp() override {
        owned_.reserve(16);  // make() hands out references into it
        hook_ = mpiacc::add_peer_segment_unmap_hook([this](void *base) { unmapped_.push_back(base); });
    }
    void TearDown() override {
        mpiacc::remove_peer_segment_unmap_hook(hook_);
        mpiacc::unmap_peer_segments();
        mpiacc::set_peer_segment_limits(0, 0);
        for (auto &s : owned_) mpiacc::destroy_shared_segment(&s);
    }
    mpiacc::SharedSegment &make() {
        owned_.emplace_back();
        std::string why;
        EXPECT_EQ(mpiacc::create_shared_segment(kSegment, &owned_.back(), &why), MPI_SUCCESS) << why;
        return owned_.back();
    }
    void *map(const mpiacc::SharedSegment &s, std::uint64_t *mapping = nullptr) {
        std::string why;
        void *base = mpiacc::map_peer_segment(kOwner, getpid(), mpiacc::shared_location(s), mapping, &why);
        EXPECT_NE(base, nullptr) << why;
        return base;
    }

    std::vector<mpiacc::SharedSegment> owned_;
    std::vector<void *> unmapped_;
    int hook_ = 0;
};

TEST_F(PeerSegments, AMappingSeesTheOwnersBytesAndIsReusedWithItsId) {
    mpiacc::SharedSegment &s = make();
    std::memset(s.base, 0x5a, s.bytes);
    std::uint64_t first = 0, again = 0;
    auto *base = static_cast<unsigned char *>(map(s, &first));
    ASSERT_NE(base, nullptr);
    EXPECT_NE(base, s.base);  // a mapping of its own, not the owner's address
    EXPECT_EQ(base[0], 0x5a);
    EXPECT_EQ(base[kSegment - 1], 0x5a);
    EXPECT_EQ(map(s, &again), base);
    EXPECT_EQ(again, first);
    EXPECT_EQ(mpiacc::peer_segments_mapped(), 1u);
}

TEST_F(PeerSegments, ASegmentWhoseDescriptorNowNamesAnotherFileIsUnmappedOnceUnused) {
    mpiacc::SharedSegment &old_segment = make();
    void *old_base = map(old_segment);
    mpiacc::release_peer_segment(old_base);
    const int fd = old_segment.fd;
    mpiacc::destroy_shared_segment(&old_segment);
    mpiacc::SharedSegment &fresh = make();  // the lowest free number: the one just closed
    ASSERT_EQ(fresh.fd, fd);
    std::uint64_t mapping = 0;
    map(fresh, &mapping);
    EXPECT_EQ(mpiacc::peer_segments_mapped(), 1u);
    ASSERT_EQ(unmapped_.size(), 1u);
    EXPECT_EQ(unmapped_[0], old_base);
}

TEST_F(PeerSegments, AMappingInUseIsKeptEvenWhenItsDescriptorWasReused) {
    mpiacc::SharedSegment &old_segment = make();
    map(old_segment);  // not released: a copy still reads it
    const int fd = old_segment.fd;
    mpiacc::destroy_shared_segment(&old_segment);
    mpiacc::SharedSegment &fresh = make();
    ASSERT_EQ(fresh.fd, fd);
    map(fresh);
    EXPECT_EQ(mpiacc::peer_segments_mapped(), 2u);
    EXPECT_TRUE(unmapped_.empty());
}

TEST_F(PeerSegments, TheLeastRecentlyUsedUnusedMappingMakesRoomAtTheCountBound) {
    mpiacc::set_peer_segment_limits(3, 0);
    std::vector<void *> bases;
    for (int i = 0; i < 3; ++i) bases.push_back(map(make()));
    for (void *b : bases) mpiacc::release_peer_segment(b);
    // Touch the first again: the second is now the least recently used.
    mpiacc::release_peer_segment(map(owned_[0]));
    map(make());
    EXPECT_EQ(mpiacc::peer_segments_mapped(), 3u);
    ASSERT_EQ(unmapped_.size(), 1u);
    EXPECT_EQ(unmapped_[0], bases[1]);
}

TEST_F(PeerSegments, TheCountBoundRefusesWithAReasonWhenEveryMappingIsInUse) {
    mpiacc::set_peer_segment_limits(2, 0);
    map(make());
    map(make());
    mpiacc::SharedSegment &third = make();
    std::string why;
    EXPECT_EQ(mpiacc::map_peer_segment(kOwner, getpid(), mpiacc::shared_location(third), nullptr, &why), nullptr);
    EXPECT_NE(why.find("all in use"), std::string::npos) << why;
    EXPECT_EQ(mpiacc::peer_segments_mapped(), 2u);
    EXPECT_TRUE(unmapped_.empty());
}

TEST_F(PeerSegments, TheByteBoundUnmapsUnusedMappingsButNeverRefuses) {
    mpiacc::set_peer_segment_limits(0, 2 * kSegment);
    void *a = map(make());
    map(make());  // in use
    mpiacc::release_peer_segment(a);
    map(make());  // a goes; b stays though the bound is then still reached
    EXPECT_EQ(mpiacc::peer_segments_mapped(), 2u);
    ASSERT_EQ(unmapped_.size(), 1u);
    EXPECT_EQ(unmapped_[0], a);
    map(make());  // nothing unused left: over the byte bound, but mapped
    EXPECT_EQ(mpiacc::peer_segments_mapped(), 3u);
}

TEST_F(PeerSegments, ASegmentOfAnotherInodeThanNamedIsRefused) {
    mpiacc::SharedSegment &s = make();
    mpiacc::SharedLocation loc = mpiacc::shared_location(s);
    loc.inode += 1;
    std::string why;
    EXPECT_EQ(mpiacc::map_peer_segment(kOwner, getpid(), loc, nullptr, &why), nullptr);
    EXPECT_NE(why.find("is not rank 7's staging segment"), std::string::npos) << why;
}

// A device kind's registrations (PeerSegmentPins), with the kind's calls recorded.
TEST(PeerSegmentPins, OneRegistrationPerMappingAndAStaleOneAtTheSameAddressIsReplaced) {
    std::vector<std::string> calls;
    std::atomic<std::int64_t> pins{0}, unpins{0};
    bool refuse = false;
    mpiacc::PeerSegmentPins p(
        [&](void *, std::size_t bytes, std::string *why) {
            calls.push_back("register " + std::to_string(bytes));
            if (refuse) *why = "refused";
            return !refuse;
        },
        [&](void *) { calls.push_back("unregister"); }, pins, unpins);
    char a[1], b[1];
    std::string why;
    EXPECT_TRUE(p.pin(a, 100, 1, &why));
    EXPECT_TRUE(p.pin(a, 100, 1, &why));  // the same mapping: registered already
    EXPECT_TRUE(p.pin(a, 200, 2, &why));  // another mapping got a's address
    EXPECT_TRUE(p.pin(b, 300, 3, &why));
    EXPECT_EQ(calls, (std::vector<std::string>{"register 100", "unregister", "register 200", "register 300"}));
    EXPECT_EQ(pins.load(), 3);
    EXPECT_EQ(unpins.load(), 1);

    p.unpin(a);
    p.unpin(a);  // gone already: nothing to do
    EXPECT_EQ(unpins.load(), 2);
    refuse = true;
    EXPECT_FALSE(p.pin(a, 100, 4, &why));
    EXPECT_EQ(why, "refused");
    EXPECT_EQ(pins.load(), 3);
    p.unpin(a);  // the refused one was never recorded
    EXPECT_EQ(unpins.load(), 2);

    calls.clear();
    p.unpin_all();
    EXPECT_EQ(calls, (std::vector<std::string>{"unregister"}));  // b's
    EXPECT_EQ(unpins.load(), 3);
}

}  // namespace
