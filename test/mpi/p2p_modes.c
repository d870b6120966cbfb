/* Send modes and combined calls: MPI_Issend is not complete before the receiver has
 * posted its receive; MPI_Bsend completes locally (into the attached buffer) before any
 * receive exists, and the user buffer is free at once; MPI_Rsend to a posted receive
 * delivers; MPI_Sendrecv and MPI_Sendrecv_replace exchange small and large messages.
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"

enum { NS = 4 };
static const size_t mode_sizes[NS] = {0, 16, P2P_ENVELOPE_BYTES, P2P_RNDV_BYTES};

/* Rank 1 receives message i of mode_sizes[] on tag + i and checks it. */
static void recv_mode_sizes(int tag, int first_seed_idx) {
    for (int i = 0; i < NS; ++i) {
        unsigned char *buf = p2p_alloc(mode_sizes[i]);
        MPI_Status st;
        MPI_Recv(buf, (int)mode_sizes[i], MPI_BYTE, 0, tag + i, MPI_COMM_WORLD, &st);
        P2P_CHECK_STATUS(st, 0, tag + i, mode_sizes[i]);
        P2P_CHECK_BYTES(buf, mode_sizes[i], p2p_seed(tag, 0, first_seed_idx + i), "payload");
        free(buf);
    }
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);

    MT_CASE("issend_incomplete_until_receiver_posts_then_completes") {
        /* Rank 1 posts its receives only after the barrier, which rank 0 enters after
         * testing: no Issend may be complete at that point. */
        const int tag = 800;
        unsigned char *buf[NS];
        MPI_Request req[NS];
        if (mt_rank == 0) {
            for (int i = 0; i < NS; ++i) {
                buf[i] = p2p_alloc(mode_sizes[i]);
                mt_fill(buf[i], mode_sizes[i], p2p_seed(tag, 0, i));
                MPI_Issend(buf[i], (int)mode_sizes[i], MPI_BYTE, 1, tag + i, MPI_COMM_WORLD, &req[i]);
            }
            for (int k = 0; k < 100; ++k)
                for (int i = 0; i < NS; ++i) {
                    int flag = 0;
                    MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
                    if (flag) {
                        MT_CHECK(0, "Issend of %zu bytes complete before the receive was posted", mode_sizes[i]);
                        req[i] = MPI_REQUEST_NULL;
                    }
                }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (mt_rank == 1) recv_mode_sizes(tag, 0);
        if (mt_rank == 0) {
            for (int i = 0; i < NS; ++i) {
                MPI_Status st;
                int done = req[i] == MPI_REQUEST_NULL || p2p_test_until(&req[i], &st);
                MT_CHECK(done, "Issend of %zu bytes never completed after the receive", mode_sizes[i]);
            }
            for (int i = 0; i < NS; ++i) free(buf[i]);
        }
    }

    MT_CASE("ssend_sizes_deliver_intact") {
        const int tag = 810;
        if (mt_rank == 0) {
            for (int i = 0; i < NS; ++i) {
                unsigned char *buf = p2p_alloc(mode_sizes[i]);
                mt_fill(buf, mode_sizes[i], p2p_seed(tag, 0, i));
                MPI_Ssend(buf, (int)mode_sizes[i], MPI_BYTE, 1, tag + i, MPI_COMM_WORLD);
                free(buf);
            }
        } else if (mt_rank == 1) {
            recv_mode_sizes(tag, 0);
        }
    }

    MT_CASE("bsend_completes_before_receiver_posts_and_buffer_is_reusable") {
        /* Every Bsend returns before rank 1 posts anything (it waits in the barrier);
         * rank 0 scribbles over its buffers at once; rank 1 must get the originals. */
        const int tag = 820;
        void *attached = NULL;
        int asize = 0;
        if (mt_rank == 0) {
            for (int i = 0; i < NS; ++i) asize += (int)mode_sizes[i] + MPI_BSEND_OVERHEAD;
            attached = p2p_alloc((size_t)asize);
            MPI_Buffer_attach(attached, asize);
            for (int i = 0; i < NS; ++i) {
                unsigned char *buf = p2p_alloc(mode_sizes[i]);
                mt_fill(buf, mode_sizes[i], p2p_seed(tag, 0, i));
                int rc = MPI_Bsend(buf, (int)mode_sizes[i], MPI_BYTE, 1, tag + i, MPI_COMM_WORLD);
                MT_CHECK(rc == MPI_SUCCESS, "MPI_Bsend of %zu bytes failed", mode_sizes[i]);
                memset(buf, 0xee, mode_sizes[i]);
                free(buf);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (mt_rank == 1) recv_mode_sizes(tag, 0);
        if (mt_rank == 0) {
            void *detached = NULL;
            int dsize = -1;
            MPI_Buffer_detach(&detached, &dsize); /* waits for the buffered messages */
            MT_CHECK(detached == attached && dsize == asize, "detach returned %p/%d, attached %p/%d",
                     detached, dsize, attached, asize);
            free(attached);
        }
    }

    MT_CASE("ibsend_completes_before_receiver_posts") {
        const int tag = 830;
        void *attached = NULL;
        if (mt_rank == 0) {
            int asize = 0;
            for (int i = 0; i < NS; ++i) asize += (int)mode_sizes[i] + MPI_BSEND_OVERHEAD;
            attached = p2p_alloc((size_t)asize);
            MPI_Buffer_attach(attached, asize);
            for (int i = 0; i < NS; ++i) {
                unsigned char *buf = p2p_alloc(mode_sizes[i]);
                MPI_Request q;
                MPI_Status st;
                mt_fill(buf, mode_sizes[i], p2p_seed(tag, 0, i));
                MPI_Ibsend(buf, (int)mode_sizes[i], MPI_BYTE, 1, tag + i, MPI_COMM_WORLD, &q);
                MT_CHECK(p2p_test_until(&q, &st), "Ibsend of %zu bytes did not complete locally", mode_sizes[i]);
                memset(buf, 0xee, mode_sizes[i]);
                free(buf);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (mt_rank == 1) recv_mode_sizes(tag, 0);
        if (mt_rank == 0) {
            int dsize;
            MPI_Buffer_detach(&attached, &dsize);
            free(attached);
        }
    }

    MT_CASE("rsend_after_receiver_posted_delivers") {
        const int tag = 840;
        unsigned char *buf[NS];
        MPI_Request req[NS];
        MPI_Status st[NS];
        for (int i = 0; i < NS; ++i) buf[i] = p2p_alloc(mode_sizes[i]);
        if (mt_rank == 1)
            for (int i = 0; i < NS; ++i)
                MPI_Irecv(buf[i], (int)mode_sizes[i], MPI_BYTE, 0, tag + i, MPI_COMM_WORLD, &req[i]);
        MPI_Barrier(MPI_COMM_WORLD); /* the receives exist before any Rsend */
        if (mt_rank == 0) {
            for (int i = 0; i < NS; ++i) {
                mt_fill(buf[i], mode_sizes[i], p2p_seed(tag, 0, i));
                MPI_Rsend(buf[i], (int)mode_sizes[i], MPI_BYTE, 1, tag + i, MPI_COMM_WORLD);
            }
        } else if (mt_rank == 1) {
            MPI_Waitall(NS, req, st);
            for (int i = 0; i < NS; ++i) {
                P2P_CHECK_STATUS(st[i], 0, tag + i, mode_sizes[i]);
                P2P_CHECK_BYTES(buf[i], mode_sizes[i], p2p_seed(tag, 0, i), "payload");
            }
        }
        for (int i = 0; i < NS; ++i) free(buf[i]);
    }

    MT_CASE("irsend_after_receiver_posted_delivers") {
        const int tag = 850;
        unsigned char *buf[NS];
        MPI_Request req[NS];
        MPI_Status st[NS];
        for (int i = 0; i < NS; ++i) buf[i] = p2p_alloc(mode_sizes[i]);
        if (mt_rank == 1)
            for (int i = 0; i < NS; ++i)
                MPI_Irecv(buf[i], (int)mode_sizes[i], MPI_BYTE, 0, tag + i, MPI_COMM_WORLD, &req[i]);
        MPI_Barrier(MPI_COMM_WORLD);
        if (mt_rank == 0) {
            for (int i = 0; i < NS; ++i) {
                mt_fill(buf[i], mode_sizes[i], p2p_seed(tag, 0, i));
                MPI_Irsend(buf[i], (int)mode_sizes[i], MPI_BYTE, 1, tag + i, MPI_COMM_WORLD, &req[i]);
            }
            MPI_Waitall(NS, req, MPI_STATUSES_IGNORE);
        } else if (mt_rank == 1) {
            MPI_Waitall(NS, req, st);
            for (int i = 0; i < NS; ++i) {
                P2P_CHECK_STATUS(st[i], 0, tag + i, mode_sizes[i]);
                P2P_CHECK_BYTES(buf[i], mode_sizes[i], p2p_seed(tag, 0, i), "payload");
            }
        }
        for (int i = 0; i < NS; ++i) free(buf[i]);
    }

    MT_CASE("sendrecv_exchanges_small_and_9MiB_messages") {
        const int tag = 860;
        if (mt_rank <= 1) {
            const int peer = 1 - mt_rank;
            for (int i = 0; i < NS; ++i) {
                size_t n = mode_sizes[i];
                unsigned char *out = p2p_alloc(n), *in = p2p_alloc(n);
                MPI_Status st;
                mt_fill(out, n, p2p_seed(tag, mt_rank, i));
                MPI_Sendrecv(out, (int)n, MPI_BYTE, peer, tag + i, in, (int)n, MPI_BYTE, peer, tag + i,
                             MPI_COMM_WORLD, &st);
                P2P_CHECK_STATUS(st, peer, tag + i, n);
                P2P_CHECK_BYTES(in, n, p2p_seed(tag, peer, i), "received part");
                P2P_CHECK_BYTES(out, n, p2p_seed(tag, mt_rank, i), "send buffer after the call");
                free(out);
                free(in);
            }
        }
    }

    MT_CASE("sendrecv_with_unequal_sizes_and_tags_each_way") {
        /* Rank 0 sends 200 bytes and receives 9 MiB; rank 1 the reverse. */
        const int tag0 = 870, tag1 = 871;
        if (mt_rank <= 1) {
            const int peer = 1 - mt_rank;
            size_t nout = mt_rank == 0 ? P2P_ENVELOPE_BYTES : P2P_RNDV_BYTES;
            size_t nin = mt_rank == 0 ? P2P_RNDV_BYTES : P2P_ENVELOPE_BYTES;
            int tout = mt_rank == 0 ? tag0 : tag1, tin = mt_rank == 0 ? tag1 : tag0;
            unsigned char *out = p2p_alloc(nout), *in = p2p_alloc(P2P_RNDV_BYTES);
            MPI_Status st;
            mt_fill(out, nout, p2p_seed(tout, mt_rank, 0));
            MPI_Sendrecv(out, (int)nout, MPI_BYTE, peer, tout, in, (int)P2P_RNDV_BYTES, MPI_BYTE,
                         MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            P2P_CHECK_STATUS(st, peer, tin, nin);
            P2P_CHECK_BYTES(in, nin, p2p_seed(tin, peer, 0), "received part");
            free(out);
            free(in);
        }
    }

    MT_CASE("sendrecv_replace_exchanges_small_and_9MiB_messages") {
        const int tag = 880;
        if (mt_rank <= 1) {
            const int peer = 1 - mt_rank;
            for (int i = 0; i < NS; ++i) {
                size_t n = mode_sizes[i];
                unsigned char *buf = p2p_alloc(n);
                MPI_Status st;
                mt_fill(buf, n, p2p_seed(tag, mt_rank, i));
                MPI_Sendrecv_replace(buf, (int)n, MPI_BYTE, peer, tag + i, peer, tag + i, MPI_COMM_WORLD, &st);
                P2P_CHECK_STATUS(st, peer, tag + i, n);
                P2P_CHECK_BYTES(buf, n, p2p_seed(tag, peer, i), "replaced buffer");
                free(buf);
            }
        }
    }

    MT_CASE("sendrecv_replace_with_int_count_on_rendezvous_sized_message") {
        const int tag = 890;
        const int count = (int)((P2P_RNDV_BYTES + P2P_ENVELOPE_BYTES) / sizeof(int));
        if (mt_rank <= 1) {
            const int peer = 1 - mt_rank;
            int *buf = p2p_alloc(count * sizeof(int));
            for (int i = 0; i < count; ++i) buf[i] = mt_rank * 100000000 + i;
            MPI_Status st;
            MPI_Sendrecv_replace(buf, count, MPI_INT, peer, tag, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st);
            MT_CHECK(p2p_count(&st, MPI_INT) == count, "count %d", p2p_count(&st, MPI_INT));
            int bad = -1;
            for (int i = 0; i < count && bad < 0; ++i)
                if (buf[i] != peer * 100000000 + i) bad = i;
            MT_CHECK(bad < 0, "element %d is %d", bad, bad >= 0 ? buf[bad] : 0);
            free(buf);
        }
    }

    MT_CASE("sendrecv_from_proc_null_returns_empty_status_and_still_sends") {
        /* Rank 0 sends to rank 1 and receives from MPI_PROC_NULL; rank 1 the reverse. */
        const int tag = 895;
        if (mt_rank <= 1) {
            unsigned char out[P2P_ENVELOPE_BYTES], in[P2P_ENVELOPE_BYTES];
            MPI_Status st;
            memset(in, 0x11, sizeof in);
            mt_fill(out, sizeof out, tag);
            if (mt_rank == 0) {
                MPI_Sendrecv(out, sizeof out, MPI_BYTE, 1, tag, in, sizeof in, MPI_BYTE, MPI_PROC_NULL, tag,
                             MPI_COMM_WORLD, &st);
                P2P_CHECK_PROC_NULL_STATUS(st);
                P2P_CHECK_UNTOUCHED(in, sizeof in, 0x11, "receive buffer");
            } else {
                MPI_Sendrecv(out, sizeof out, MPI_BYTE, MPI_PROC_NULL, tag, in, sizeof in, MPI_BYTE, 0, tag,
                             MPI_COMM_WORLD, &st);
                P2P_CHECK_STATUS(st, 0, tag, sizeof in);
                P2P_CHECK_BYTES(in, sizeof in, tag, "received part");
            }
        }
    }

    return mt_finalize();
}
