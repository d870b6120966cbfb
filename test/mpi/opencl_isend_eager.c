/* Small nonblocking OpenCL sends go eager, like CUDA's: staged at the call into pinned
 * memory (after the user's queue), sent as the plain payload
 * (protocol.send.eager_device counts them), in order with everything else to the same
 * peer. Synchronous ones still complete only once matched. Built again with CACHE_OFF
 * (MPIACC_TEST_OPENCL_NO_CACHE=1): the staging slot's pool then belongs to the buffer's own
 * context, and must outlive the payload's send.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

static const char *cases[] = {
    "small_opencl_isends_go_eager_and_arrive_intact",
    "small_opencl_isend_copies_after_work_already_on_the_queue",
    "eager_opencl_isends_keep_order_with_large_and_blocking_sends_to_the_peer",
    "eager_opencl_isends_keep_order_into_wildcard_receives",
    "small_opencl_issend_goes_eager_and_completes_only_once_matched",
    "small_opencl_isend_then_barrier_while_the_peer_receives",
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* Sizes the eager path takes: up to MPIACC_DEVICE_ISEND_EAGER_MAX (64 KiB by default),
 * not the envelope's 200 bytes (an envelope-length payload always goes by RTS). */
static const size_t small_sizes[] = {8, 100, 1000, 4096, 16384, 65536};
enum { NSMALL = sizeof small_sizes / sizeof small_sizes[0] };

/* The library's staged_isend_eager_max (protocol/transfer.h), from the knobs in effect. */
static long long isend_eager_max(void) {
    const long long isend = mpiacc_knob_value("MPIACC_DEVICE_ISEND_EAGER_MAX");
    const long long blocking = mpiacc_knob_value("MPIACC_DEVICE_EAGER_MAX");
    const long long chunk = mpiacc_knob_value("MPIACC_CHUNK_SIZE");
    const long long rndv = mpiacc_knob_value("MPIACC_HOST_RNDV_THRESHOLD");
    long long payload = rndv == 0 ? (1LL << 62) : (rndv - 1 > blocking ? rndv - 1 : blocking);
    long long staged = chunk - 1 < payload ? chunk - 1 : payload;
    if (staged < blocking) staged = blocking;
    return isend < staged ? isend : staged;
}

static cl_mem filled(ocl_env *e, size_t n, uint64_t seed) {
    unsigned char *h = p2p_alloc(n);
    mt_fill(h, n, seed);
    cl_mem m = ocl_alloc(e, n);
    ocl_write(e, m, 0, h, n);
    free(h);
    return m;
}

/* Receives `n` bytes from rank 0 on `tag` into host memory and checks them. */
static void recv_check(size_t n, int source, int tag, uint64_t seed, const char *what) {
    unsigned char *h = p2p_alloc(n);
    MPI_Status st;
    MT_CHECK(MPI_Recv(h, (int)n, MPI_BYTE, source, tag, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "%s: recv", what);
    MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "%s: count %d, expected %zu", what, p2p_count(&st, MPI_BYTE), n);
    P2P_CHECK_BYTES(h, n, seed, what);
    free(h);
}

