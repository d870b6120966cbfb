/* Cancel and truncation. A receive that nothing matched can be cancelled
 * (MPI_Test_cancelled true, buffer untouched); one already matched cannot. A receive
 * smaller than the message fails with MPI_ERR_TRUNCATE under MPI_ERRORS_RETURN, writes
 * nothing beyond its buffer, and the sender completes normally; a later message on the
 * same tag still arrives intact. Sizes cover small payloads, the 200-byte envelope
 * length, receives smaller than an envelope, and messages above the host rendezvous
 * threshold.
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"

#define GUARD 4096 /* bytes past the end of a receive buffer that must stay untouched */

/* Rank 0 sends msg_n bytes (blocking, must succeed), then a follow-up message of
 * follow_n bytes on the same tag. Rank 1 receives the first into recv_n bytes (with
 * MPI_Recv, or MPI_Irecv + MPI_Wait), expects MPI_ERR_TRUNCATE, and then receives the
 * follow-up intact. */
static void truncate_case(size_t msg_n, size_t recv_n, size_t follow_n, int tag, int nonblocking) {
    if (mt_rank == 0) {
        unsigned char *buf = p2p_alloc(msg_n > follow_n ? msg_n : follow_n);
        mt_fill(buf, msg_n, p2p_seed(tag, 0, 0));
        int rc = MPI_Send(buf, (int)msg_n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
        MT_CHECK(rc == MPI_SUCCESS, "sender of the truncated message got error class %d", p2p_class(rc));
        mt_fill(buf, follow_n, p2p_seed(tag, 0, 1));
        rc = MPI_Send(buf, (int)follow_n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
        MT_CHECK(rc == MPI_SUCCESS, "follow-up send got error class %d", p2p_class(rc));
        free(buf);
    } else if (mt_rank == 1) {
        size_t alloc = (recv_n > follow_n ? recv_n : follow_n) + GUARD;
        unsigned char *buf = p2p_alloc(alloc);
        memset(buf, 0xa5, alloc);
        MPI_Status st;
        int rc;
        if (nonblocking) {
            MPI_Request q;
            rc = MPI_Irecv(buf, (int)recv_n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &q);
            MT_CHECK(rc == MPI_SUCCESS, "MPI_Irecv itself failed with class %d", p2p_class(rc));
            rc = MPI_Wait(&q, &st);
            MT_CHECK(q == MPI_REQUEST_NULL, "request not freed by MPI_Wait after the error");
        } else {
            rc = MPI_Recv(buf, (int)recv_n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
        }
        MT_CHECK(p2p_class(rc) == MPI_ERR_TRUNCATE, "error class %d, expected MPI_ERR_TRUNCATE (%d)",
                 p2p_class(rc), MPI_ERR_TRUNCATE);
        MT_CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == tag, "truncated status source %d tag %d",
                 st.MPI_SOURCE, st.MPI_TAG);
        P2P_CHECK_UNTOUCHED(buf + recv_n, GUARD, 0xa5, "guard past the receive buffer");
        memset(buf, 0, alloc);
        rc = MPI_Recv(buf, (int)follow_n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
        MT_CHECK(rc == MPI_SUCCESS, "follow-up receive failed with class %d", p2p_class(rc));
        P2P_CHECK_STATUS(st, 0, tag, follow_n);
        P2P_CHECK_BYTES(buf, follow_n, p2p_seed(tag, 0, 1), "follow-up message");
        free(buf);
    }
}

/* Rank 1 posts an Irecv that nothing matches, cancels it, and checks the outcome. */
static void cancel_unmatched(size_t n, int tag) {
    if (mt_rank == 1) {
        unsigned char *buf = p2p_alloc(n);
        memset(buf, 0x3c, n);
        MPI_Request q;
        MPI_Status st;
        int cancelled = 0;
        MPI_Irecv(buf, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &q);
        MPI_Cancel(&q);
        MPI_Wait(&q, &st);
        MPI_Test_cancelled(&st, &cancelled);
        MT_CHECK(cancelled, "MPI_Test_cancelled false for a receive nothing matched");
        MT_CHECK(q == MPI_REQUEST_NULL, "request not freed");
        P2P_CHECK_UNTOUCHED(buf, n, 0x3c, "cancelled receive buffer");
        free(buf);
    }
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const size_t thr = p2p_host_threshold();

    MT_CASE("cancel_unmatched_irecv_test_cancelled_true_buffer_untouched") {
        cancel_unmatched(64, 500);
    }

    MT_CASE("cancel_unmatched_9MiB_irecv_test_cancelled_true_buffer_untouched") {
        cancel_unmatched(P2P_RNDV_BYTES, 501);
        cancel_unmatched(P2P_ENVELOPE_BYTES, 502);
    }

    MT_CASE("cancelled_irecv_does_not_take_a_later_message") {
        const int tag = 503;
        const size_t n = P2P_RNDV_BYTES;
        unsigned char *buf = p2p_alloc(n);
        cancel_unmatched(n, tag);
        MPI_Barrier(MPI_COMM_WORLD); /* the send starts after the cancel completed */
        if (mt_rank == 0) {
            mt_fill(buf, n, tag);
            MPI_Send(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Status st;
            memset(buf, 0, n);
            MPI_Recv(buf, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
            P2P_CHECK_STATUS(st, 0, tag, n);
            P2P_CHECK_BYTES(buf, n, tag, "message sent after the cancel");
        }
        free(buf);
    }

    MT_CASE("matched_irecv_is_not_cancelled_and_data_arrives") {
        /* MPI_Ssend returns only once its receive is matched; the cancel comes after. */
        enum { N = 3 };
        const int tag = 504;
        const size_t sizes[N] = {16, P2P_ENVELOPE_BYTES, P2P_RNDV_BYTES};
        unsigned char *buf[N];
        MPI_Request req[N];
        for (int i = 0; i < N; ++i) buf[i] = p2p_alloc(sizes[i]);
        if (mt_rank == 1)
            for (int i = 0; i < N; ++i)
                MPI_Irecv(buf[i], (int)sizes[i], MPI_BYTE, 0, tag + i, MPI_COMM_WORLD, &req[i]);
        if (mt_rank == 0) {
            for (int i = 0; i < N; ++i) {
                mt_fill(buf[i], sizes[i], p2p_seed(tag, 0, i));
                MPI_Ssend(buf[i], (int)sizes[i], MPI_BYTE, 1, tag + i, MPI_COMM_WORLD);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (mt_rank == 1) {
            for (int i = 0; i < N; ++i) {
                MPI_Status st;
                int cancelled = 1;
                MPI_Cancel(&req[i]);
                MPI_Wait(&req[i], &st);
                MPI_Test_cancelled(&st, &cancelled);
                MT_CHECK(!cancelled, "%zu-byte receive reported cancelled after it was matched", sizes[i]);
                P2P_CHECK_STATUS(st, 0, tag + i, sizes[i]);
                P2P_CHECK_BYTES(buf[i], sizes[i], p2p_seed(tag, 0, i), "payload");
            }
        }
        for (int i = 0; i < N; ++i) free(buf[i]);
    }

    MT_CASE("truncate_small_message_gives_err_truncate_and_later_message_arrives") {
        truncate_case(50, 10, 10, 510, 0);
    }

    MT_CASE("truncate_201_byte_message_into_200_byte_receive_gives_err_truncate") {
        truncate_case(201, P2P_ENVELOPE_BYTES, P2P_ENVELOPE_BYTES, 511, 0);
    }

    MT_CASE("truncate_200_byte_message_into_100_byte_receive_gives_err_truncate") {
        truncate_case(P2P_ENVELOPE_BYTES, 100, 100, 512, 0);
        truncate_case(P2P_ENVELOPE_BYTES, 199, P2P_ENVELOPE_BYTES, 513, 0);
    }

    MT_CASE("truncate_9MiB_message_into_1MiB_receive_gives_err_truncate") {
        truncate_case(P2P_RNDV_BYTES, (size_t)1 << 20, 1 << 20, 514, 0);
    }

    MT_CASE("truncate_9MiB_message_into_100_byte_receive_gives_err_truncate") {
        truncate_case(P2P_RNDV_BYTES, 100, 100, 515, 0);
        truncate_case(P2P_RNDV_BYTES, P2P_ENVELOPE_BYTES, 3, 516, 0);
    }

    MT_CASE("truncate_threshold_plus_one_into_threshold_gives_err_truncate") {
        truncate_case(thr + 1, thr, thr, 517, 0);
    }

    MT_CASE("truncated_irecv_wait_returns_err_truncate") {
        truncate_case(50, 10, 10, 518, 1);
        truncate_case(P2P_ENVELOPE_BYTES, 100, P2P_ENVELOPE_BYTES, 519, 1);
        truncate_case(P2P_RNDV_BYTES, (size_t)1 << 20, P2P_RNDV_BYTES, 520, 1);
    }

    MT_CASE("waitall_with_truncated_receive_returns_err_in_status") {
        const int tag_ok = 521, tag_trunc = 522;
        const size_t n_ok = P2P_RNDV_BYTES, n_trunc = P2P_ENVELOPE_BYTES;
        if (mt_rank == 0) {
            unsigned char *buf = p2p_alloc(n_ok);
            mt_fill(buf, n_ok, tag_ok);
            int rc1 = MPI_Send(buf, (int)n_trunc, MPI_BYTE, 1, tag_trunc, MPI_COMM_WORLD);
            int rc2 = MPI_Send(buf, (int)n_ok, MPI_BYTE, 1, tag_ok, MPI_COMM_WORLD);
            MT_CHECK(rc1 == MPI_SUCCESS && rc2 == MPI_SUCCESS, "sends failed: classes %d %d",
                     p2p_class(rc1), p2p_class(rc2));
            free(buf);
        } else if (mt_rank == 1) {
            unsigned char *ok = p2p_alloc(n_ok), small[100];
            MPI_Request req[2];
            MPI_Status st[2];
            MPI_Irecv(ok, (int)n_ok, MPI_BYTE, 0, tag_ok, MPI_COMM_WORLD, &req[0]);
            MPI_Irecv(small, sizeof small, MPI_BYTE, 0, tag_trunc, MPI_COMM_WORLD, &req[1]);
            st[0].MPI_ERROR = st[1].MPI_ERROR = -1;
            int rc = MPI_Waitall(2, req, st);
            MT_CHECK(p2p_class(rc) == MPI_ERR_IN_STATUS, "MPI_Waitall class %d, expected MPI_ERR_IN_STATUS",
                     p2p_class(rc));
            MT_CHECK(p2p_class(st[1].MPI_ERROR) == MPI_ERR_TRUNCATE, "truncated status error class %d",
                     p2p_class(st[1].MPI_ERROR));
            if (st[0].MPI_ERROR == MPI_ERR_PENDING) MPI_Wait(&req[0], &st[0]);
            else
                MT_CHECK(st[0].MPI_ERROR == MPI_SUCCESS, "intact receive's status error %d", st[0].MPI_ERROR);
            P2P_CHECK_STATUS(st[0], 0, tag_ok, n_ok);
            P2P_CHECK_BYTES(ok, n_ok, tag_ok, "intact receive");
            free(ok);
        }
    }

    return mt_finalize();
}
