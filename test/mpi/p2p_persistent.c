/* Persistent requests (MPI_Send_init, MPI_Bsend_init, MPI_Ssend_init, MPI_Rsend_init,
 * MPI_Recv_init with MPI_Start and MPI_Startall) reused 100 times: every round delivers
 * that round's bytes (never a stale round's), the request stays allocated between
 * rounds, and MPI_Request_free releases it. EpiSimdemics (BRIEF E1, A7) receives all its
 * messages through MPI_Recv_init + MPI_Startall.
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"

enum { ROUNDS = 100 };
enum mode { STANDARD, BUFFERED, SYNCHRONOUS, READY };
#define SMALL_LIMIT ((size_t)64 << 10) /* below this a round refills the whole buffer */

/* Puts round r's bytes in buf: small buffers get fresh pseudo-random bytes; large ones
 * keep `base` and get the round number stamped at the start, middle and end (the
 * receiver clears its buffer every round, so stale bytes are still caught). */
static void round_bytes(unsigned char *buf, const unsigned char *base, size_t n, int tag, int r) {
    if (n < SMALL_LIMIT) {
        mt_fill(buf, n, p2p_seed(tag, 0, r + 1));
        return;
    }
    uint64_t stamp = 0x5157000000000000ull | (uint64_t)r;
    memcpy(buf, base, n);
    memcpy(buf, &stamp, 8);
    memcpy(buf + n / 2, &stamp, 8);
    memcpy(buf + n - 8, &stamp, 8);
}

static int round_matches(const unsigned char *got, unsigned char *expect, const unsigned char *base,
                         size_t n, int tag, int r) {
    round_bytes(expect, base, n, tag, r);
    return memcmp(got, expect, n) == 0;
}

static int start_send(enum mode m, void *buf, size_t n, int tag, MPI_Request *q) {
    switch (m) {
    case STANDARD: return MPI_Send_init(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD, q);
    case BUFFERED: return MPI_Bsend_init(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD, q);
    case SYNCHRONOUS: return MPI_Ssend_init(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD, q);
    case READY: return MPI_Rsend_init(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD, q);
    }
    return MPI_ERR_OTHER;
}

/* Rank 0 reuses one persistent send of mode m, rank 1 one persistent receive. For
 * ready mode, rank 1 tells rank 0 (zero-byte message on tag+1) after each Start. */
