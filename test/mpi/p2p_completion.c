/* Completion calls over mixed arrays of send and receive requests of several sizes,
 * with MPI_REQUEST_NULL entries and a receive from MPI_PROC_NULL: MPI_Waitany,
 * MPI_Waitsome, MPI_Testany, MPI_Testsome, MPI_Testall and MPI_Waitall complete each
 * request exactly once with its own status; MPI_Request_get_status reports without
 * freeing; MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE still deliver the bytes.
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"

enum { NR = 8 };
/* Entry i: a receive (from the peer, or from MPI_PROC_NULL for entry 7), a send, or
 * MPI_REQUEST_NULL (entry 6). Receive 2k matches the peer's send 2k+1 (same tag, size). */
static const size_t mix_n[NR] = {40, 40, P2P_RNDV_BYTES, P2P_RNDV_BYTES, P2P_ENVELOPE_BYTES,
                                 P2P_ENVELOPE_BYTES, 0, 8};
enum { RECV, SEND, NONE, RECV_PROC_NULL };
static const int mix_kind[NR] = {RECV, SEND, RECV, SEND, RECV, SEND, NONE, RECV_PROC_NULL};

struct mix {
    MPI_Request req[NR];
    unsigned char *buf[NR];
    int tag, peer, done[NR];
};

/* Ranks 0 and 1 post the same mixed array against each other. */
static void mix_post(struct mix *m, int tag) {
    m->tag = tag;
    m->peer = 1 - mt_rank;
    for (int i = 0; i < NR; ++i) {
        m->done[i] = 0;
        m->buf[i] = p2p_alloc(mix_n[i]);
        m->req[i] = MPI_REQUEST_NULL;
        int t = tag + i / 2;
        switch (mix_kind[i]) {
        case RECV:
            memset(m->buf[i], 0, mix_n[i]);
            MPI_Irecv(m->buf[i], (int)mix_n[i], MPI_BYTE, m->peer, t, MPI_COMM_WORLD, &m->req[i]);
            break;
        case SEND:
            mt_fill(m->buf[i], mix_n[i], p2p_seed(t, mt_rank, i));
            MPI_Isend(m->buf[i], (int)mix_n[i], MPI_BYTE, m->peer, t, MPI_COMM_WORLD, &m->req[i]);
            break;
        case RECV_PROC_NULL:
            memset(m->buf[i], 0x42, mix_n[i]);
            MPI_Irecv(m->buf[i], (int)mix_n[i], MPI_BYTE, MPI_PROC_NULL, t, MPI_COMM_WORLD, &m->req[i]);
            break;
        default: break;
        }
    }
}

/* Records that entry i completed with status st (NULL: status ignored), and checks it. */
static void mix_completed(struct mix *m, int i, const MPI_Status *st) {
    MT_CHECK(i >= 0 && i < NR, "completed index %d out of range", i);
    if (i < 0 || i >= NR) return;
    MT_CHECK(mix_kind[i] != NONE, "index %d (MPI_REQUEST_NULL) reported as completed", i);
    MT_CHECK(!m->done[i], "index %d completed twice", i);
    MT_CHECK(m->req[i] == MPI_REQUEST_NULL, "completed request %d not set to MPI_REQUEST_NULL", i);
    m->done[i] = 1;
    int t = m->tag + i / 2;
    if (mix_kind[i] == RECV) {
        if (st) P2P_CHECK_STATUS(*st, m->peer, t, mix_n[i]);
        P2P_CHECK_BYTES(m->buf[i], mix_n[i], p2p_seed(t, m->peer, i + 1), "received bytes");
    } else if (mix_kind[i] == RECV_PROC_NULL) {
        /* Only the count: MPICH before 4.2 reports source 0 and tag 0 for a nonblocking
         * receive from MPI_PROC_NULL (pmodels/mpich#6805), and MPI-ACC matches MPICH. */
        if (st) MT_CHECK(p2p_count(st, MPI_BYTE) == 0, "MPI_PROC_NULL receive count %d", p2p_count(st, MPI_BYTE));
        P2P_CHECK_UNTOUCHED(m->buf[i], mix_n[i], 0x42, "buffer of the MPI_PROC_NULL receive");
    }
}

