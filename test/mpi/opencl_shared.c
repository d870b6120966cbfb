/* The SHARED mode between two ranks of one node (MPIACC_SHARED_STAGING): a cl_mem sent
 * to a cl_mem goes chunk by chunk through the sender's shared staging slots, which the
 * receiver copies out of itself; no chunk's bytes go through MPICH. Sizes around the
 * chunk, a window in order, truncation, host receivers (whose CPU copies out of the
 * slot) and host senders (whose CPU copies into a slot of theirs for the device to read).
 * Built a second time with SHARED_STAGING_OFF: the same traffic through the pipeline,
 * and no rank maps another's memory. Built a third time with CACHE_OFF: every transfer
 * makes its own pools (MPIACC_TEST_OPENCL_NO_CACHE=1), so the receiver sees a new segment
 * each time and must let the dead ones go.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

enum { CHUNK = 1 << 20 };

static const char *cases[] = {
    "opencl_to_opencl_sizes_around_the_chunk_arrive_intact_through_the_chosen_mode",
    "a_window_of_eight_cl_mem_isends_arrives_in_order",
    "truncated_shared_transfers_give_the_receiver_mpi_err_truncate_and_the_sender_success",
    "cl_mem_to_host_memory_contiguous_or_strided_is_copied_out_of_the_shared_slot",
    "more_transfers_than_the_mapping_bound_each_from_its_own_pool_arrive_intact",
    "host_memory_contiguous_or_strided_to_cl_mem_is_copied_out_of_the_senders_shared_slot",
};

#ifdef SHARED_STAGING_OFF
static const int shared_on = 0;
#else
static const int shared_on = 1;
#endif

#ifdef CACHE_OFF
static const char *cache_off = "1";
#else
static const char *cache_off = "0";
#endif

static long long count(const char *name) { return mpiacc_counter_value(name); }

int main(int argc, char **argv) {
    setenv("MPIACC_CHUNK_SIZE", "1M", 1);
    setenv("MPIACC_SHARED_STAGING", shared_on ? "1" : "0", 1);
    setenv("MPIACC_TEST_OPENCL_NO_CACHE", cache_off, 1);
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    if (!mt_one_host()) {
        for (int i = 0; i < ncases; ++i) mt_skip(cases[i], "the ranks are on different hosts: no mode of one node");
        return mt_finalize();
    }
    ocl_env e = ocl_setup_or_skip(cases, ncases);
    int c = 0;
    MPI_Datatype t = ocl_type(&e);
    const size_t big = 64u << 20;
    cl_mem m = ocl_alloc(&e, big);
    unsigned char *h = p2p_alloc(big);

    MT_CASE(cases[c++]) {
        const size_t sizes[] = {CHUNK, CHUNK + 1, 3 * (size_t)CHUNK - 1, 5 * (size_t)CHUNK + 7, big};
        const int n = (int)(sizeof sizes / sizeof sizes[0]);
        const long long shared0 = count(mt_rank == 0 ? "protocol.send.shared" : "protocol.recv.shared");
        const long long piped0 = count(mt_rank == 0 ? "protocol.send.pipeline" : "protocol.recv.pipeline");
        for (int i = 0; i < n; ++i) {
            const size_t len = sizes[i];
            if (mt_rank == 0) {
                mt_fill(h, len, 100 + i);
                ocl_write(&e, m, 0, h, len);
                MT_CHECK(MPI_Send(m, (int)len, t, 1, 10 + i, MPI_COMM_WORLD) == MPI_SUCCESS, "send of %zu bytes", len);
            } else if (mt_rank == 1) {
                ocl_fill(&e, m, len, 0);
                MPI_Status st;
                MT_CHECK(MPI_Recv(m, (int)len, t, 0, 10 + i, MPI_COMM_WORLD, &st) == MPI_SUCCESS,
                         "receive of %zu bytes", len);
                MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)len, "%zu bytes: status says %d", len,
                         p2p_count(&st, MPI_BYTE));
                ocl_read(&e, m, 0, h, len);
                P2P_CHECK_BYTES(h, len, 100 + i, "message");
            }
        }
        if (mt_rank <= 1) {
            /* The smallest is staged whole at the call (one below a chunk goes as the
             * payload; a chunk itself by rendezvous): every size here is a rendezvous. */
            const long long shared = count(mt_rank == 0 ? "protocol.send.shared" : "protocol.recv.shared") - shared0;
            const long long piped = count(mt_rank == 0 ? "protocol.send.pipeline" : "protocol.recv.pipeline") - piped0;
            MT_CHECK(shared == (shared_on ? n : 0) && piped == (shared_on ? 0 : n),
                     "rank %d: %lld shared and %lld pipeline transfers of %d", mt_rank, shared, piped, n);
            if (!shared_on)
                MT_CHECK(count("pool.peer_segments") == 0, "a rank mapped a peer's segment with the knob off");
        }
    }

    MT_CASE(cases[c++]) {
        /* Same tag, one after another: each must land in its own receive, in order. */
        enum { W = 8 };
        const size_t len = 3 * (size_t)CHUNK + 5;
        cl_mem w[W];
        MPI_Request r[W];
        for (int i = 0; i < W; ++i) w[i] = ocl_alloc(&e, len);
        if (mt_rank == 0) {
            for (int i = 0; i < W; ++i) {
                mt_fill(h, len, 200 + i);
                ocl_write(&e, w[i], 0, h, len);
            }
            for (int i = 0; i < W; ++i) MPI_Isend(w[i], (int)len, t, 1, 30, MPI_COMM_WORLD, &r[i]);
            MT_CHECK(MPI_Waitall(W, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "sender waitall");
        } else if (mt_rank == 1) {
            for (int i = 0; i < W; ++i) MPI_Irecv(w[i], (int)len, t, 0, 30, MPI_COMM_WORLD, &r[i]);
            MT_CHECK(MPI_Waitall(W, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "receiver waitall");
            for (int i = 0; i < W; ++i) {
                ocl_read(&e, w[i], 0, h, len);
                P2P_CHECK_BYTES(h, len, 200 + i, "message of the window");
            }
        }
        for (int i = 0; i < W; ++i) clReleaseMemObject(w[i]);
    }

    MT_CASE(cases[c++]) {
        const size_t len = 4 * (size_t)CHUNK + 9, room = 2 * (size_t)CHUNK + 1;
        if (mt_rank == 0) {
            mt_fill(h, len, 300);
            ocl_write(&e, m, 0, h, len);
            int rc = MPI_Send(m, (int)len, t, 1, 40, MPI_COMM_WORLD);
            MT_CHECK(rc == MPI_SUCCESS, "the sender of a truncated message got class %d", p2p_class(rc));
        } else if (mt_rank == 1) {
            MPI_Status st;
            ocl_fill(&e, m, len, 0x5a);
            int rc = MPI_Recv(m, (int)room, t, 0, 40, MPI_COMM_WORLD, &st);
            MT_CHECK(p2p_class(rc) == MPI_ERR_TRUNCATE, "class %d, expected MPI_ERR_TRUNCATE", p2p_class(rc));
            MT_CHECK(p2p_count(&st, MPI_BYTE) == 0, "count %d, expected 0", p2p_count(&st, MPI_BYTE));
            /* As MPICH's own truncated receives: nothing of the message is delivered. */
            ocl_read(&e, m, 0, h, len);
            P2P_CHECK_UNTOUCHED(h, len, 0x5a, "a truncated receive's buffer");
        }
        /* And the next message is whole. */
        if (mt_rank == 0) {
            mt_fill(h, 2 * (size_t)CHUNK, 301);
            ocl_write(&e, m, 0, h, 2 * (size_t)CHUNK);
            MT_CHECK(MPI_Send(m, 2 * CHUNK, t, 1, 41, MPI_COMM_WORLD) == MPI_SUCCESS, "send after the truncation");
        } else if (mt_rank == 1) {
            MT_CHECK(MPI_Recv(m, 2 * CHUNK, t, 0, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS,
                     "receive after the truncation");
            ocl_read(&e, m, 0, h, 2 * (size_t)CHUNK);
            P2P_CHECK_BYTES(h, 2 * (size_t)CHUNK, 301, "message after the truncation");
        }
        /* Into host memory (the receiver's CPU copies), and from host memory (the
         * sender's CPU fills its slots): the same outcome, nothing past the room written. */
        if (mt_rank == 0) {
            mt_fill(h, len, 302);
            ocl_write(&e, m, 0, h, len);
            int rc = MPI_Send(m, (int)len, t, 1, 42, MPI_COMM_WORLD);
            MT_CHECK(rc == MPI_SUCCESS, "cl_mem sender of a truncated message got class %d", p2p_class(rc));
            mt_fill(h, len, 303);
            rc = MPI_Send(h, (int)len, MPI_BYTE, 1, 43, MPI_COMM_WORLD);
            MT_CHECK(rc == MPI_SUCCESS, "host sender of a truncated message got class %d", p2p_class(rc));
            mt_fill(h, 3 * (size_t)CHUNK, 304);
            MT_CHECK(MPI_Send(h, 3 * CHUNK, MPI_BYTE, 1, 44, MPI_COMM_WORLD) == MPI_SUCCESS, "host send after both");
        } else if (mt_rank == 1) {
            memset(h, 0x5a, len);
            int rc = MPI_Recv(h, (int)room, MPI_BYTE, 0, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MT_CHECK(p2p_class(rc) == MPI_ERR_TRUNCATE, "host receive: class %d, expected MPI_ERR_TRUNCATE",
                     p2p_class(rc));
            P2P_CHECK_UNTOUCHED(h, len, 0x5a, "a truncated host receive's buffer");
            ocl_fill(&e, m, len, 0);
            rc = MPI_Recv(m, (int)room, t, 0, 43, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MT_CHECK(p2p_class(rc) == MPI_ERR_TRUNCATE, "cl_mem receive of a host message: class %d", p2p_class(rc));
            ocl_read(&e, m, 0, h, len);
            P2P_CHECK_UNTOUCHED(h, len, 0, "a truncated cl_mem receive's buffer");
            MT_CHECK(MPI_Recv(m, 3 * CHUNK, t, 0, 44, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS,
                     "cl_mem receive after both");
            ocl_read(&e, m, 0, h, 3 * (size_t)CHUNK);
            P2P_CHECK_BYTES(h, 3 * (size_t)CHUNK, 304, "host message after both truncations");
        }
    }

    MT_CASE(cases[c++]) {
        /* Into contiguous host memory, then into a strided host type longer than the
         * message (its last block is filled in part, as MPICH fills it): by rendezvous,
         * unpacked at the end, and as a payload. */
        const size_t len = 3 * (size_t)CHUNK + 3, small = 1500;
        const char *mode = shared_on ? "protocol.recv.shared" : "protocol.recv.pipeline";
        const long long taken0 = count(mode);
        if (mt_rank == 0) {
            mt_fill(h, len, 400);
            ocl_write(&e, m, 0, h, len);
            MT_CHECK(MPI_Send(m, (int)len, t, 1, 50, MPI_COMM_WORLD) == MPI_SUCCESS, "send to a host receiver");
            MT_CHECK(MPI_Send(m, (int)len, t, 1, 51, MPI_COMM_WORLD) == MPI_SUCCESS, "send to a strided receiver");
            MT_CHECK(MPI_Send(m, (int)small, t, 1, 52, MPI_COMM_WORLD) == MPI_SUCCESS, "small send, strided");
        } else if (mt_rank == 1) {
            memset(h, 0, len);
            MT_CHECK(MPI_Recv(h, (int)len, MPI_BYTE, 0, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS,
                     "host receive");
            P2P_CHECK_BYTES(h, len, 400, "message into host memory");
            MT_CHECK(count(mode) == taken0 + 1, "the host receive did not take %s", mode);
            /* Blocks of 1000 bytes, 2000 apart. */
            const int blocks = (int)((len + 999) / 1000) + 1;
            MPI_Datatype strided;
            MPI_Type_vector(blocks, 1000, 2000, MPI_BYTE, &strided);
            MPI_Type_commit(&strided);
            unsigned char *wide = p2p_alloc(2 * (size_t)blocks * 1000);
            const int tags[] = {51, 52};
            const size_t lens[] = {len, small};
            for (int k = 0; k < 2; ++k) {
                memset(wide, 0, 2 * (size_t)blocks * 1000);
                MPI_Status st;
                int rc = MPI_Recv(wide, 1, strided, 0, tags[k], MPI_COMM_WORLD, &st);
                MT_CHECK(rc == MPI_SUCCESS, "strided receive of %zu bytes: class %d", lens[k], p2p_class(rc));
                MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)lens[k], "strided receive: status says %d bytes, sent %zu",
                         p2p_count(&st, MPI_BYTE), lens[k]);
                for (size_t i = 0; i < lens[k]; i += 1000) {
                    const size_t n = lens[k] - i < 1000 ? lens[k] - i : 1000;
                    memcpy(h + i, wide + 2 * i, n);
                }
                P2P_CHECK_BYTES(h, lens[k], 400, "message into a strided host type");
                MT_CHECK(wide[2 * (lens[k] / 1000) * 1000 + lens[k] % 1000] == 0,
                         "a byte past the message's end was written (%zu bytes)", lens[k]);
            }
            free(wide);
            MPI_Type_free(&strided);
        }
    }

    MT_CASE(cases[c++]) {
        /* 1100 > kMaxPeerSegments (1024). With the cache off each transfer's pool, and so
         * its segment, is new and dies after it; a receiver that kept every mapping ran
         * out at the bound (and held each dead segment's pages). */
        enum { N = 1100 };
        const size_t len = (size_t)CHUNK + 1;
        const long long mapped0 = count("pool.peer_segments") - count("pool.peer_segments_unmapped");
        int failed = 0;
        for (int i = 0; i < N && !failed; ++i) {
            const int seed = 500 + i % 64;
            if (mt_rank == 0) {
                mt_fill(h, len, seed);
                ocl_write(&e, m, 0, h, len);
                failed = MPI_Send(m, (int)len, t, 1, 60, MPI_COMM_WORLD) != MPI_SUCCESS;
                MT_CHECK(!failed, "send %d of %d", i, N);
            } else if (mt_rank == 1) {
                failed = MPI_Recv(m, (int)len, t, 0, 60, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS;
                MT_CHECK(!failed, "receive %d of %d", i, N);
                if (!failed && (i % 64 == 0 || i == N - 1)) {
                    ocl_read(&e, m, 0, h, len);
                    P2P_CHECK_BYTES(h, len, seed, "message");
                }
            }
        }
        /* The byte bound alone (1 GiB of 4 MiB segments) keeps at most 256 unused ones. */
        const long long mapped = count("pool.peer_segments") - count("pool.peer_segments_unmapped") - mapped0;
        MT_CHECK(mapped <= 256, "rank %d holds %lld more peer segments than before", mt_rank, mapped);
    }

    MT_CASE(cases[c++]) {
        /* Host rendezvous sends (2 MiB and up): contiguous, then strided (packed first). */
        const size_t len = 3 * (size_t)CHUNK + 3, blocks = 3000, strided_len = blocks * 1000;
        const char *mode = mt_rank == 0 ? (shared_on ? "protocol.send.shared" : "protocol.send.pipeline")
                                        : (shared_on ? "protocol.recv.shared" : "protocol.recv.pipeline");
        const long long taken0 = count(mode), staged0 = count("protocol.send.host_chunk_staged");
        if (mt_rank == 0) {
            mt_fill(h, len, 600);
            MT_CHECK(MPI_Send(h, (int)len, MPI_BYTE, 1, 70, MPI_COMM_WORLD) == MPI_SUCCESS, "host send");
            MPI_Datatype strided;
            MPI_Type_vector((int)blocks, 1000, 2000, MPI_BYTE, &strided);
            MPI_Type_commit(&strided);
            unsigned char *wide = p2p_alloc(2 * strided_len);
            mt_fill(h, strided_len, 601);
            for (size_t i = 0; i < strided_len; i += 1000) memcpy(wide + 2 * i, h + i, 1000);
            MT_CHECK(MPI_Send(wide, 1, strided, 1, 71, MPI_COMM_WORLD) == MPI_SUCCESS, "strided host send");
            free(wide);
            MPI_Type_free(&strided);
        } else if (mt_rank == 1) {
            ocl_fill(&e, m, len, 0);
            MPI_Status st;
            MT_CHECK(MPI_Recv(m, (int)len, t, 0, 70, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "cl_mem receive");
            MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)len, "status says %d bytes", p2p_count(&st, MPI_BYTE));
            ocl_read(&e, m, 0, h, len);
            P2P_CHECK_BYTES(h, len, 600, "host message into a cl_mem");
            ocl_fill(&e, m, strided_len, 0);
            MT_CHECK(MPI_Recv(m, (int)strided_len, t, 0, 71, MPI_COMM_WORLD, &st) == MPI_SUCCESS,
                     "cl_mem receive of a strided message");
            ocl_read(&e, m, 0, h, strided_len);
            P2P_CHECK_BYTES(h, strided_len, 601, "strided host message into a cl_mem");
        }
        if (mt_rank <= 1)
            MT_CHECK(count(mode) == taken0 + 2, "rank %d: the two transfers did not take %s", mt_rank, mode);
        /* Through the pipeline the sender copies every chunk of 1 MiB or more but a lone
         * send's first into a huge-page slot: 2 of the first send's 4 (its 3-byte tail goes
         * as it is), 1 of the second's 3 (its tail is under 1 MiB). */
        const long long staged = count("protocol.send.host_chunk_staged") - staged0;
        const long long want = mt_rank == 0 && !shared_on ? 3 : 0;
        MT_CHECK(staged == want, "rank %d: %lld host chunks staged, not %lld", mt_rank, staged, want);
    }

    free(h);
    clReleaseMemObject(m);
    MPI_Type_free(&t);
    ocl_teardown(&e);
    return mt_finalize();
}
