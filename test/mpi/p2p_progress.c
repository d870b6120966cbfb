/* Progress (DESIGN section 2, invariant 6): a rank blocked in any MPI call keeps
 * driving its own pending transfers. Host messages above the rendezvous threshold need
 * both sides to act after the send is posted, so every case here hangs if a blocking
 * call (Barrier, Allreduce, Recv, Send, Ssend) or a Test/Iprobe loop stops driving
 * them. run-test's time limit turns a hang into a failure.
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"

#define N P2P_RNDV_BYTES

static unsigned char *a, *b, *c;

/* Rank 1 checks a received 9 MiB buffer. */
static void check_big(const unsigned char *buf, const MPI_Status *st, int src, int tag, uint64_t seed) {
    P2P_CHECK_STATUS(*st, src, tag, N);
    P2P_CHECK_BYTES(buf, N, seed, "payload");
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    a = p2p_alloc(N);
    b = p2p_alloc(N);
    c = p2p_alloc(N);

    MT_CASE("isend_9MiB_then_barrier_while_peer_recvs_does_not_hang") {
        const int tag = 1400;
        if (mt_rank == 0) {
            MPI_Request q;
            mt_fill(a, N, tag);
            MPI_Isend(a, (int)N, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &q);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
        } else {
            if (mt_rank == 1) {
                MPI_Status st;
                memset(b, 0, N);
                MPI_Recv(b, (int)N, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
                check_big(b, &st, 0, tag, tag);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }

    MT_CASE("irecv_then_barrier_while_peer_sends_and_ssends_9MiB_does_not_hang") {
        const int tag = 1401;
        MPI_Request req[2];
        if (mt_rank == 1) {
            memset(b, 0, N);
            memset(c, 0, N);
            MPI_Irecv(b, (int)N, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &req[0]);
            MPI_Irecv(c, (int)N, MPI_BYTE, 0, tag + 1, MPI_COMM_WORLD, &req[1]);
        }
        if (mt_rank == 0) {
            mt_fill(a, N, tag);
            MPI_Send(a, (int)N, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
            mt_fill(a, N, tag + 1);
            MPI_Ssend(a, (int)N, MPI_BYTE, 1, tag + 1, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (mt_rank == 1) {
            MPI_Status st[2];
            MPI_Waitall(2, req, st);
            check_big(b, &st[0], 0, tag, tag);
            check_big(c, &st[1], 0, tag + 1, tag + 1);
        }
    }

    MT_CASE("isend_9MiB_then_allreduce_while_peer_recvs_does_not_hang") {
        const int tag = 1403;
        int one = 1, sum = 0;
        if (mt_rank == 0) {
            MPI_Request q;
            mt_fill(a, N, tag);
            MPI_Isend(a, (int)N, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &q);
            MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
        } else {
            if (mt_rank == 1) {
                MPI_Status st;
                MPI_Recv(b, (int)N, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
                check_big(b, &st, 0, tag, tag);
            }
            MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
        MT_CHECK(sum == mt_size, "allreduce gave %d", sum);
    }

    MT_CASE("head_to_head_isend_9MiB_then_blocking_recv_does_not_hang") {
        const int tag = 1404;
        if (mt_rank <= 1) {
            const int peer = 1 - mt_rank;
            MPI_Request q;
            MPI_Status st;
            mt_fill(a, N, p2p_seed(tag, mt_rank, 0));
            MPI_Isend(a, (int)N, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &q);
            MPI_Recv(b, (int)N, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
            check_big(b, &st, peer, tag, p2p_seed(tag, peer, 0));
        }
    }

    MT_CASE("test_loops_alone_complete_a_9MiB_transfer") {
        const int tag = 1405;
        MPI_Request q = MPI_REQUEST_NULL;
        MPI_Status st;
        if (mt_rank == 0) {
            mt_fill(a, N, tag);
            MPI_Isend(a, (int)N, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &q);
            MT_CHECK(p2p_test_until(&q, &st), "the Isend never completed under MPI_Test");
        } else if (mt_rank == 1) {
            MPI_Irecv(b, (int)N, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &q);
            int done = p2p_test_until(&q, &st);
            MT_CHECK(done, "the Irecv never completed under MPI_Test");
            if (done) check_big(b, &st, 0, tag, tag);
        }
        if (q != MPI_REQUEST_NULL) MPI_Wait(&q, MPI_STATUS_IGNORE);
    }

    MT_CASE("iprobe_loop_finds_9MiB_message_while_sender_waits_in_barrier") {
        const int tag = 1406;
        if (mt_rank == 0) {
            MPI_Request q;
            mt_fill(a, N, tag);
            MPI_Isend(a, (int)N, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &q);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
        } else {
            if (mt_rank == 1) {
                MPI_Status st;
                int flag = 0;
                double end = MPI_Wtime() + P2P_TIMEOUT_S;
                while (!flag && MPI_Wtime() < end) MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &st);
                MT_CHECK(flag, "Iprobe never saw the message");
                if (flag) {
                    P2P_CHECK_STATUS(st, 0, tag, N);
                    MPI_Recv(b, (int)N, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD, &st);
                    check_big(b, &st, 0, tag, tag);
                }
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }

    MT_CASE("four_outstanding_9MiB_isends_received_in_reverse_tag_order") {
        enum { K = 4 };
        const int tag = 1410;
        if (mt_rank == 0) {
            unsigned char *buf[K];
            MPI_Request req[K];
            for (int k = 0; k < K; ++k) {
                buf[k] = p2p_alloc(N);
                mt_fill(buf[k], N, p2p_seed(tag, 0, k));
                MPI_Isend(buf[k], (int)N, MPI_BYTE, 1, tag + k, MPI_COMM_WORLD, &req[k]);
            }
            MPI_Waitall(K, req, MPI_STATUSES_IGNORE);
            for (int k = 0; k < K; ++k) free(buf[k]);
        } else if (mt_rank == 1) {
            for (int k = K - 1; k >= 0; --k) {
                MPI_Status st;
                MPI_Recv(b, (int)N, MPI_BYTE, 0, tag + k, MPI_COMM_WORLD, &st);
                check_big(b, &st, 0, tag + k, p2p_seed(tag, 0, k));
            }
        }
    }

    MT_CASE("isend_9MiB_to_self_then_recv_completes") {
        const int tag = 1420;
        MPI_Request q;
        MPI_Status st;
        mt_fill(a, N, p2p_seed(tag, mt_rank, 0));
        MPI_Isend(a, (int)N, MPI_BYTE, mt_rank, tag, MPI_COMM_WORLD, &q);
        MPI_Recv(b, (int)N, MPI_BYTE, mt_rank, tag, MPI_COMM_WORLD, &st);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        check_big(b, &st, mt_rank, tag, p2p_seed(tag, mt_rank, 0));
        /* and the 200-byte payload to self */
        MPI_Sendrecv(a, P2P_ENVELOPE_BYTES, MPI_BYTE, mt_rank, tag + 1, b, (int)N, MPI_BYTE, mt_rank, tag + 1,
                     MPI_COMM_WORLD, &st);
        P2P_CHECK_STATUS(st, mt_rank, tag + 1, P2P_ENVELOPE_BYTES);
        P2P_CHECK_BYTES(b, P2P_ENVELOPE_BYTES, p2p_seed(tag, mt_rank, 0), "200-byte self message");
    }

    MT_CASE("thousand_small_isends_before_receiver_posts_all_arrive") {
        enum { M = 1000, SZ = 64 };
        const int tag = 1430;
        if (mt_rank == 0) {
            unsigned char *buf = p2p_alloc((size_t)M * SZ);
            MPI_Request *req = p2p_alloc(M * sizeof *req);
            for (int i = 0; i < M; ++i) {
                mt_fill(buf + (size_t)i * SZ, SZ, p2p_seed(tag, 0, i));
                MPI_Isend(buf + (size_t)i * SZ, SZ, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req[i]);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Waitall(M, req, MPI_STATUSES_IGNORE);
            free(req);
            free(buf);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
            if (mt_rank == 1) {
                unsigned char r[SZ];
                int bad = -1;
                for (int i = 0; i < M; ++i) {
                    MPI_Recv(r, SZ, MPI_BYTE, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    if (bad < 0 && mt_verify(r, SZ, p2p_seed(tag, 0, i)) != (size_t)-1) bad = i;
                }
                MT_CHECK(bad < 0, "message %d arrived wrong or out of order", bad);
            }
        }
    }

    free(a);
    free(b);
    free(c);
    return mt_finalize();
}
