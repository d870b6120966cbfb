/* Host nonblocking receives that match an envelope, finished by every completion call.
 * The threshold knob sends host messages of 4 KiB and more as envelopes, so each case
 * exercises the light host-receive records turning into rendezvous receives: from
 * MPI_Testsome, MPI_Waitany, MPI_Request_get_status, MPI_Request_free, in windows into
 * overlapping buffers, and while the completion call waits on other requests.
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"

enum { RNDV = 4096, BIG = 3 * RNDV + 17, WIN = 8 };

int main(int argc, char **argv) {
    setenv("MPIACC_HOST_RNDV_THRESHOLD", "4K", 1);
    MT_INIT(&argc, &argv);
    unsigned char *bufs[WIN];
    for (int w = 0; w < WIN; ++w) bufs[w] = p2p_alloc(BIG);
    unsigned char *out = p2p_alloc(BIG);

    MT_CASE("window_of_envelopes_and_payloads_completed_by_testsome_arrive_intact") {
        const int tag = 2100;
        /* Even entries are rendezvous sized, odd ones small (a bounce inside the record). */
        if (mt_rank == 0) {
            for (int w = 0; w < WIN; ++w) {
                size_t n = w % 2 ? 64 : BIG;
                mt_fill(out, n, p2p_seed(tag, 0, w));
                MPI_Send(out, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
            }
        } else if (mt_rank == 1) {
            long long direct0 = mpiacc_counter_value("protocol.recv.direct");
            MPI_Request r[WIN];
            MPI_Status st[WIN];
            for (int w = 0; w < WIN; ++w) MPI_Irecv(bufs[w], BIG, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r[w]);
            int done = 0, seen[WIN] = {0};
            double end = MPI_Wtime() + P2P_TIMEOUT_S;
            while (done < WIN && MPI_Wtime() < end) {
                int outcount = 0, idx[WIN];
                MPI_Testsome(WIN, r, &outcount, idx, st);
                for (int k = 0; k < outcount && outcount != MPI_UNDEFINED; ++k) {
                    int w = idx[k];
                    size_t n = w % 2 ? 64 : BIG;
                    MT_CHECK(!seen[w], "request %d completed twice", w);
                    seen[w] = 1;
                    MT_CHECK(r[w] == MPI_REQUEST_NULL, "request %d not freed", w);
                    P2P_CHECK_STATUS(st[k], 0, tag, n);
                    P2P_CHECK_BYTES(bufs[w], n, p2p_seed(tag, 0, w), "testsome window");
                    ++done;
                }
            }
            MT_CHECK(done == WIN, "%d of %d receives completed", done, WIN);
            MT_CHECK(mpiacc_counter_value("protocol.recv.direct") - direct0 == WIN / 2,
                     "%lld rendezvous receives, expected %d", mpiacc_counter_value("protocol.recv.direct") - direct0,
                     WIN / 2);
        }
    }

    MT_CASE("waitany_completes_one_envelope_receive_at_a_time_each_once") {
        const int tag = 2110;
        if (mt_rank == 0) {
            for (int w = 0; w < WIN; ++w) {
                size_t n = w % 3 == 0 ? 8 : BIG;
                mt_fill(out, n, p2p_seed(tag, 0, w));
                MPI_Send(out, (int)n, MPI_BYTE, 1, tag + w, MPI_COMM_WORLD);
            }
        } else if (mt_rank == 1) {
            MPI_Request r[WIN];
            for (int w = 0; w < WIN; ++w) MPI_Irecv(bufs[w], BIG, MPI_BYTE, 0, tag + w, MPI_COMM_WORLD, &r[w]);
            int seen[WIN] = {0};
            for (int k = 0; k < WIN; ++k) {
                int idx = MPI_UNDEFINED;
                MPI_Status st;
                MPI_Waitany(WIN, r, &idx, &st);
                MT_CHECK(idx >= 0 && idx < WIN, "waitany index %d", idx);
                if (idx < 0 || idx >= WIN) break;
                MT_CHECK(!seen[idx], "request %d completed twice", idx);
                seen[idx] = 1;
                size_t n = idx % 3 == 0 ? 8 : BIG;
                P2P_CHECK_STATUS(st, 0, tag + idx, n);
                P2P_CHECK_BYTES(bufs[idx], n, p2p_seed(tag, 0, idx), "waitany");
            }
            int idx = 0;
            MPI_Waitany(WIN, r, &idx, MPI_STATUS_IGNORE);
            MT_CHECK(idx == MPI_UNDEFINED, "waitany on all-null array gave index %d", idx);
        }
    }

    MT_CASE("request_get_status_reports_envelope_receive_done_only_with_its_bytes") {
        const int tag = 2120;
        if (mt_rank == 0) {
            mt_fill(out, BIG, p2p_seed(tag, 0, 0));
            MPI_Send(out, BIG, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
            mt_fill(out, 100, p2p_seed(tag, 0, 1));
            MPI_Send(out, 100, MPI_BYTE, 1, tag + 1, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Request r[2];
            MPI_Irecv(bufs[0], BIG, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r[0]);
            MPI_Irecv(bufs[1], 150, MPI_BYTE, 0, tag + 1, MPI_COMM_WORLD, &r[1]); /* bounced: < envelope */
            for (int i = 0; i < 2; ++i) {
                int flag = 0;
                MPI_Status st;
                double end = MPI_Wtime() + P2P_TIMEOUT_S;
                while (!flag && MPI_Wtime() < end) MPI_Request_get_status(r[i], &flag, &st);
                MT_CHECK(flag, "request_get_status never reported receive %d done", i);
                MT_CHECK(r[i] != MPI_REQUEST_NULL, "request_get_status freed request %d", i);
                /* Done means the bytes are there, before any wait. */
                size_t n = i == 0 ? BIG : 100;
                P2P_CHECK_STATUS(st, 0, tag + i, n);
                P2P_CHECK_BYTES(bufs[i], n, p2p_seed(tag, 0, i), "request_get_status");
                MPI_Status st2;
                MPI_Wait(&r[i], &st2);
                P2P_CHECK_STATUS(st2, 0, tag + i, n);
            }
        }
    }

    MT_CASE("waiting_on_a_later_receive_drives_an_earlier_one_holding_an_envelope") {
        /* The sender blocks in the rendezvous of the first message until our CTS, and only
         * then sends the second: the receiver waits on the second alone (MPI_Wait, then
         * MPI_Waitall over another pair), so progress must answer the envelope in the
         * receive outside the call. */
        const int tag = 2130;
        if (mt_rank == 0) {
            for (int rep = 0; rep < 2; ++rep) {
                mt_fill(out, BIG, p2p_seed(tag, rep, 0));
                MPI_Send(out, BIG, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
                mt_fill(out, 32, p2p_seed(tag, rep, 1));
                MPI_Send(out, 32, MPI_BYTE, 1, tag + 1, MPI_COMM_WORLD);
                if (rep == 1) MPI_Send(out, 32, MPI_BYTE, 1, tag + 2, MPI_COMM_WORLD);
            }
        } else if (mt_rank == 1) {
            MPI_Request a, b, pair[2];
            MPI_Status st;
            MPI_Irecv(bufs[0], BIG, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &a);
            MPI_Irecv(bufs[1], 32, MPI_BYTE, 0, tag + 1, MPI_COMM_WORLD, &b);
            MPI_Wait(&b, &st);
            P2P_CHECK_BYTES(bufs[1], 32, p2p_seed(tag, 0, 1), "wait on the later receive");
            MPI_Wait(&a, &st);
            P2P_CHECK_STATUS(st, 0, tag, BIG);
            P2P_CHECK_BYTES(bufs[0], BIG, p2p_seed(tag, 0, 0), "earlier envelope receive");

            MPI_Irecv(bufs[0], BIG, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &a);
            MPI_Irecv(bufs[1], 32, MPI_BYTE, 0, tag + 1, MPI_COMM_WORLD, &pair[0]);
            MPI_Irecv(bufs[2], 32, MPI_BYTE, 0, tag + 2, MPI_COMM_WORLD, &pair[1]);
            MPI_Waitall(2, pair, MPI_STATUSES_IGNORE);
            P2P_CHECK_BYTES(bufs[1], 32, p2p_seed(tag, 1, 1), "waitall on the later receives");
            MPI_Wait(&a, &st);
            P2P_CHECK_STATUS(st, 0, tag, BIG);
            P2P_CHECK_BYTES(bufs[0], BIG, p2p_seed(tag, 1, 0), "earlier envelope receive (waitall)");
        }
    }

    MT_CASE("window_of_envelope_receives_into_one_overlapping_buffer_all_complete") {
        /* OSU-style: every receive of the window into the same bytes. Overlapping
         * receives go through a bounce so no envelope is overwritten before it is read.
         * Which message's bytes end up in the buffer is the program's race; every status
         * must be right, and the buffer must work for the next exchange. */
        const int tag = 2140;
        if (mt_rank == 0) {
            mt_fill(out, BIG, p2p_seed(tag, 0, 0));
            for (int w = 0; w < WIN; ++w) MPI_Send(out, BIG - 1 - w, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Request r[WIN];
            MPI_Status st[WIN];
            for (int w = 0; w < WIN; ++w)
                MPI_Irecv(bufs[0] + (w % 2), BIG - 1, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r[w]);
            int rc = MPI_Waitall(WIN, r, st);
            MT_CHECK(rc == MPI_SUCCESS, "waitall returned %d", rc);
            for (int w = 0; w < WIN; ++w) P2P_CHECK_STATUS(st[w], 0, tag, BIG - 1 - w);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (mt_rank == 0) {
            mt_fill(out, BIG, p2p_seed(tag, 0, 1));
            MPI_Send(out, BIG, MPI_BYTE, 1, tag + 1, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Status st;
            MPI_Recv(bufs[0], BIG, MPI_BYTE, 0, tag + 1, MPI_COMM_WORLD, &st);
            P2P_CHECK_BYTES(bufs[0], BIG, p2p_seed(tag, 0, 1), "exchange after the overlapping window");
        }
    }

    MT_CASE("request_free_of_pending_irecv_that_gets_an_envelope_lets_the_sender_finish") {
        const int tag = 2150;
        if (mt_rank == 0) {
            mt_fill(out, BIG, p2p_seed(tag, 0, 0));
            MPI_Send(out, BIG, MPI_BYTE, 1, tag, MPI_COMM_WORLD); /* returns after the CTS/data */
            MPI_Send(out, 8, MPI_BYTE, 1, tag + 1, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Request r;
            MPI_Irecv(bufs[3], BIG, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r);
            MPI_Request_free(&r);
            MT_CHECK(r == MPI_REQUEST_NULL, "request_free left the handle set");
            /* The blocking receive keeps progress going until the sender is through. */
            MPI_Recv(bufs[4], 8, MPI_BYTE, 0, tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }

    MT_CASE("envelope_into_small_irecv_gives_err_truncate_in_waitall_and_sender_completes") {
        const int tag = 2160;
        MPI_Comm comm;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        if (mt_rank == 0) {
            mt_fill(out, BIG, p2p_seed(tag, 0, 0));
            MPI_Send(out, BIG, MPI_BYTE, 1, tag, comm);
            mt_fill(out, 40, p2p_seed(tag, 0, 1));
            MPI_Send(out, 40, MPI_BYTE, 1, tag, comm);
        } else if (mt_rank == 1) {
            MPI_Request r[2];
            MPI_Status st[2];
            memset(bufs[5], 0xAB, BIG);
            MPI_Irecv(bufs[5], 100, MPI_BYTE, 0, tag, comm, &r[0]);
            MPI_Irecv(bufs[6], 40, MPI_BYTE, 0, tag, comm, &r[1]);
            int rc = MPI_Waitall(2, r, st);
            MT_CHECK(rc == MPI_ERR_IN_STATUS, "waitall returned %d, expected MPI_ERR_IN_STATUS", rc);
            MT_CHECK(p2p_class(st[0].MPI_ERROR) == MPI_ERR_TRUNCATE, "first status error class %d",
                     p2p_class(st[0].MPI_ERROR));
            MT_CHECK(st[1].MPI_ERROR == MPI_SUCCESS, "second status error %d", st[1].MPI_ERROR);
            P2P_CHECK_BYTES(bufs[6], 40, p2p_seed(tag, 0, 1), "message after the truncated one");
            P2P_CHECK_UNTOUCHED(bufs[5] + 100, BIG - 100, 0xAB, "past the truncated receive");
        }
        MPI_Comm_free(&comm);
    }

    MT_CASE("noncontiguous_irecv_of_an_envelope_message_unpacks_into_the_typemap") {
        const int tag = 2170, count = 1000, stride = 2;
        MPI_Datatype vec;
        MPI_Type_vector(count, 1, stride, MPI_INT, &vec);
        MPI_Type_commit(&vec);
        int *dst = p2p_alloc(sizeof(int) * count * stride);
        if (mt_rank == 0) {
            int *src = p2p_alloc(sizeof(int) * count);
            for (int i = 0; i < count; ++i) src[i] = 7 * i + 3;
            MPI_Send(src, count, MPI_INT, 1, tag, MPI_COMM_WORLD);
            free(src);
        } else if (mt_rank == 1) {
            for (int i = 0; i < count * stride; ++i) dst[i] = -1;
            MPI_Request r;
            MPI_Status st;
            MPI_Irecv(dst, 1, vec, 0, tag, MPI_COMM_WORLD, &r);
            MPI_Type_free(&vec); /* the pending receive keeps its own reference */
            MPI_Wait(&r, &st);
            P2P_CHECK_STATUS(st, 0, tag, sizeof(int) * count);
            int bad = -1;
            for (int i = 0; i < count * stride && bad < 0; ++i)
                if (dst[i] != (i % stride ? -1 : 7 * (i / stride) + 3)) bad = i;
            MT_CHECK(bad < 0, "int %d is %d", bad, bad >= 0 ? dst[bad] : 0);
        }
        if (vec != MPI_DATATYPE_NULL) MPI_Type_free(&vec);
        free(dst);
    }

    MT_CASE("testall_false_while_an_envelope_receive_is_unfinished_then_all_complete") {
        const int tag = 2180;
        if (mt_rank == 0) {
            mt_fill(out, 16, p2p_seed(tag, 0, 0));
            MPI_Send(out, 16, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            mt_fill(out, BIG, p2p_seed(tag, 0, 1));
            MPI_Send(out, BIG, MPI_BYTE, 1, tag + 1, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Request r[2];
            MPI_Status st[2];
            MPI_Irecv(bufs[0], 16, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r[0]);
            MPI_Irecv(bufs[1], BIG, MPI_BYTE, 0, tag + 1, MPI_COMM_WORLD, &r[1]);
            int flag = 1;
            for (int i = 0; i < 100; ++i) MPI_Testall(2, r, &flag, st);
            MT_CHECK(!flag, "testall true before the second message was sent");
            MT_CHECK(r[0] != MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL, "testall completed a subset");
            MPI_Barrier(MPI_COMM_WORLD);
            double end = MPI_Wtime() + P2P_TIMEOUT_S;
            flag = 0;
            while (!flag && MPI_Wtime() < end) MPI_Testall(2, r, &flag, st);
            MT_CHECK(flag, "testall never completed");
            P2P_CHECK_STATUS(st[0], 0, tag, 16);
            P2P_CHECK_STATUS(st[1], 0, tag + 1, BIG);
            P2P_CHECK_BYTES(bufs[0], 16, p2p_seed(tag, 0, 0), "testall small");
            P2P_CHECK_BYTES(bufs[1], BIG, p2p_seed(tag, 0, 1), "testall envelope");
        }
    }

    for (int w = 0; w < WIN; ++w) free(bufs[w]);
    free(out);
    return mt_finalize();
}