static void mix_finish(struct mix *m) {
    for (int i = 0; i < NR; ++i) {
        MT_CHECK(mix_kind[i] == NONE || m->done[i], "request %d never completed", i);
        if (m->req[i] != MPI_REQUEST_NULL) MPI_Wait(&m->req[i], MPI_STATUS_IGNORE);
        free(m->buf[i]);
    }
}

static int is_empty_status(const MPI_Status *st) {
    return st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG && p2p_count(st, MPI_BYTE) == 0;
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);

    MT_CASE("waitany_returns_each_request_once_then_undefined") {
        if (mt_rank <= 1) {
            struct mix m;
            mix_post(&m, 900);
            for (int k = 0; k < NR - 1; ++k) {
                int idx = -1;
                MPI_Status st;
                MPI_Waitany(NR, m.req, &idx, &st);
                mix_completed(&m, idx, &st);
            }
            int idx = 0;
            MPI_Status st;
            MPI_Waitany(NR, m.req, &idx, &st);
            MT_CHECK(idx == MPI_UNDEFINED, "Waitany over null requests gave index %d", idx);
            MT_CHECK(is_empty_status(&st), "Waitany over null requests gave a non-empty status");
            mix_finish(&m);
        }
    }

    MT_CASE("waitsome_completes_each_request_once_then_undefined") {
        if (mt_rank <= 1) {
            struct mix m;
            mix_post(&m, 910);
            int total = 0, calls = 0;
            for (;;) {
                int out = -1, idx[NR];
                MPI_Status st[NR];
                MPI_Waitsome(NR, m.req, &out, idx, st);
                if (out == MPI_UNDEFINED) break;
                MT_CHECK(out >= 1 && out <= NR, "Waitsome outcount %d", out);
                if (out < 1 || out > NR || ++calls > NR) break;
                for (int j = 0; j < out; ++j) mix_completed(&m, idx[j], &st[j]);
                total += out;
            }
            MT_CHECK(total == NR - 1, "Waitsome completed %d requests, expected %d", total, NR - 1);
            mix_finish(&m);
        }
    }

    MT_CASE("testany_completes_each_request_once_then_flag_true_undefined") {
        if (mt_rank <= 1) {
            struct mix m;
            mix_post(&m, 920);
            int total = 0;
            double end = MPI_Wtime() + P2P_TIMEOUT_S;
            while (total < NR - 1 && MPI_Wtime() < end) {
                int idx = -1, flag = 0;
                MPI_Status st;
                MPI_Testany(NR, m.req, &idx, &flag, &st);
                if (flag) {
                    MT_CHECK(idx != MPI_UNDEFINED, "Testany: flag true, index undefined, with %d left", NR - 1 - total);
                    if (idx == MPI_UNDEFINED) break;
                    mix_completed(&m, idx, &st);
                    ++total;
                }
            }
            int idx = 0, flag = 0;
            MPI_Status st;
            MPI_Testany(NR, m.req, &idx, &flag, &st);
            MT_CHECK(flag == 1 && idx == MPI_UNDEFINED, "Testany over null requests: flag %d index %d", flag, idx);
            MT_CHECK(is_empty_status(&st), "Testany over null requests gave a non-empty status");
            mix_finish(&m);
        }
    }

    MT_CASE("testsome_completes_each_request_once_then_undefined") {
        if (mt_rank <= 1) {
            struct mix m;
            mix_post(&m, 930);
            int total = 0;
            double end = MPI_Wtime() + P2P_TIMEOUT_S;
            while (total < NR - 1 && MPI_Wtime() < end) {
                int out = -1, idx[NR];
                MPI_Status st[NR];
                MPI_Testsome(NR, m.req, &out, idx, st);
                MT_CHECK(out != MPI_UNDEFINED, "Testsome: outcount undefined with %d left", NR - 1 - total);
                if (out == MPI_UNDEFINED) break;
                for (int j = 0; j < out; ++j) mix_completed(&m, idx[j], &st[j]);
                total += out;
            }
            int out = 0, idx[NR];
            MPI_Testsome(NR, m.req, &out, idx, MPI_STATUSES_IGNORE);
            MT_CHECK(out == MPI_UNDEFINED, "Testsome over null requests: outcount %d", out);
            mix_finish(&m);
        }
    }

    MT_CASE("waitall_with_request_null_entries_gives_their_statuses_empty") {
        if (mt_rank <= 1) {
            struct mix m;
            MPI_Status st[NR];
            mix_post(&m, 940);
            for (int i = 0; i < NR; ++i) st[i].MPI_SOURCE = st[i].MPI_TAG = 12345;
            MPI_Waitall(NR, m.req, st);
            for (int i = 0; i < NR; ++i) {
                if (mix_kind[i] == NONE)
                    MT_CHECK(is_empty_status(&st[i]), "status %d of MPI_REQUEST_NULL: source %d tag %d", i,
                             st[i].MPI_SOURCE, st[i].MPI_TAG);
                else
                    mix_completed(&m, i, &st[i]);
            }
            mix_finish(&m);
        }
    }

    MT_CASE("testall_false_until_every_request_can_complete") {
        /* Rank 1 holds receives for A (sent at once) and B (sent after the barrier,
         * which rank 1 enters after testing): Testall cannot be true before. */
        const int ta = 950, tb = 951;
        unsigned char a[P2P_ENVELOPE_BYTES];
        unsigned char *b = p2p_alloc(P2P_RNDV_BYTES);
        MPI_Request req[2];
        if (mt_rank == 0) {
            mt_fill(a, sizeof a, ta);
            MPI_Send(a, sizeof a, MPI_BYTE, 1, ta, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Irecv(a, sizeof a, MPI_BYTE, 0, ta, MPI_COMM_WORLD, &req[0]);
            MPI_Irecv(b, (int)P2P_RNDV_BYTES, MPI_BYTE, 0, tb, MPI_COMM_WORLD, &req[1]);
            for (int k = 0; k < 200; ++k) {
                int flag = 0;
                MPI_Testall(2, req, &flag, MPI_STATUSES_IGNORE);
                if (flag) {
                    MT_CHECK(0, "Testall true before the second message was sent");
                    break;
                }
            }
            MT_CHECK(req[0] != MPI_REQUEST_NULL && req[1] != MPI_REQUEST_NULL,
                     "a Testall that returned false freed a request");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (mt_rank == 0) {
            mt_fill(b, P2P_RNDV_BYTES, tb);
            MPI_Send(b, (int)P2P_RNDV_BYTES, MPI_BYTE, 1, tb, MPI_COMM_WORLD);
        } else if (mt_rank == 1 && req[0] != MPI_REQUEST_NULL && req[1] != MPI_REQUEST_NULL) {
            int flag = 0;
            MPI_Status st[2];
            double end = MPI_Wtime() + P2P_TIMEOUT_S;
            while (!flag && MPI_Wtime() < end) MPI_Testall(2, req, &flag, st);
            MT_CHECK(flag, "Testall never became true");
            if (flag) {
                MT_CHECK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL, "Testall true left requests");
                P2P_CHECK_STATUS(st[0], 0, ta, sizeof a);
                P2P_CHECK_STATUS(st[1], 0, tb, P2P_RNDV_BYTES);
                P2P_CHECK_BYTES(a, sizeof a, ta, "first message");
                P2P_CHECK_BYTES(b, P2P_RNDV_BYTES, tb, "second message");
            }
        }
        free(b);
    }

    MT_CASE("request_get_status_reports_completion_without_freeing") {
        const int tag = 960;
        unsigned char *buf = p2p_alloc(P2P_RNDV_BYTES);
        MPI_Request q = MPI_REQUEST_NULL;
        if (mt_rank == 1) {
            int flag = 1;
            MPI_Status st;
            MPI_Irecv(buf, (int)P2P_RNDV_BYTES, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &q);
            MPI_Request_get_status(q, &flag, &st);
            MT_CHECK(flag == 0, "get_status true before the message was sent");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (mt_rank == 0) {
            mt_fill(buf, P2P_RNDV_BYTES, tag);
            MPI_Send(buf, (int)P2P_RNDV_BYTES, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            int flag = 0;
            MPI_Status st;
            double end = MPI_Wtime() + P2P_TIMEOUT_S;
            while (!flag && MPI_Wtime() < end) MPI_Request_get_status(q, &flag, &st);
            MT_CHECK(flag, "MPI_Request_get_status never reported completion");
            MT_CHECK(q != MPI_REQUEST_NULL, "MPI_Request_get_status freed the request");
            if (flag) {
                P2P_CHECK_STATUS(st, 0, tag, P2P_RNDV_BYTES);
                P2P_CHECK_BYTES(buf, P2P_RNDV_BYTES, tag, "payload at get_status completion");
            }
            MPI_Status st2;
            MPI_Wait(&q, &st2);
            MT_CHECK(q == MPI_REQUEST_NULL, "MPI_Wait did not free the request");
            P2P_CHECK_STATUS(st2, 0, tag, P2P_RNDV_BYTES);
        }
        free(buf);
    }

    MT_CASE("request_null_completes_at_once_with_empty_status") {
        MPI_Request q = MPI_REQUEST_NULL;
        MPI_Status st;
        int flag = 0;
        MPI_Request_get_status(q, &flag, &st);
        MT_CHECK(flag == 1 && is_empty_status(&st), "get_status(MPI_REQUEST_NULL): flag %d", flag);
        flag = 0;
        MPI_Test(&q, &flag, &st);
        MT_CHECK(flag == 1 && is_empty_status(&st), "Test(MPI_REQUEST_NULL): flag %d", flag);
        st.MPI_TAG = 7;
        MPI_Wait(&q, &st);
        MT_CHECK(is_empty_status(&st), "Wait(MPI_REQUEST_NULL) status not empty");
        MPI_Request arr[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        flag = 0;
        MPI_Testall(3, arr, &flag, MPI_STATUSES_IGNORE);
        MT_CHECK(flag == 1, "Testall over null requests: flag %d", flag);
        MPI_Waitall(3, arr, MPI_STATUSES_IGNORE);
        int out = 0, idx[3];
        MPI_Waitsome(3, arr, &out, idx, MPI_STATUSES_IGNORE);
        MT_CHECK(out == MPI_UNDEFINED, "Waitsome over null requests: outcount %d", out);
    }

    MT_CASE("status_ignore_and_statuses_ignore_still_deliver_bytes") {
        if (mt_rank <= 1) {
            struct mix m;
            mix_post(&m, 970);
            int idx = -1, out = 0, idxs[NR];
            MPI_Waitany(NR, m.req, &idx, MPI_STATUS_IGNORE);
            mix_completed(&m, idx, NULL);
            MPI_Waitsome(NR, m.req, &out, idxs, MPI_STATUSES_IGNORE);
            for (int j = 0; j < out && out != MPI_UNDEFINED; ++j) mix_completed(&m, idxs[j], NULL);
            MPI_Request rest[NR];
            memcpy(rest, m.req, sizeof rest);
            MPI_Waitall(NR, m.req, MPI_STATUSES_IGNORE);
            for (int i = 0; i < NR; ++i)
                if (rest[i] != MPI_REQUEST_NULL) mix_completed(&m, i, NULL);
            mix_finish(&m);
            /* and a blocking pair with MPI_STATUS_IGNORE */
            unsigned char buf[P2P_ENVELOPE_BYTES];
            if (mt_rank == 0) {
                mt_fill(buf, sizeof buf, 979);
                MPI_Send(buf, sizeof buf, MPI_BYTE, 1, 979, MPI_COMM_WORLD);
            } else {
                memset(buf, 0, sizeof buf);
                MPI_Recv(buf, sizeof buf, MPI_BYTE, 0, 979, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                P2P_CHECK_BYTES(buf, sizeof buf, 979, "MPI_Recv with MPI_STATUS_IGNORE");
            }
        }
    }

    return mt_finalize();
}