static void persistent_pair(enum mode m, size_t n, int tag) {
    unsigned char *buf = p2p_alloc(n), *base = p2p_alloc(n), *expect = p2p_alloc(n);
    mt_fill(base, n, p2p_seed(tag, 0, 0));
    MPI_Request q = MPI_REQUEST_NULL;
    if (mt_rank == 0) {
        void *bbuf = NULL;
        if (m == BUFFERED) {
            int bsize = (int)(ROUNDS * (n + MPI_BSEND_OVERHEAD));
            bbuf = p2p_alloc((size_t)bsize);
            MPI_Buffer_attach(bbuf, bsize);
        }
        start_send(m, buf, n, tag, &q);
        for (int r = 0; r < ROUNDS; ++r) {
            round_bytes(buf, base, n, tag, r);
            if (m == READY) MPI_Recv(NULL, 0, MPI_BYTE, 1, tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Start(&q);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
            if (q == MPI_REQUEST_NULL) {
                MT_CHECK(0, "round %d: MPI_Wait freed the persistent send request", r);
                break;
            }
        }
        if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
        MT_CHECK(q == MPI_REQUEST_NULL, "MPI_Request_free did not set MPI_REQUEST_NULL");
        if (bbuf) {
            int sz;
            MPI_Buffer_detach(&bbuf, &sz);
            free(bbuf);
        }
    } else if (mt_rank == 1) {
        MPI_Recv_init(buf, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &q);
        int bad = -1;
        for (int r = 0; r < ROUNDS; ++r) {
            MPI_Status st;
            memset(buf, 0, n);
            MPI_Start(&q);
            if (m == READY) MPI_Send(NULL, 0, MPI_BYTE, 0, tag + 1, MPI_COMM_WORLD);
            MPI_Wait(&q, &st);
            if (q == MPI_REQUEST_NULL) {
                MT_CHECK(0, "round %d: MPI_Wait freed the persistent receive request", r);
                break;
            }
            P2P_CHECK_STATUS(st, 0, tag, n);
            if (bad < 0 && !round_matches(buf, expect, base, n, tag, r)) bad = r;
        }
        MT_CHECK(bad < 0, "round %d received other bytes than round %d's", bad, bad);
        if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
        MT_CHECK(q == MPI_REQUEST_NULL, "MPI_Request_free did not set MPI_REQUEST_NULL");
    }
    free(buf);
    free(base);
    free(expect);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);

    MT_CASE("send_init_recv_init_reused_100_times_then_request_free") {
        persistent_pair(STANDARD, 64, 600);
    }

    MT_CASE("send_init_recv_init_200_byte_and_9MiB_reused_100_times") {
        persistent_pair(STANDARD, P2P_ENVELOPE_BYTES, 602);
        persistent_pair(STANDARD, P2P_RNDV_BYTES, 604);
    }

    MT_CASE("startall_mixed_persistent_sends_and_receives_reused_100_times") {
        /* Each of ranks 0 and 1 holds sends to and receives from the other, of three
         * sizes, in one array started with MPI_Startall. */
        enum { K = 3 };
        const size_t sizes[K] = {24, P2P_ENVELOPE_BYTES, (size_t)1 << 20};
        const int tag = 606;
        if (mt_rank <= 1) {
            const int peer = 1 - mt_rank;
            unsigned char *out[K], *in[K], *base[K], *expect[K];
            MPI_Request req[2 * K];
            MPI_Status st[2 * K];
            for (int k = 0; k < K; ++k) {
                out[k] = p2p_alloc(sizes[k]);
                in[k] = p2p_alloc(sizes[k]);
                expect[k] = p2p_alloc(sizes[k]);
                base[k] = p2p_alloc(sizes[k]);
                mt_fill(base[k], sizes[k], p2p_seed(tag + k, 0, 0));
                MPI_Recv_init(in[k], (int)sizes[k], MPI_BYTE, peer, tag + k, MPI_COMM_WORLD, &req[k]);
                MPI_Send_init(out[k], (int)sizes[k], MPI_BYTE, peer, tag + k, MPI_COMM_WORLD, &req[K + k]);
            }
            int bad = -1;
            for (int r = 0; r < ROUNDS; ++r) {
                for (int k = 0; k < K; ++k) {
                    /* the two ranks send different bytes: rank 1's round is r + ROUNDS */
                    round_bytes(out[k], base[k], sizes[k], tag + k, r + mt_rank * ROUNDS);
                    memset(in[k], 0, sizes[k]);
                }
                MPI_Startall(2 * K, req);
                MPI_Waitall(2 * K, req, st);
                for (int k = 0; k < K; ++k) {
                    P2P_CHECK_STATUS(st[k], peer, tag + k, sizes[k]);
                    if (bad < 0 && !round_matches(in[k], expect[k], base[k], sizes[k], tag + k, r + peer * ROUNDS))
                        bad = r;
                }
            }
            MT_CHECK(bad < 0, "round %d received other bytes than its own", bad);
            for (int k = 0; k < 2 * K; ++k) {
                MT_CHECK(req[k] != MPI_REQUEST_NULL, "persistent request %d freed by MPI_Waitall", k);
                if (req[k] != MPI_REQUEST_NULL) MPI_Request_free(&req[k]);
            }
            for (int k = 0; k < K; ++k) {
                free(out[k]);
                free(in[k]);
                free(base[k]);
                free(expect[k]);
            }
        }
    }

    MT_CASE("bsend_init_reused_100_times") {
        persistent_pair(BUFFERED, 40, 610);
        persistent_pair(BUFFERED, P2P_ENVELOPE_BYTES, 612);
    }

    MT_CASE("ssend_init_reused_100_times") {
        persistent_pair(SYNCHRONOUS, 40, 614);
        persistent_pair(SYNCHRONOUS, P2P_ENVELOPE_BYTES, 616);
        persistent_pair(SYNCHRONOUS, P2P_RNDV_BYTES, 618);
    }

    MT_CASE("rsend_init_reused_100_times_after_receiver_starts") {
        persistent_pair(READY, 40, 620);
        persistent_pair(READY, P2P_ENVELOPE_BYTES, 622);
        persistent_pair(READY, P2P_RNDV_BYTES, 624);
    }

    MT_CASE("recv_init_any_source_any_tag_reports_each_rounds_tag_and_size") {
        const int tag = 630; /* round r uses tag 630 + r and r * 3 bytes (0 to 297) */
        unsigned char buf[3 * ROUNDS];
        if (mt_rank == 0) {
            for (int r = 0; r < ROUNDS; ++r) {
                mt_fill(buf, 3 * r, p2p_seed(tag, 0, r));
                MPI_Send(buf, 3 * r, MPI_BYTE, 1, tag + r, MPI_COMM_WORLD);
            }
        } else if (mt_rank == 1) {
            MPI_Request q;
            MPI_Recv_init(buf, sizeof buf, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &q);
            for (int r = 0; r < ROUNDS; ++r) {
                MPI_Status st;
                MPI_Start(&q);
                MPI_Wait(&q, &st);
                P2P_CHECK_STATUS(st, 0, tag + r, 3 * r);
                P2P_CHECK_BYTES(buf, (size_t)(3 * r), p2p_seed(tag, 0, r), "payload");
            }
            MPI_Request_free(&q);
        }
    }

    MT_CASE("wait_on_inactive_persistent_request_returns_empty_status_at_once") {
        unsigned char buf[16];
        MPI_Request q;
        MPI_Status st;
        int flag = 0;
        memset(buf, 0x77, sizeof buf);
        MPI_Recv_init(buf, sizeof buf, MPI_BYTE, mt_rank == 0 ? 1 : 0, 740, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, &st);
        MT_CHECK(q != MPI_REQUEST_NULL, "MPI_Wait freed an inactive persistent request");
        MT_CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG && p2p_count(&st, MPI_BYTE) == 0,
                 "status source %d tag %d count %d, expected an empty status", st.MPI_SOURCE, st.MPI_TAG,
                 p2p_count(&st, MPI_BYTE));
        MPI_Test(&q, &flag, &st);
        MT_CHECK(flag == 1, "MPI_Test on an inactive persistent request: flag %d", flag);
        P2P_CHECK_UNTOUCHED(buf, sizeof buf, 0x77, "buffer of the inactive receive");
        if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
    }

    MT_CASE("request_free_of_started_persistent_send_still_delivers") {
        const int tag = 750;
        const size_t sizes[2] = {P2P_ENVELOPE_BYTES, P2P_RNDV_BYTES};
        unsigned char *buf[2];
        for (int i = 0; i < 2; ++i) buf[i] = p2p_alloc(sizes[i]);
        if (mt_rank == 0) {
            for (int i = 0; i < 2; ++i) {
                MPI_Request q;
                mt_fill(buf[i], sizes[i], p2p_seed(tag, 0, i));
                MPI_Send_init(buf[i], (int)sizes[i], MPI_BYTE, 1, tag + i, MPI_COMM_WORLD, &q);
                MPI_Start(&q);
                MPI_Request_free(&q); /* still active: it must complete on its own */
                MT_CHECK(q == MPI_REQUEST_NULL, "MPI_Request_free did not set MPI_REQUEST_NULL");
            }
        } else if (mt_rank == 1) {
            for (int i = 1; i >= 0; --i) {
                MPI_Status st;
                MPI_Recv(buf[i], (int)sizes[i], MPI_BYTE, 0, tag + i, MPI_COMM_WORLD, &st);
                P2P_CHECK_STATUS(st, 0, tag + i, sizes[i]);
                P2P_CHECK_BYTES(buf[i], sizes[i], p2p_seed(tag, 0, i), "payload");
            }
        }
        MPI_Barrier(MPI_COMM_WORLD); /* rank 0's buffers stay alive until both arrived */
        for (int i = 0; i < 2; ++i) free(buf[i]);
    }

    return mt_finalize();
}
