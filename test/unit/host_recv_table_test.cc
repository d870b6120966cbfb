// HostRecvTable: the index from MPICH request handle to record (open addressing, linear
// probing, backward-shift deletion) that every host MPI_Irecv and completion goes through.
// Each lookup after each deletion checks the invariant a backward shift must keep: every
// entry still reachable from its home slot without crossing an empty one.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "protocol/host_recv.h"

using namespace mpiacc;

namespace {

// MPICH 4.0.2's handles for a window of receives: a few direct objects, then consecutive
// indices of one block (kind in the top byte), as MPI_Irecv hands them out.
std::vector<MPI_Request> window_handles(int n) {
    std::vector<MPI_Request> h;
    for (int i = 0; i < n; ++i) h.push_back(static_cast<MPI_Request>(i < 8 ? 0xac000000u + i : 0xec000000u + (i - 8)));
    return h;
}

HostRecv *indexed(HostRecvTable *t, MPI_Request handle) {
    HostRecv *rec = t->acquire();
    rec->builtin = true;
    rec->handle = handle;
    t->index(rec);
    return rec;
}

void expect_all_found(const HostRecvTable &t, const std::vector<HostRecv *> &live) {
    for (HostRecv *rec : live) ASSERT_EQ(t.find(rec->handle), rec) << "handle " << std::hex << rec->handle;
}

}  // namespace

TEST(HostRecvTable, AnEmptyTableFindsNothing) {
    HostRecvTable t;
    EXPECT_TRUE(t.empty());
    EXPECT_EQ(t.find(static_cast<MPI_Request>(0xec000001u)), nullptr);
}

TEST(HostRecvTable, FindsEveryRecordOfAWindowAndNoOtherHandle) {
    HostRecvTable t;
    std::vector<HostRecv *> live;
    for (MPI_Request h : window_handles(64)) live.push_back(indexed(&t, h));
    expect_all_found(t, live);
    EXPECT_EQ(t.find(static_cast<MPI_Request>(0xec000038u)), nullptr) << "one past the window";
    EXPECT_EQ(t.find(static_cast<MPI_Request>(0xac000008u)), nullptr);
    EXPECT_FALSE(t.empty());
}

// The index doubles before it is half full, rehashing what it holds. Each round fills it
// to just under half of 512 slots, a window's consecutive handles (which hash apart) and
// random ones (which collide, some in runs that wrap past the last slot), then deletes
// them in random order, looking up every record left after each deletion: a hole must take
// a later entry of its run unless that entry's home lies cyclically after the hole.
TEST(HostRecvTable, KeepsEveryRecordFindableThroughGrowthAndDeletionsInAnyOrder) {
    std::mt19937 rng(42);
    for (int round = 0; round < 40; ++round) {
        HostRecvTable t;
        std::vector<HostRecv *> live;
        for (MPI_Request h : window_handles(64)) live.push_back(indexed(&t, h));
        while (live.size() < 255) {
            const auto h = static_cast<MPI_Request>(rng());
            if (h == MPI_REQUEST_NULL || t.find(h)) continue;
            live.push_back(indexed(&t, h));
        }
        expect_all_found(t, live);
        std::shuffle(live.begin(), live.end(), rng);
        while (!live.empty()) {
            HostRecv *rec = live.back();
            live.pop_back();
            const MPI_Request h = rec->handle;
            t.unindex(rec);
            ASSERT_EQ(t.find(h), nullptr)
                << "round " << round << ": handle " << std::hex << h << " still found after unindex";
            t.release(rec);
            expect_all_found(t, live);
            if (HasFatalFailure()) return;
        }
        EXPECT_TRUE(t.empty());
    }
}

TEST(HostRecvTable, ReleasedRecordsAreReusedAndComeBackFree) {
    HostRecvTable t;
    HostRecv *a = indexed(&t, static_cast<MPI_Request>(0xec000001u));
    a->state = HostRecv::State::POSTED;
    t.unindex(a);
    t.release(a);
    EXPECT_EQ(a->state, HostRecv::State::FREE);
    EXPECT_EQ(a->handle, MPI_REQUEST_NULL);
    EXPECT_EQ(t.acquire(), a) << "the free list gives back the record released last";
}

