/* The `mpi` netmod through its interface (src/netmod/netmod.h), between two ranks: byte
 * and typed transfers, a chunk placed into the slot the receiver expects it in, control
 * messages taken by polling with their sender, a cancelled receive, and the collective
 * count of control messages sent to each rank. Handles are empty once their transfer has
 * completed. The protocol is idle throughout, so the tags used here are the test's own.
 * MPIACC-TEST-RANKS: 2 */
#include <vector>

#include "mpitest.h"
#include "netmod/netmod.h"

namespace {

using mpiacc::NetHandle;
using mpiacc::netmod;

constexpr int kTag = 30001;

void fill(std::vector<unsigned char> &v, int seed) {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>(seed + i * 7);
}

bool same(const std::vector<unsigned char> &v, int seed) {
    for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != static_cast<unsigned char>(seed + i * 7)) return false;
    return true;
}

// Tests until the handle's transfer has completed; false when it takes over 10 s.
bool finish(NetHandle *h) {
    const double deadline = MPI_Wtime() + 10.0;
    while (!netmod().test(h))
        if (MPI_Wtime() > deadline) return false;
    return !h->pending();
}

}  // namespace

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    const int peer = 1 - mt_rank;

    MT_CASE("bytes_sent_arrive_whole_and_completed_handles_are_empty") {
        std::vector<unsigned char> buf(1 << 20);
        NetHandle h;
        if (mt_rank == 0) {
            fill(buf, 3);
            MT_CHECK(netmod().send_bytes(buf.data(), buf.size(), peer, kTag, &h) == MPI_SUCCESS, "send_bytes");
        } else {
            MT_CHECK(netmod().recv_bytes(buf.data(), buf.size(), peer, kTag, &h) == MPI_SUCCESS, "recv_bytes");
        }
        MT_CHECK(finish(&h), "rank %d: the transfer did not complete", mt_rank);
        if (mt_rank == 1) MT_CHECK(same(buf, 3), "the received bytes differ");
        NetHandle empty;
        MT_CHECK(netmod().test(&empty), "an empty handle is not complete");
    }

    MT_CASE("a_placed_chunk_lands_in_the_slot_the_receiver_expects_it_in") {
        // Two-sided placement needs no registration: the receiver posts into the slot.
        // On one node every netmod places two-sided: `ib` only between nodes by default.
        MT_CHECK(netmod().reach(peer) == mpiacc::PeerReach::TWO_SIDED, "a peer on this node placed one-sided");
        std::vector<unsigned char> chunk(256 << 10), slot(512 << 10, 0);
        NetHandle h;
        if (mt_rank == 0) {
            fill(chunk, 11);
            MT_CHECK(
                netmod().place(chunk.data(), chunk.size(), peer, kTag + 1, mpiacc::RemoteSlot{}, &h) == MPI_SUCCESS,
                "place");
        } else {
            MT_CHECK(netmod().expect_placement(slot.data(), chunk.size(), peer, kTag + 1, false, &h) == MPI_SUCCESS,
                     "expect_placement");
        }
        MT_CHECK(finish(&h), "rank %d: the placement did not complete", mt_rank);
        if (mt_rank == 1) {
            std::vector<unsigned char> head(slot.begin(), slot.begin() + static_cast<long>(chunk.size()));
            MT_CHECK(same(head, 11), "the slot holds other bytes than the chunk");
            bool rest_untouched = true;
            for (std::size_t i = chunk.size(); i < slot.size(); ++i) rest_untouched = rest_untouched && slot[i] == 0;
            MT_CHECK(rest_untouched, "bytes past the chunk were written");
        }
    }

    MT_CASE("typed_transfers_move_a_strided_buffer") {
        MPI_Datatype strided;
        MPI_Type_vector(64, 4, 8, MPI_INT, &strided);
        MPI_Type_commit(&strided);
        std::vector<int> buf(64 * 8, -1);
        NetHandle h;
        if (mt_rank == 0) {
            for (int i = 0; i < 64 * 8; ++i) buf[static_cast<std::size_t>(i)] = i;
            MT_CHECK(netmod().send_typed(buf.data(), 1, strided, peer, kTag + 2, &h) == MPI_SUCCESS, "send_typed");
        } else {
            MT_CHECK(netmod().recv_typed(buf.data(), 1, strided, peer, kTag + 2, &h) == MPI_SUCCESS, "recv_typed");
        }
        MT_CHECK(finish(&h), "rank %d: the typed transfer did not complete", mt_rank);
        if (mt_rank == 1) {
            bool right = true;
            for (int i = 0; i < 64 * 8; ++i) right = right && buf[static_cast<std::size_t>(i)] == (i % 8 < 4 ? i : -1);
            MT_CHECK(right, "the strided receive holds other values");
        }
        MPI_Type_free(&strided);
    }

    MT_CASE("control_messages_are_taken_by_polling_with_their_sender") {
        unsigned char msg[64], got[64];
        for (int i = 0; i < 64; ++i) msg[i] = static_cast<unsigned char>(mt_rank * 100 + i);
        NetHandle h;
        MT_CHECK(netmod().send_control(msg, sizeof msg, peer, &h) == MPI_SUCCESS, "send_control");
        int from = -1;
        std::size_t got_len = 0;
        const double deadline = MPI_Wtime() + 10.0;
        bool taken = false;
        while (!(taken = netmod().poll_control(got, sizeof got, &from, &got_len)) && MPI_Wtime() < deadline) {
        }
        MT_CHECK(taken, "rank %d: no control message arrived", mt_rank);
        MT_CHECK(from == peer, "the message names rank %d as its sender", from);
        MT_CHECK(got_len == sizeof msg, "the message's length reads %zu", got_len);
        bool right = true;
        for (int i = 0; i < 64; ++i) right = right && got[i] == static_cast<unsigned char>(peer * 100 + i);
        MT_CHECK(right, "the control message's bytes differ");
        MT_CHECK(finish(&h), "rank %d: the control send did not complete", mt_rank);
        MPI_Barrier(MPI_COMM_WORLD);
        MT_CHECK(!netmod().poll_control(got, sizeof got, &from, &got_len), "a second control message appeared");
    }

    MT_CASE("a_cancelled_receive_completes_and_sent_counts_sum_per_rank") {
        std::vector<unsigned char> buf(64);
        NetHandle h;
        MT_CHECK(netmod().recv_bytes(buf.data(), buf.size(), peer, kTag + 3, &h) == MPI_SUCCESS, "recv_bytes");
        netmod().cancel(&h);
        MT_CHECK(finish(&h), "rank %d: the cancelled receive did not complete", mt_rank);
        // Rank r sent r + 1 control messages to each rank: each rank was sent 1 + 2.
        const int per_peer[2] = {mt_rank + 1, mt_rank + 1};
        int total = -1;
        MT_CHECK(netmod().sum_sent_to_me(per_peer, &total) == MPI_SUCCESS, "sum_sent_to_me");
        MT_CHECK(total == 3, "rank %d was sent %d in all, not 3", mt_rank, total);
    }

    return mt_finalize();
}
