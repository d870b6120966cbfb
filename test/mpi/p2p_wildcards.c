/* MPI_ANY_SOURCE and MPI_ANY_TAG with several senders: the status names the message
 * that arrived (source, tag, size), per-sender order holds, and specific receives are
 * not confused by messages from other ranks or tags. Sizes include a 200-byte payload
 * and a message above the host rendezvous threshold, which travel as envelopes under
 * MPI-ACC and must match wildcards exactly like plain payloads.
 * MPIACC-TEST-RANKS: 4 */
#include "p2p_util.h"

/* The size rank `src` uses for its idx-th message in the mixed-size cases. */
static size_t mixed_size(int src, int idx) {
    static const size_t sizes[] = {P2P_ENVELOPE_BYTES, 0, P2P_RNDV_BYTES, 1, 201, 199};
    return sizes[((src - 1) * 2 + idx) % 6];
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    if (mt_size < 3) {
        if (mt_rank == 0) fprintf(stderr, "# p2p_wildcards needs at least 3 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const int nsend = mt_size - 1;

    MT_CASE("any_source_receives_one_message_from_each_sender") {
        const int tag = 200;
        if (mt_rank == 0) {
            int seen[64] = {0};
            for (int i = 0; i < nsend; ++i) {
                int v = -1;
                MPI_Status st;
                MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st);
                MT_CHECK(st.MPI_SOURCE >= 1 && st.MPI_SOURCE < mt_size, "source %d", st.MPI_SOURCE);
                MT_CHECK(v == 1000 + st.MPI_SOURCE, "payload %d from source %d", v, st.MPI_SOURCE);
                MT_CHECK(st.MPI_TAG == tag, "tag %d", st.MPI_TAG);
                if (st.MPI_SOURCE >= 1 && st.MPI_SOURCE < 64) ++seen[st.MPI_SOURCE];
            }
            for (int s = 1; s < mt_size && s < 64; ++s)
                MT_CHECK(seen[s] == 1, "%d messages from rank %d", seen[s], s);
        } else {
            int v = 1000 + mt_rank;
            MPI_Send(&v, 1, MPI_INT, 0, tag, MPI_COMM_WORLD);
        }
    }

    MT_CASE("any_tag_receives_one_senders_tags_in_send_order") {
        const int tags[4] = {213, 207, 219, 201};
        if (mt_rank == 0) {
            for (int i = 0; i < 4; ++i) {
                int v = -1;
                MPI_Status st;
                MPI_Recv(&v, 1, MPI_INT, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                MT_CHECK(st.MPI_TAG == tags[i], "receive %d: tag %d, expected %d", i, st.MPI_TAG, tags[i]);
                MT_CHECK(v == i, "receive %d: payload %d", i, v);
                MT_CHECK(st.MPI_SOURCE == 1, "source %d", st.MPI_SOURCE);
            }
        } else if (mt_rank == 1) {
            for (int i = 0; i < 4; ++i) MPI_Send(&i, 1, MPI_INT, 0, tags[i], MPI_COMM_WORLD);
        }
    }

    MT_CASE("any_source_any_tag_status_reports_source_tag_and_size_of_each_message") {
        const int base = 220; /* rank s sends with tag base + s */
        if (mt_rank == 0) {
            unsigned char *buf = p2p_alloc(P2P_RNDV_BYTES);
            int seen[64] = {0};
            for (int i = 0; i < nsend; ++i) {
                MPI_Status st;
                MPI_Recv(buf, (int)P2P_RNDV_BYTES, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                int s = st.MPI_SOURCE;
                MT_CHECK(s >= 1 && s < mt_size && s < 64, "source %d", s);
                if (!(s >= 1 && s < mt_size && s < 64)) continue;
                ++seen[s];
                P2P_CHECK_STATUS(st, s, base + s, mixed_size(s, 0));
                if (p2p_count(&st, MPI_BYTE) == (int)mixed_size(s, 0))
                    P2P_CHECK_BYTES(buf, mixed_size(s, 0), p2p_seed(base + s, s, 0), "payload");
            }
            for (int s = 1; s < mt_size && s < 64; ++s)
                MT_CHECK(seen[s] == 1, "%d messages from rank %d", seen[s], s);
            free(buf);
        } else {
            size_t n = mixed_size(mt_rank, 0);
            unsigned char *buf = p2p_alloc(n);
            mt_fill(buf, n, p2p_seed(base + mt_rank, mt_rank, 0));
            MPI_Send(buf, (int)n, MPI_BYTE, 0, base + mt_rank, MPI_COMM_WORLD);
            free(buf);
        }
    }

    MT_CASE("any_source_keeps_each_senders_order") {
        const int tag = 230;
        enum { M = 20 };
        if (mt_rank == 0) {
            int next[64] = {0};
            unsigned char buf[P2P_ENVELOPE_BYTES];
            for (int i = 0; i < M * nsend; ++i) {
                MPI_Status st;
                MPI_Recv(buf, sizeof buf, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st);
                int s = st.MPI_SOURCE, seq;
                memcpy(&seq, buf, sizeof seq);
                MT_CHECK(s >= 1 && s < mt_size && s < 64, "source %d", s);
                if (!(s >= 1 && s < mt_size && s < 64)) continue;
                MT_CHECK(seq == next[s], "from rank %d: message %d, expected %d", s, seq, next[s]);
                int n = p2p_count(&st, MPI_BYTE);
                /* even messages are 200 bytes (an envelope's length), odd ones 8 */
                MT_CHECK(n == (seq % 2 ? 8 : P2P_ENVELOPE_BYTES), "from rank %d message %d: %d bytes", s, seq, n);
                next[s] = seq + 1;
            }
            for (int s = 1; s < mt_size && s < 64; ++s)
                MT_CHECK(next[s] == M, "rank %d: %d messages in order", s, next[s]);
        } else {
            unsigned char buf[P2P_ENVELOPE_BYTES];
            memset(buf, mt_rank, sizeof buf);
            for (int i = 0; i < M; ++i) {
                memcpy(buf, &i, sizeof i);
                MPI_Send(buf, i % 2 ? 8 : P2P_ENVELOPE_BYTES, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
            }
        }
    }

    MT_CASE("specific_source_receive_skips_earlier_message_from_other_sender") {
        /* Rank 1's large message reaches rank 0 first and stays unmatched while rank 0
         * receives from rank 2. */
        const int tag = 240;
        unsigned char *big = p2p_alloc(P2P_RNDV_BYTES);
        MPI_Request q = MPI_REQUEST_NULL;
        if (mt_rank == 1) {
            mt_fill(big, P2P_RNDV_BYTES, p2p_seed(tag, 1, 0));
            MPI_Isend(big, (int)P2P_RNDV_BYTES, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &q);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (mt_rank == 2) {
            unsigned char small[P2P_ENVELOPE_BYTES];
            mt_fill(small, sizeof small, p2p_seed(tag, 2, 0));
            MPI_Send(small, sizeof small, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 0) {
            MPI_Status st;
            MPI_Recv(big, (int)P2P_RNDV_BYTES, MPI_BYTE, 2, tag, MPI_COMM_WORLD, &st);
            P2P_CHECK_STATUS(st, 2, tag, P2P_ENVELOPE_BYTES);
            P2P_CHECK_BYTES(big, P2P_ENVELOPE_BYTES, p2p_seed(tag, 2, 0), "rank 2's message");
            MPI_Recv(big, (int)P2P_RNDV_BYTES, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &st);
            P2P_CHECK_STATUS(st, 1, tag, P2P_RNDV_BYTES);
            P2P_CHECK_BYTES(big, P2P_RNDV_BYTES, p2p_seed(tag, 1, 0), "rank 1's message");
        }
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        free(big);
    }

    MT_CASE("specific_then_wildcard_irecvs_match_in_post_order") {
        /* Posted: (source 1, tag) then (any source, tag). Rank 1's message can match
         * both and must take the first; rank 2's can only take the second. */
        const int tag = 250;
        if (mt_rank == 0) {
            unsigned char *b0 = p2p_alloc(P2P_RNDV_BYTES), *b1 = p2p_alloc(P2P_RNDV_BYTES);
            MPI_Request req[2];
            MPI_Status st[2];
            MPI_Irecv(b0, (int)P2P_RNDV_BYTES, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req[0]);
            MPI_Irecv(b1, (int)P2P_RNDV_BYTES, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &req[1]);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Waitall(2, req, st);
            P2P_CHECK_STATUS(st[0], 1, tag, P2P_ENVELOPE_BYTES);
            P2P_CHECK_BYTES(b0, P2P_ENVELOPE_BYTES, p2p_seed(tag, 1, 0), "specific receive");
            P2P_CHECK_STATUS(st[1], 2, tag, P2P_RNDV_BYTES);
            P2P_CHECK_BYTES(b1, P2P_RNDV_BYTES, p2p_seed(tag, 2, 0), "wildcard receive");
            free(b0);
            free(b1);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
            if (mt_rank == 1 || mt_rank == 2) {
                size_t n = mt_rank == 1 ? P2P_ENVELOPE_BYTES : P2P_RNDV_BYTES;
                unsigned char *buf = p2p_alloc(n);
                mt_fill(buf, n, p2p_seed(tag, mt_rank, 0));
                MPI_Send(buf, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
                free(buf);
            }
        }
    }

    MT_CASE("preposted_wildcard_irecvs_get_every_message_in_per_sender_order") {
        const int base = 260; /* message idx of rank s has tag base + 10*s + idx */
        const int nmsg = 2 * nsend;
        if (mt_rank == 0) {
            unsigned char **buf = p2p_alloc(nmsg * sizeof *buf);
            MPI_Request *req = p2p_alloc(nmsg * sizeof *req);
            MPI_Status *st = p2p_alloc(nmsg * sizeof *st);
            for (int i = 0; i < nmsg; ++i) {
                buf[i] = p2p_alloc(P2P_RNDV_BYTES);
                MPI_Irecv(buf[i], (int)P2P_RNDV_BYTES, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                          MPI_COMM_WORLD, &req[i]);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Waitall(nmsg, req, st);
            int where[64][2];
            for (int s = 0; s < 64; ++s) where[s][0] = where[s][1] = -1;
            for (int i = 0; i < nmsg; ++i) {
                int s = st[i].MPI_SOURCE, idx = st[i].MPI_TAG - base - 10 * s;
                MT_CHECK(s >= 1 && s < mt_size && s < 64 && (idx == 0 || idx == 1),
                         "receive %d: source %d tag %d", i, s, st[i].MPI_TAG);
                if (!(s >= 1 && s < mt_size && s < 64 && (idx == 0 || idx == 1))) continue;
                MT_CHECK(where[s][idx] < 0, "message %d of rank %d received twice", idx, s);
                where[s][idx] = i;
                size_t n = mixed_size(s, idx);
                MT_CHECK(p2p_count(&st[i], MPI_BYTE) == (int)n, "rank %d message %d: %d bytes, expected %zu",
                         s, idx, p2p_count(&st[i], MPI_BYTE), n);
                if (p2p_count(&st[i], MPI_BYTE) == (int)n)
                    P2P_CHECK_BYTES(buf[i], n, p2p_seed(base, s, idx), "payload");
            }
            for (int s = 1; s < mt_size && s < 64; ++s) {
                MT_CHECK(where[s][0] >= 0 && where[s][1] >= 0, "rank %d: a message is missing", s);
                MT_CHECK(where[s][0] < where[s][1], "rank %d: second message matched receive %d, first %d",
                         s, where[s][1], where[s][0]);
            }
            for (int i = 0; i < nmsg; ++i) free(buf[i]);
            free(buf);
            free(req);
            free(st);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Request req[2];
            unsigned char *buf[2];
            for (int idx = 0; idx < 2; ++idx) {
                size_t n = mixed_size(mt_rank, idx);
                buf[idx] = p2p_alloc(n);
                mt_fill(buf[idx], n, p2p_seed(base, mt_rank, idx));
                MPI_Isend(buf[idx], (int)n, MPI_BYTE, 0, base + 10 * mt_rank + idx, MPI_COMM_WORLD, &req[idx]);
            }
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
            free(buf[0]);
            free(buf[1]);
        }
    }

    MT_CASE("any_source_with_specific_tag_skips_other_tags") {
        const int ta = 300, tb = 301;
        if (mt_rank == 0) {
            int v = -1;
            MPI_Status st;
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, tb, MPI_COMM_WORLD, &st);
            MT_CHECK(v == 2 && st.MPI_SOURCE == 1 && st.MPI_TAG == tb, "got %d from %d tag %d", v,
                     st.MPI_SOURCE, st.MPI_TAG);
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            MT_CHECK(v == 1 && st.MPI_SOURCE == 1 && st.MPI_TAG == ta, "got %d from %d tag %d", v,
                     st.MPI_SOURCE, st.MPI_TAG);
        } else if (mt_rank == 1) {
            int a = 1, b = 2;
            MPI_Send(&a, 1, MPI_INT, 0, ta, MPI_COMM_WORLD);
            MPI_Send(&b, 1, MPI_INT, 0, tb, MPI_COMM_WORLD);
        }
    }

    return mt_finalize();
}