int main(int argc, char **argv) {
#ifdef CACHE_OFF
    setenv("MPIACC_TEST_OPENCL_NO_CACHE", "1", 1); /* read at MPI_Init */
#endif
    MT_INIT(&argc, &argv);
    ocl_env e = ocl_setup_or_skip(cases, NCASES);
    MPI_Datatype t = ocl_type(&e);
    const long long eager_max = isend_eager_max();

    MT_CASE(cases[0]) {
        const int tag = 100;
        if (mt_rank == 0) {
            cl_mem m[NSMALL];
            MPI_Request r[NSMALL];
            int expected = 0;
            const long long eager0 = mpiacc_counter_value("protocol.send.eager_device");
            for (int i = 0; i < NSMALL; ++i) {
                m[i] = filled(&e, small_sizes[i], p2p_seed(tag, 0, i));
                MPI_Isend(m[i], (int)small_sizes[i], t, 1, tag, MPI_COMM_WORLD, &r[i]);
                if ((long long)small_sizes[i] <= eager_max) ++expected;
            }
            const long long eager = mpiacc_counter_value("protocol.send.eager_device") - eager0;
            MT_CHECK(eager == expected, "%lld of %d small OpenCL Isends went eager", eager, expected);
            MT_CHECK(MPI_Waitall(NSMALL, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "waitall");
            for (int i = 0; i < NSMALL; ++i) clReleaseMemObject(m[i]);
        } else {
            for (int i = 0; i < NSMALL; ++i) recv_check(small_sizes[i], 0, tag, p2p_seed(tag, 0, i), "payload");
        }
    }

    MT_CASE(cases[1]) {
        /* The queue's own write is still pending (non-blocking) when MPI_Isend is called:
         * the staged copy must come after it, and the call must not wait for it. */
        const int tag = 110;
        const size_t n = 65536;
        if (mt_rank == 0) {
            unsigned char *h = p2p_alloc(n);
            mt_fill(h, n, p2p_seed(tag, 0, 0));
            cl_mem m = ocl_alloc(&e, n);
            ocl_fill(&e, m, n, 0x5a);
            const long long eager0 = mpiacc_counter_value("protocol.send.eager_device");
            clEnqueueWriteBuffer(e.queue, m, CL_FALSE, 0, n, h, 0, NULL, NULL);
            MPI_Request r;
            MPI_Isend(m, (int)n, t, 1, tag, MPI_COMM_WORLD, &r);
            MT_CHECK(mpiacc_counter_value("protocol.send.eager_device") - eager0 == 1, "the Isend did not go eager");
            MT_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait");
            clFinish(e.queue);
            clReleaseMemObject(m);
            free(h);
        } else {
            recv_check(n, 0, tag, p2p_seed(tag, 0, 0), "payload written on the queue before the call");
        }
    }

    MT_CASE(cases[2]) {
        /* One tag: small eager Isends between large (RTS/CTS) Isends, blocking host sends
         * and a synchronous send, all to rank 1, which receives them in call order. */
        const int tag = 120;
        enum { NMSG = 9 };
        const size_t sizes[NMSG] = {100, 1 << 20, 64, 8, 16384, 9 << 20, 1000, 4096, 65536};
        const int kinds[NMSG] = {0, 0, 1, 0, 0, 1, 2, 0, 0}; /* 0 OpenCL Isend, 1 host Send, 2 OpenCL Ssend */
        if (mt_rank == 0) {
            cl_mem m[NMSG] = {0};
            MPI_Request r[NMSG];
            for (int i = 0; i < NMSG; ++i) {
                r[i] = MPI_REQUEST_NULL;
                const uint64_t seed = p2p_seed(tag, 0, i);
                if (kinds[i] == 1) {
                    unsigned char *h = p2p_alloc(sizes[i]);
                    mt_fill(h, sizes[i], seed);
                    MT_CHECK(MPI_Send(h, (int)sizes[i], MPI_BYTE, 1, tag, MPI_COMM_WORLD) == MPI_SUCCESS, "send %d", i);
                    free(h);
                    continue;
                }
                m[i] = filled(&e, sizes[i], seed);
                if (kinds[i] == 2)
                    MT_CHECK(MPI_Ssend(m[i], (int)sizes[i], t, 1, tag, MPI_COMM_WORLD) == MPI_SUCCESS, "ssend %d", i);
                else
                    MPI_Isend(m[i], (int)sizes[i], t, 1, tag, MPI_COMM_WORLD, &r[i]);
            }
            MT_CHECK(MPI_Waitall(NMSG, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "waitall");
            for (int i = 0; i < NMSG; ++i)
                if (m[i]) clReleaseMemObject(m[i]);
        } else {
            /* Received into a buffer large enough for any of them: the count says which
             * message matched each receive. */
            const size_t cap = (size_t)9 << 20;
            unsigned char *h = p2p_alloc(cap);
            for (int i = 0; i < NMSG; ++i) {
                MPI_Status st;
                MPI_Recv(h, (int)cap, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
                MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)sizes[i], "receive %d got %d bytes, expected %zu", i,
                         p2p_count(&st, MPI_BYTE), sizes[i]);
                if (p2p_count(&st, MPI_BYTE) == (int)sizes[i])
                    P2P_CHECK_BYTES(h, sizes[i], p2p_seed(tag, 0, i), "payload");
            }
            free(h);
        }
    }

    MT_CASE(cases[3]) {
        /* A window of eager Isends on two tags into MPI_ANY_SOURCE/MPI_ANY_TAG receives:
         * they match in call order. */
        const int tag = 130;
        enum { NWIN = 24 };
        if (mt_rank == 0) {
            cl_mem m[NWIN];
            MPI_Request r[NWIN];
            for (int i = 0; i < NWIN; ++i) {
                const size_t n = small_sizes[i % NSMALL];
                m[i] = filled(&e, n, p2p_seed(tag, 0, i));
                MPI_Isend(m[i], (int)n, t, 1, tag + (i & 1), MPI_COMM_WORLD, &r[i]);
            }
            MT_CHECK(MPI_Waitall(NWIN, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "waitall");
            for (int i = 0; i < NWIN; ++i) clReleaseMemObject(m[i]);
        } else {
            unsigned char *h = p2p_alloc(65536);
            MPI_Request r[NWIN];
            unsigned char *bufs[NWIN];
            for (int i = 0; i < NWIN; ++i) {
                bufs[i] = p2p_alloc(65536);
                MPI_Irecv(bufs[i], 65536, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[i]);
            }
            MPI_Status st[NWIN];
            MT_CHECK(MPI_Waitall(NWIN, r, st) == MPI_SUCCESS, "waitall");
            for (int i = 0; i < NWIN; ++i) {
                const size_t n = small_sizes[i % NSMALL];
                MT_CHECK(st[i].MPI_SOURCE == 0 && st[i].MPI_TAG == tag + (i & 1), "receive %d: source %d tag %d", i,
                         st[i].MPI_SOURCE, st[i].MPI_TAG);
                MT_CHECK(p2p_count(&st[i], MPI_BYTE) == (int)n, "receive %d: count %d, expected %zu", i,
                         p2p_count(&st[i], MPI_BYTE), n);
                P2P_CHECK_BYTES(bufs[i], n, p2p_seed(tag, 0, i), "payload");
                free(bufs[i]);
            }
            free(h);
        }
    }

    MT_CASE(cases[4]) {
        const int tag = 140, go = 141;
        const size_t n = 100;
        if (mt_rank == 0) {
            cl_mem m = filled(&e, n, p2p_seed(tag, 0, 0));
            const long long eager0 = mpiacc_counter_value("protocol.send.eager_device");
            MPI_Request r;
            MPI_Issend(m, (int)n, t, 1, tag, MPI_COMM_WORLD, &r);
            MT_CHECK(mpiacc_counter_value("protocol.send.eager_device") - eager0 == 1, "the Issend did not go eager");
            /* Nothing is posted to match it yet: it must not complete. */
            int flag = 0;
            const double until = MPI_Wtime() + 0.3;
            while (!flag && MPI_Wtime() < until) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
            MT_CHECK(!flag, "MPI_Issend completed before any receive was posted");
            MPI_Send(NULL, 0, MPI_BYTE, 1, go, MPI_COMM_WORLD);
            if (!flag) MT_CHECK(p2p_test_until(&r, MPI_STATUS_IGNORE), "MPI_Issend never completed once matched");
            clReleaseMemObject(m);
        } else {
            MPI_Recv(NULL, 0, MPI_BYTE, 0, go, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            recv_check(n, 0, tag, p2p_seed(tag, 0, 0), "synchronous payload");
        }
    }

    MT_CASE(cases[5]) {
        /* The progress rule (DESIGN 2.6) for a payload still being staged: rank 0 blocks
         * in MPI_Barrier right after the Isend, rank 1 in MPI_Recv before its barrier. */
        const int tag = 150;
        const size_t n = 64;
        if (mt_rank == 0) {
            cl_mem m = filled(&e, n, p2p_seed(tag, 0, 0));
            MPI_Request r;
            MPI_Isend(m, (int)n, t, 1, tag, MPI_COMM_WORLD, &r);
            MPI_Barrier(MPI_COMM_WORLD);
            MT_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait");
            clReleaseMemObject(m);
        } else {
            recv_check(n, 0, tag, p2p_seed(tag, 0, 0), "payload before a barrier");
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }

    MPI_Type_free(&t);
    ocl_teardown(&e);
    return mt_finalize();
}
