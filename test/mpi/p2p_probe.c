/* Probe, Iprobe, Mprobe, Improbe, Mrecv and Imrecv: the status of a probe reports the
 * real size of the message (a 200-byte payload and a 9 MiB message travel as envelopes
 * under MPI-ACC, whose own length must never show), MPI_Get_count agrees, and the
 * matched-probe calls receive exactly the message they probed.
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"

/* Rank 0 sends one message of n bytes with `tag`; rank 1 probes it with MPI_Probe (or
 * an MPI_Iprobe loop), checks the status, receives it into a buffer of exactly the
 * probed size, and checks the bytes. */
static void probe_then_receive_exact(size_t n, int tag, int use_iprobe) {
    if (mt_rank == 0) {
        unsigned char *buf = p2p_alloc(n);
        mt_fill(buf, n, p2p_seed(tag, 0, (int)n));
        MPI_Send(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
        free(buf);
    } else if (mt_rank == 1) {
        MPI_Status st;
        if (use_iprobe) {
            int flag = 0;
            double end = MPI_Wtime() + P2P_TIMEOUT_S;
            while (!flag && MPI_Wtime() < end) MPI_Iprobe(0, tag, MPI_COMM_WORLD, &flag, &st);
            MT_CHECK(flag, "Iprobe never found the %zu-byte message", n);
            if (!flag) return; /* the receive below would hang */
        } else {
            MPI_Probe(0, tag, MPI_COMM_WORLD, &st);
        }
        P2P_CHECK_STATUS(st, 0, tag, n);
        int count = p2p_count(&st, MPI_BYTE);
        if (count < 0) return;
        unsigned char *buf = p2p_alloc((size_t)count);
        MPI_Status rst;
        MPI_Recv(buf, count, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &rst);
        P2P_CHECK_STATUS(rst, 0, tag, n);
        if ((size_t)count == n) P2P_CHECK_BYTES(buf, n, p2p_seed(tag, 0, (int)n), "payload");
        free(buf);
    }
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    const size_t thr = p2p_host_threshold();

    MT_CASE("probe_reports_source_tag_and_size_and_does_not_consume") {
        const int tag = 400;
        char msg[37];
        mt_fill(msg, sizeof msg, 400);
        if (mt_rank == 0) {
            MPI_Send(msg, sizeof msg, MPI_CHAR, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Status st1, st2, st3;
            MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st1);
            MPI_Probe(0, tag, MPI_COMM_WORLD, &st2); /* still there */
            P2P_CHECK_STATUS(st1, 0, tag, sizeof msg);
            P2P_CHECK_STATUS(st2, 0, tag, sizeof msg);
            char r[64];
            memset(r, 0, sizeof r);
            MPI_Recv(r, sizeof r, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st3);
            P2P_CHECK_STATUS(st3, 0, tag, sizeof msg);
            MT_CHECK(memcmp(r, msg, sizeof msg) == 0, "payload differs");
        }
    }

    MT_CASE("probe_reports_real_size_of_200_byte_message") {
        probe_then_receive_exact(P2P_ENVELOPE_BYTES, 401, 0);
    }

    MT_CASE("probe_reports_real_size_of_9MiB_message") {
        const int tag = 402;
        const size_t n = P2P_RNDV_BYTES;
        if (mt_rank == 0) {
            unsigned char *buf = p2p_alloc(n);
            mt_fill(buf, n, tag);
            MPI_Send(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
            free(buf);
        } else if (mt_rank == 1) {
            MPI_Status st;
            int elems = -1;
            MPI_Probe(0, tag, MPI_COMM_WORLD, &st);
            P2P_CHECK_STATUS(st, 0, tag, n);
            MT_CHECK(p2p_count(&st, MPI_INT) == (int)(n / sizeof(int)), "MPI_Get_count(MPI_INT) %d",
                     p2p_count(&st, MPI_INT));
            MPI_Get_elements(&st, MPI_BYTE, &elems);
            MT_CHECK(elems == (int)n, "MPI_Get_elements %d", elems);
            unsigned char *buf = p2p_alloc(n);
            MPI_Recv(buf, (int)(n / sizeof(int)), MPI_INT, 0, tag, MPI_COMM_WORLD, &st);
            MT_CHECK(p2p_count(&st, MPI_INT) == (int)(n / sizeof(int)), "received count %d",
                     p2p_count(&st, MPI_INT));
            P2P_CHECK_BYTES(buf, n, tag, "payload");
            free(buf);
        }
    }

    MT_CASE("probe_then_allocate_exact_size_receives_each_size") {
        const size_t sizes[] = {0, 1, 199, 200, 201, thr - 1, thr, thr + 1};
        for (int i = 0; i < 8; ++i) probe_then_receive_exact(sizes[i], 403 + i, 0);
    }

    MT_CASE("iprobe_finds_200_byte_and_9MiB_messages_with_real_size") {
        probe_then_receive_exact(P2P_ENVELOPE_BYTES, 411, 1);
        probe_then_receive_exact(P2P_RNDV_BYTES, 412, 1);
        probe_then_receive_exact(0, 413, 1);
    }

    MT_CASE("iprobe_false_for_unsent_tag_while_other_tag_waits") {
        const int tag_sent = 414, tag_unsent = 415;
        int v = 7;
        if (mt_rank == 0) MPI_Send(&v, 1, MPI_INT, 1, tag_sent, MPI_COMM_WORLD);
        if (mt_rank == 1) {
            /* wait until the sent message is visible, then ask for the other tag */
            MPI_Status st;
            MPI_Probe(0, tag_sent, MPI_COMM_WORLD, &st);
            int flag = 0;
            for (int i = 0; i < 100 && !flag; ++i) MPI_Iprobe(0, tag_unsent, MPI_COMM_WORLD, &flag, &st);
            MT_CHECK(flag == 0, "Iprobe found a message with a tag nobody sent");
            MPI_Iprobe(MPI_ANY_SOURCE, tag_unsent, MPI_COMM_WORLD, &flag, &st);
            MT_CHECK(flag == 0, "Iprobe(MPI_ANY_SOURCE) found a message with a tag nobody sent");
            MPI_Recv(&v, 1, MPI_INT, 0, tag_sent, MPI_COMM_WORLD, &st);
        }
    }

    MT_CASE("mprobe_removes_message_so_later_recv_gets_the_next_one") {
        /* A (9 MiB) then B (200 B), same tag. Mprobe takes A out of matching, so a plain
         * receive then gets B; Mrecv gets A. */
        const int tag = 416;
        const size_t na = P2P_RNDV_BYTES, nb = P2P_ENVELOPE_BYTES;
        if (mt_rank == 0) {
            unsigned char *a = p2p_alloc(na), *b = p2p_alloc(nb);
            MPI_Request req[2];
            mt_fill(a, na, p2p_seed(tag, 0, 0));
            mt_fill(b, nb, p2p_seed(tag, 0, 1));
            MPI_Isend(a, (int)na, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req[0]);
            MPI_Isend(b, (int)nb, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req[1]);
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
            free(a);
            free(b);
        } else if (mt_rank == 1) {
            MPI_Message msg = MPI_MESSAGE_NULL;
            MPI_Status st;
            MPI_Mprobe(0, tag, MPI_COMM_WORLD, &msg, &st);
            P2P_CHECK_STATUS(st, 0, tag, na);
            unsigned char *buf = p2p_alloc(na);
            MPI_Recv(buf, (int)na, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
            P2P_CHECK_STATUS(st, 0, tag, nb);
            P2P_CHECK_BYTES(buf, nb, p2p_seed(tag, 0, 1), "second message by MPI_Recv");
            MPI_Mrecv(buf, (int)na, MPI_BYTE, &msg, &st);
            MT_CHECK(msg == MPI_MESSAGE_NULL, "MPI_Mrecv did not reset the message handle");
            P2P_CHECK_STATUS(st, 0, tag, na);
            P2P_CHECK_BYTES(buf, na, p2p_seed(tag, 0, 0), "first message by MPI_Mrecv");
            free(buf);
        }
    }

    MT_CASE("mprobe_mrecv_200_byte_message") {
        const int tag = 417;
        unsigned char buf[P2P_ENVELOPE_BYTES];
        if (mt_rank == 0) {
            mt_fill(buf, sizeof buf, tag);
            MPI_Send(buf, sizeof buf, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Message msg;
            MPI_Status st;
            MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
            P2P_CHECK_STATUS(st, 0, tag, sizeof buf);
            memset(buf, 0, sizeof buf);
            MPI_Mrecv(buf, sizeof buf, MPI_BYTE, &msg, &st);
            P2P_CHECK_STATUS(st, 0, tag, sizeof buf);
            P2P_CHECK_BYTES(buf, sizeof buf, tag, "payload");
        }
    }

    MT_CASE("improbe_then_imrecv_receives_9MiB_message") {
        const int tag = 418;
        const size_t n = P2P_RNDV_BYTES;
        unsigned char *buf = p2p_alloc(n);
        if (mt_rank == 0) {
            mt_fill(buf, n, tag);
            MPI_Send(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Message msg = MPI_MESSAGE_NULL;
            MPI_Status st;
            int flag = 0;
            double end = MPI_Wtime() + P2P_TIMEOUT_S;
            while (!flag && MPI_Wtime() < end) MPI_Improbe(0, tag, MPI_COMM_WORLD, &flag, &msg, &st);
            MT_CHECK(flag, "Improbe never found the message");
            if (flag) {
                P2P_CHECK_STATUS(st, 0, tag, n);
                MPI_Request q;
                memset(buf, 0, n);
                MPI_Imrecv(buf, (int)n, MPI_BYTE, &msg, &q);
                MPI_Wait(&q, &st);
                P2P_CHECK_STATUS(st, 0, tag, n);
                P2P_CHECK_BYTES(buf, n, tag, "payload");
            }
        }
        free(buf);
    }

    MT_CASE("improbe_false_then_true_after_sender_sends") {
        const int tag = 419;
        unsigned char buf[P2P_ENVELOPE_BYTES];
        int flag = 1;
        MPI_Message msg;
        MPI_Status st;
        if (mt_rank == 1) {
            MPI_Improbe(0, tag, MPI_COMM_WORLD, &flag, &msg, &st);
            MT_CHECK(flag == 0, "Improbe found a message before it was sent");
        }
        MPI_Barrier(MPI_COMM_WORLD); /* rank 0 sends only after rank 1's first Improbe */
        if (mt_rank == 0) {
            mt_fill(buf, sizeof buf, tag);
            MPI_Send(buf, sizeof buf, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            flag = 0;
            double end = MPI_Wtime() + P2P_TIMEOUT_S;
            while (!flag && MPI_Wtime() < end) MPI_Improbe(0, tag, MPI_COMM_WORLD, &flag, &msg, &st);
            MT_CHECK(flag, "Improbe never found the message");
            if (flag) {
                P2P_CHECK_STATUS(st, 0, tag, sizeof buf);
                memset(buf, 0, sizeof buf);
                MPI_Mrecv(buf, sizeof buf, MPI_BYTE, &msg, &st);
                P2P_CHECK_BYTES(buf, sizeof buf, tag, "payload");
            }
        }
    }

    MT_CASE("probe_any_source_any_tag_reports_actual_source_and_tag") {
        const int tag = 420;
        double d[3] = {1.5, -2.25, 3.0};
        if (mt_rank == 0) {
            MPI_Send(d, 3, MPI_DOUBLE, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Status st;
            double r[3] = {0, 0, 0};
            MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            MT_CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == tag, "source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
            MT_CHECK(p2p_count(&st, MPI_DOUBLE) == 3, "MPI_Get_count(MPI_DOUBLE) %d", p2p_count(&st, MPI_DOUBLE));
            MPI_Recv(r, 3, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MT_CHECK(memcmp(r, d, sizeof d) == 0, "payload differs");
        }
    }

    MT_CASE("probe_proc_null_returns_empty_status_at_once") {
        MPI_Status st;
        int flag = 0;
        MPI_Iprobe(MPI_PROC_NULL, 421, MPI_COMM_WORLD, &flag, &st);
        MT_CHECK(flag == 1, "Iprobe(MPI_PROC_NULL) flag %d", flag);
        P2P_CHECK_PROC_NULL_STATUS(st);
        MPI_Probe(MPI_PROC_NULL, 421, MPI_COMM_WORLD, &st);
        P2P_CHECK_PROC_NULL_STATUS(st);
    }

    MT_CASE("mprobe_proc_null_gives_no_proc_message_and_mrecv_empty_status") {
        MPI_Message msg = MPI_MESSAGE_NULL;
        MPI_Status st;
        unsigned char buf[8];
        memset(buf, 0x5a, sizeof buf);
        MPI_Mprobe(MPI_PROC_NULL, 422, MPI_COMM_WORLD, &msg, &st);
        MT_CHECK(msg == MPI_MESSAGE_NO_PROC, "message handle is not MPI_MESSAGE_NO_PROC");
        P2P_CHECK_PROC_NULL_STATUS(st);
        MPI_Mrecv(buf, sizeof buf, MPI_BYTE, &msg, &st);
        P2P_CHECK_PROC_NULL_STATUS(st);
        P2P_CHECK_UNTOUCHED(buf, sizeof buf, 0x5a, "Mrecv buffer");
    }

    return mt_finalize();
}