TEST(HostRecvTable, UnindexOfAnAbsentOrNullHandleChangesNothing) {
    HostRecvTable t;
    HostRecv *a = indexed(&t, static_cast<MPI_Request>(0xec000001u));
    HostRecv *stray = t.acquire();
    stray->handle = static_cast<MPI_Request>(0xec000002u);
    t.unindex(stray);
    stray->handle = MPI_REQUEST_NULL;
    t.unindex(stray);
    EXPECT_EQ(t.find(a->handle), a);
    EXPECT_FALSE(t.empty());
}

// MPI_Request_free on a posted receive: the record leaves the index (its handle is no
// longer the user's) but stays in use, found by collect() until progress finishes it.
TEST(HostRecvTable, DetachedRecordsLeaveTheIndexButNotTheTable) {
    HostRecvTable t;
    HostRecv *a = indexed(&t, static_cast<MPI_Request>(0xec000001u));
    HostRecv *b = indexed(&t, static_cast<MPI_Request>(0xec000002u));
    t.detach(a);
    EXPECT_EQ(t.find(static_cast<MPI_Request>(0xec000001u)), nullptr);
    EXPECT_EQ(t.find(b->handle), b);
    EXPECT_TRUE(t.any_detached());
    std::vector<HostRecv *> all;
    t.collect(&all);
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0], b) << "indexed records first";
    EXPECT_EQ(all[1], a) << "then detached ones";
    t.unindex(b);
    t.release(b);
    EXPECT_FALSE(t.empty()) << "a detached record still holds the table";
    t.undetach(a);
    t.release(a);
    EXPECT_FALSE(t.any_detached());
    EXPECT_TRUE(t.empty());
}

// InPlaceRanges: the user buffers with an in-place receive pending. A receive whose bytes
// overlap one lands in a bounce buffer instead (two envelopes must not land in the same
// bytes before either is read).
TEST(InPlaceRanges, OverlapIsAnyCommonByteAndTouchingIsNone) {
    InPlaceRanges r;
    EXPECT_FALSE(r.overlaps(0, 1000)) << "none pending";
    const auto a = r.add(1000, 2000);
    EXPECT_TRUE(r.overlaps(1999, 2001));
    EXPECT_TRUE(r.overlaps(500, 1001));
    EXPECT_TRUE(r.overlaps(1200, 1300)) << "inside";
    EXPECT_TRUE(r.overlaps(0, 5000)) << "around";
    EXPECT_FALSE(r.overlaps(2000, 2100)) << "the range ends before 2000";
    EXPECT_FALSE(r.overlaps(900, 1000));
    r.remove(a);
    EXPECT_FALSE(r.overlaps(1200, 1300)) << "removed";
}

// The hull of two disjoint ranges covers the gap between them: a receive there is tested
// against each range, and does not overlap.
TEST(InPlaceRanges, AGapInsideTheHullIsFree) {
    InPlaceRanges r;
    const auto a = r.add(1000, 2000);
    const auto b = r.add(3000, 4000);
    EXPECT_FALSE(r.overlaps(2000, 3000));
    EXPECT_TRUE(r.overlaps(2500, 3001));
    r.remove(b);
    EXPECT_FALSE(r.overlaps(3000, 4000)) << "b's bytes are free once b is removed, though the hull still holds them";
    EXPECT_TRUE(r.overlaps(1500, 1600));
    r.remove(a);
    EXPECT_FALSE(r.overlaps(0, UINTPTR_MAX)) << "no range left";
}

TEST(InPlaceRanges, TokensAreReusedAndZeroMeansNone) {
    InPlaceRanges r;
    const auto a = r.add(0x1000, 0x2000);
    EXPECT_NE(a, 0u);
    r.remove(a);
    r.remove(0);  // a receive that was not in place
    const auto b = r.add(0x5000, 0x6000);
    EXPECT_EQ(b, a) << "a freed token is taken again";
    EXPECT_TRUE(r.overlaps(0x5fff, 0x7000));
    EXPECT_FALSE(r.overlaps(0x1000, 0x2000));
}
