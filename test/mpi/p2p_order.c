/* Non-overtaking order: messages from one sender to one receiver with the same
 * communicator and tag are matched in the order they were sent, whatever path each
 * takes (plain payload, a 200-byte payload that goes by rendezvous, a message above
 * the host rendezvous threshold).
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"

/* Rank 0 sends the messages of sizes[] with `tag`, nonblocking, in order; rank 1
 * receives them one by one into a buffer as large as the largest, and checks that the
 * i-th receive got the i-th message (size, status, bytes). */
static void send_sequence_and_check_order(const size_t *sizes, int n, int tag, MPI_Comm comm) {
    size_t max = 1;
    for (int i = 0; i < n; ++i)
        if (sizes[i] > max) max = sizes[i];
    if (mt_rank == 0) {
        MPI_Request *req = p2p_alloc(n * sizeof *req);
        unsigned char **buf = p2p_alloc(n * sizeof *buf);
        for (int i = 0; i < n; ++i) {
            buf[i] = p2p_alloc(sizes[i]);
            mt_fill(buf[i], sizes[i], p2p_seed(tag, 0, i));
            MPI_Isend(buf[i], (int)sizes[i], MPI_BYTE, 1, tag, comm, &req[i]);
        }
        MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
        for (int i = 0; i < n; ++i) free(buf[i]);
        free(buf);
        free(req);
    } else if (mt_rank == 1) {
        unsigned char *buf = p2p_alloc(max);
        for (int i = 0; i < n; ++i) {
            MPI_Status st;
            MPI_Recv(buf, (int)max, MPI_BYTE, 0, tag, comm, &st);
            int got = p2p_count(&st, MPI_BYTE);
            MT_CHECK(got == (int)sizes[i], "receive %d: %d bytes, expected message %d of %zu bytes",
                     i, got, i, sizes[i]);
            MT_CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == tag, "receive %d: source %d tag %d", i,
                     st.MPI_SOURCE, st.MPI_TAG);
            if (got == (int)sizes[i]) {
                char what[64];
                snprintf(what, sizeof what, "receive %d (%zu bytes)", i, sizes[i]);
                P2P_CHECK_BYTES(buf, sizes[i], p2p_seed(tag, 0, i), what);
            }
        }
        free(buf);
    }
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    const size_t thr = p2p_host_threshold();

    MT_CASE("isend_then_send_same_tag_arrive_in_order") {
        const int tag = 100;
        int a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, r[4];
        if (mt_rank == 0) {
            MPI_Request q;
            MPI_Isend(a, 4, MPI_INT, 1, tag, MPI_COMM_WORLD, &q);
            MPI_Send(b, 4, MPI_INT, 1, tag, MPI_COMM_WORLD);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
        } else if (mt_rank == 1) {
            MPI_Recv(r, 4, MPI_INT, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MT_CHECK(memcmp(r, a, sizeof a) == 0, "first receive got {%d,%d,%d,%d}, not the Isend",
                     r[0], r[1], r[2], r[3]);
            MPI_Recv(r, 4, MPI_INT, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MT_CHECK(memcmp(r, b, sizeof b) == 0, "second receive got {%d,%d,%d,%d}, not the Send",
                     r[0], r[1], r[2], r[3]);
        }
    }

    MT_CASE("hundred_small_sends_same_tag_arrive_in_order") {
        const int tag = 101;
        if (mt_rank == 0) {
            for (int i = 0; i < 100; ++i) MPI_Send(&i, 1, MPI_INT, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            int bad = -1;
            for (int i = 0; i < 100; ++i) {
                int v = -1;
                MPI_Recv(&v, 1, MPI_INT, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (v != i && bad < 0) bad = i;
            }
            MT_CHECK(bad < 0, "receive %d got another message", bad);
        }
    }

    MT_CASE("envelope_sized_send_then_small_sends_same_tag_arrive_in_order") {
        const size_t sizes[] = {P2P_ENVELOPE_BYTES, 1, 199, 201, 0, 8};
        send_sequence_and_check_order(sizes, 6, 102, MPI_COMM_WORLD);
    }

    MT_CASE("rndv_sized_send_then_small_sends_same_tag_arrive_in_order") {
        const size_t sizes[] = {P2P_ENVELOPE_BYTES, P2P_RNDV_BYTES, 1, 17, 0, 64};
        send_sequence_and_check_order(sizes, 6, 103, MPI_COMM_WORLD);
    }

    MT_CASE("sizes_straddling_200B_and_threshold_same_tag_arrive_in_order") {
        const size_t sizes[] = {10,      P2P_ENVELOPE_BYTES, P2P_RNDV_BYTES, 199, 201,
                                thr - 1, thr,                thr + 1,        0,   1};
        send_sequence_and_check_order(sizes, 10, 104, MPI_COMM_WORLD);
    }

    MT_CASE("preposted_irecvs_match_same_tag_sends_in_order") {
        const int tag = 105;
        enum { N = 7 };
        const size_t sizes[N] = {P2P_RNDV_BYTES, 3, P2P_ENVELOPE_BYTES, 0, thr, 199, 5};
        const size_t max = P2P_RNDV_BYTES > thr ? P2P_RNDV_BYTES : thr;
        unsigned char *buf[N];
        MPI_Request req[N];
        MPI_Status st[N];
        if (mt_rank == 1) {
            for (int i = 0; i < N; ++i) {
                buf[i] = p2p_alloc(max);
                MPI_Irecv(buf[i], (int)max, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &req[i]);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD); /* every receive is posted before the first send */
        if (mt_rank == 0) {
            for (int i = 0; i < N; ++i) {
                buf[i] = p2p_alloc(sizes[i]);
                mt_fill(buf[i], sizes[i], p2p_seed(tag, 0, i));
                MPI_Isend(buf[i], (int)sizes[i], MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req[i]);
            }
            MPI_Waitall(N, req, MPI_STATUSES_IGNORE);
        } else if (mt_rank == 1) {
            MPI_Waitall(N, req, st);
            for (int i = 0; i < N; ++i) {
                int got = p2p_count(&st[i], MPI_BYTE);
                MT_CHECK(got == (int)sizes[i], "receive %d: %d bytes, expected %zu", i, got, sizes[i]);
                if (got == (int)sizes[i]) P2P_CHECK_BYTES(buf[i], sizes[i], p2p_seed(tag, 0, i), "payload");
            }
        }
        if (mt_rank <= 1)
            for (int i = 0; i < N; ++i) free(buf[i]);
    }

    MT_CASE("different_tags_can_be_received_in_reverse_send_order") {
        /* A large message that has not been matched yet must not block a later
         * receive for another tag. */
        const int tags[3] = {106, 107, 108};
        const size_t sizes[3] = {P2P_RNDV_BYTES, P2P_ENVELOPE_BYTES, 40};
        unsigned char *buf[3];
        for (int i = 0; i < 3; ++i) buf[i] = p2p_alloc(sizes[i]);
        if (mt_rank == 0) {
            MPI_Request req[3];
            for (int i = 0; i < 3; ++i) {
                mt_fill(buf[i], sizes[i], p2p_seed(tags[i], 0, i));
                MPI_Isend(buf[i], (int)sizes[i], MPI_BYTE, 1, tags[i], MPI_COMM_WORLD, &req[i]);
            }
            MPI_Waitall(3, req, MPI_STATUSES_IGNORE);
        } else if (mt_rank == 1) {
            for (int i = 2; i >= 0; --i) {
                MPI_Status st;
                MPI_Recv(buf[i], (int)sizes[i], MPI_BYTE, 0, tags[i], MPI_COMM_WORLD, &st);
                P2P_CHECK_STATUS(st, 0, tags[i], sizes[i]);
                P2P_CHECK_BYTES(buf[i], sizes[i], p2p_seed(tags[i], 0, i), "payload");
            }
        }
        for (int i = 0; i < 3; ++i) free(buf[i]);
    }

    MT_CASE("issend_then_isend_same_tag_arrive_in_order") {
        const size_t sizes[] = {P2P_RNDV_BYTES, 12, P2P_ENVELOPE_BYTES, 7};
        const int tag = 109;
        if (mt_rank == 0) {
            MPI_Request req[4];
            unsigned char *buf[4];
            for (int i = 0; i < 4; ++i) {
                buf[i] = p2p_alloc(sizes[i]);
                mt_fill(buf[i], sizes[i], p2p_seed(tag, 0, i));
                if (i % 2 == 0)
                    MPI_Issend(buf[i], (int)sizes[i], MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req[i]);
                else
                    MPI_Isend(buf[i], (int)sizes[i], MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req[i]);
            }
            MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
            for (int i = 0; i < 4; ++i) free(buf[i]);
        } else if (mt_rank == 1) {
            unsigned char *buf = p2p_alloc(P2P_RNDV_BYTES);
            for (int i = 0; i < 4; ++i) {
                MPI_Status st;
                MPI_Recv(buf, (int)P2P_RNDV_BYTES, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
                P2P_CHECK_STATUS(st, 0, tag, sizes[i]);
                if (p2p_count(&st, MPI_BYTE) == (int)sizes[i])
                    P2P_CHECK_BYTES(buf, sizes[i], p2p_seed(tag, 0, i), "payload");
            }
            free(buf);
        }
    }

    MT_CASE("same_tag_on_dup_comm_does_not_match_world_receive") {
        const int tag = 110;
        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        const size_t n = P2P_RNDV_BYTES;
        unsigned char *a = p2p_alloc(n), *b = p2p_alloc(P2P_ENVELOPE_BYTES);
        if (mt_rank == 0) {
            /* dup first, then world: a world receive must skip the dup message */
            MPI_Request req[2];
            mt_fill(a, n, p2p_seed(tag, 0, 1));
            mt_fill(b, P2P_ENVELOPE_BYTES, p2p_seed(tag, 0, 2));
            MPI_Isend(a, (int)n, MPI_BYTE, 1, tag, dup, &req[0]);
            MPI_Isend(b, P2P_ENVELOPE_BYTES, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req[1]);
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        } else if (mt_rank == 1) {
            MPI_Status st;
            unsigned char *r = p2p_alloc(n);
            MPI_Recv(r, (int)n, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            P2P_CHECK_STATUS(st, 0, tag, P2P_ENVELOPE_BYTES);
            P2P_CHECK_BYTES(r, P2P_ENVELOPE_BYTES, p2p_seed(tag, 0, 2), "world message");
            MPI_Recv(r, (int)n, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &st);
            P2P_CHECK_STATUS(st, 0, tag, n);
            P2P_CHECK_BYTES(r, n, p2p_seed(tag, 0, 1), "dup message");
            free(r);
        }
        free(a);
        free(b);
        MPI_Comm_free(&dup);
    }

    MT_CASE("both_directions_same_tag_arrive_in_order") {
        /* Both ranks send the same mixed sequence to each other at once. */
        const int tag = 111;
        enum { N = 5 };
        const size_t sizes[N] = {P2P_ENVELOPE_BYTES, P2P_RNDV_BYTES, 0, 201, 3};
        if (mt_rank <= 1) {
            const int peer = 1 - mt_rank;
            unsigned char *out[N], *in = p2p_alloc(P2P_RNDV_BYTES);
            MPI_Request req[N];
            for (int i = 0; i < N; ++i) {
                out[i] = p2p_alloc(sizes[i]);
                mt_fill(out[i], sizes[i], p2p_seed(tag, mt_rank, i));
                MPI_Isend(out[i], (int)sizes[i], MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[i]);
            }
            for (int i = 0; i < N; ++i) {
                MPI_Status st;
                MPI_Recv(in, (int)P2P_RNDV_BYTES, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
                P2P_CHECK_STATUS(st, peer, tag, sizes[i]);
                if (p2p_count(&st, MPI_BYTE) == (int)sizes[i])
                    P2P_CHECK_BYTES(in, sizes[i], p2p_seed(tag, peer, i), "payload");
            }
            MPI_Waitall(N, req, MPI_STATUSES_IGNORE);
            for (int i = 0; i < N; ++i) free(out[i]);
            free(in);
        }
    }

    return mt_finalize();
}
