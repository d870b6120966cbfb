/* A nonblocking device send of one chunk (MPIACC_COPY_AHEAD): its copy into a staging slot
 * starts with its RTS and becomes the transfer's one chunk at the CTS. Cases: the copy
 * failing (MPIACC_FAULT_CHUNK_COPY) fails the send at its CTS and the receive with it;
 * one-chunk sends are copied ahead and arrive intact, into a cl_mem and into host memory;
 * a send of more than one chunk is not; a truncating receive leaves the copy unused and
 * still gets MPI_ERR_TRUNCATE with the bytes that fit; a send cancelled after its copy ahead
 * started completes, cancelled (once the copy has ended) or received whole; and a window larger than half the staging
 * pool copies ahead at most half of it and still arrives whole.
 * Between cl_mems on one node that is the SHARED mode; the build with SHARED_STAGING_OFF
 * runs the same cases through the pipeline.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

static const char *cases[] = {
    "copy_ahead_that_fails_fails_the_send_at_its_cts_and_the_receive",
    "one_chunk_isends_are_copied_ahead_and_arrive_intact",
    "a_send_of_more_than_one_chunk_is_not_copied_ahead",
    "a_truncating_receive_leaves_the_copy_ahead_unused",
    "a_send_cancelled_after_its_copy_ahead_completes_either_way",
    "a_window_larger_than_half_the_pool_copies_ahead_at_most_half",
};

static const size_t MiB = (size_t)1 << 20;
enum { POOL_SLOTS = 8, WINDOW = 12 };

static long long copied_ahead(void) { return mpiacc_counter_value("protocol.send.copied_ahead"); }

/* Rank 0 sends `n` bytes of `m` (nonblocking), rank 1 receives them into `m` or, with
 * `into_host`, into `h`; both check what they can. Returns this rank's wait code. */
static int one_message(ocl_env *e, cl_mem m, unsigned char *h, size_t n, int tag, int into_host) {
    MPI_Datatype t = ocl_type(e);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    if (mt_rank == 0) {
        mt_fill(h, n, tag);
        ocl_write(e, m, 0, h, n);
        MT_CHECK(MPI_Isend(m, (int)n, t, 1, tag, MPI_COMM_WORLD, &r) == MPI_SUCCESS, "MPI_Isend failed at the call");
        rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else if (mt_rank == 1) {
        memset(h, 0, n);
        MPI_Status st;
        MT_CHECK((into_host ? MPI_Irecv(h, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r)
                            : MPI_Irecv(m, (int)n, t, 0, tag, MPI_COMM_WORLD, &r)) == MPI_SUCCESS,
                 "MPI_Irecv failed at the call");
        rc = MPI_Wait(&r, &st);
        if (rc == MPI_SUCCESS) {
            MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "received %d bytes of %zu", p2p_count(&st, MPI_BYTE), n);
            if (!into_host) ocl_read(e, m, 0, h, n);
            P2P_CHECK_BYTES(h, n, tag, into_host ? "one-chunk message into host memory" : "one-chunk message");
        }
    }
    MPI_Type_free(&t);
    return rc;
}

int main(int argc, char **argv) {
    /* Rank 0's first chunk copy is the copy ahead of the first case's send. */
    setenv("MPIACC_FAULT_CHUNK_COPY", "0:1", 1);
    setenv("MPIACC_CHUNK_SIZE", "1M", 1);
    setenv("MPIACC_POOL_SIZE", "8M", 1); /* POOL_SLOTS slots of 1 MiB */
    setenv("MPIACC_COPY_AHEAD", "1", 1);
#ifdef SHARED_STAGING_OFF
    setenv("MPIACC_SHARED_STAGING", "0", 1);
#endif
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    ocl_env e = ocl_setup_or_skip(cases, ncases);
    const size_t big = 3 * MiB + 5;
    cl_mem m = ocl_alloc(&e, big);
    unsigned char *h = p2p_alloc(big);
    int c = 0;

    MT_CASE(cases[c++]) {
        const int rc = one_message(&e, m, h, 256 * 1024, 100, 0);
        if (mt_rank == 0) {
            MT_CHECK(rc != MPI_SUCCESS && p2p_class(rc) == MPI_ERR_OTHER,
                     "the send got class %d, expected MPI_ERR_OTHER", p2p_class(rc));
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            MT_CHECK(strstr(msg, "MPI_Isend") && strstr(msg, "on purpose"),
                     "\"%s\" names neither the call nor the cause", msg);
        } else {
            MT_CHECK(rc != MPI_SUCCESS, "the receive of a send whose copy failed succeeded");
        }
        MT_CHECK(one_message(&e, m, h, 256 * 1024, 101, 0) == MPI_SUCCESS, "the transfer after the failure failed");
    }

    MT_CASE(cases[c++]) {
        static const size_t sizes[] = {65 * 1024 + 3, 256 * 1024, 1024 * 1024};
        const long long before = copied_ahead();
        int n = 0;
        for (int into_host = 0; into_host < 2; ++into_host)
            for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i, ++n)
                MT_CHECK(one_message(&e, m, h, sizes[i], 200 + n, into_host) == MPI_SUCCESS,
                         "message of %zu bytes (%s)", sizes[i], into_host ? "into host memory" : "into a cl_mem");
        if (mt_rank == 0)
            MT_CHECK(copied_ahead() - before == n, "%lld of %d one-chunk sends were copied ahead",
                     copied_ahead() - before, n);
    }

    MT_CASE(cases[c++]) {
        const long long before = copied_ahead();
        MT_CHECK(one_message(&e, m, h, big, 300, 0) == MPI_SUCCESS, "message of %zu bytes", big);
        if (mt_rank == 0)
            MT_CHECK(copied_ahead() == before, "a send of four chunks was copied ahead (%lld)",
                     copied_ahead() - before);
    }

    MT_CASE(cases[c++]) {
        const size_t n = 512 * 1024, fits = 100 * 1024 + 1;
        const long long unused = mpiacc_counter_value("protocol.send.copy_ahead_unused");
        MPI_Datatype t = ocl_type(&e);
        MPI_Request r;
        if (mt_rank == 0) {
            mt_fill(h, n, 400);
            ocl_write(&e, m, 0, h, n);
            MT_CHECK(MPI_Isend(m, (int)n, t, 1, 400, MPI_COMM_WORLD, &r) == MPI_SUCCESS,
                     "MPI_Isend failed at the call");
            MT_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS, "the send into a short receive failed");
            MT_CHECK(mpiacc_counter_value("protocol.send.copy_ahead_unused") == unused + 1,
                     "the copy ahead of a truncated send was not left unused");
        } else if (mt_rank == 1) {
            ocl_fill(&e, m, n, 0xEE);
            MPI_Status st;
            MT_CHECK(MPI_Irecv(m, (int)fits, t, 0, 400, MPI_COMM_WORLD, &r) == MPI_SUCCESS,
                     "MPI_Irecv failed at the call");
            const int rc = MPI_Wait(&r, &st);
            MT_CHECK(p2p_class(rc) == MPI_ERR_TRUNCATE, "a short receive got class %d, expected MPI_ERR_TRUNCATE",
                     p2p_class(rc));
            ocl_read(&e, m, 0, h, n);
            P2P_CHECK_BYTES(h, fits, 400, "the part of a truncated message that fits");
            P2P_CHECK_UNTOUCHED(h + fits, n - fits, 0xEE, "past a truncated receive");
        }
        MPI_Type_free(&t);
        MT_CHECK(one_message(&e, m, h, 256 * 1024, 401, 0) == MPI_SUCCESS, "the transfer after the truncation failed");
    }

    MT_CASE(cases[c++]) {
        /* MPICH may refuse to cancel a send whose envelope already reached the receiver
         * (over UCX it does): rank 1's receive, posted after the cancel, then takes it,
         * and it must arrive whole; else that receive is cancelled in turn. */
        const size_t n = 256 * 1024;
        MPI_Datatype t = ocl_type(&e);
        MPI_Request r;
        MPI_Status st;
        int cancelled = 0;
        if (mt_rank == 0) {
            const long long before = copied_ahead();
            mt_fill(h, n, 500);
            ocl_write(&e, m, 0, h, n);
            MT_CHECK(MPI_Isend(m, (int)n, t, 1, 500, MPI_COMM_WORLD, &r) == MPI_SUCCESS,
                     "MPI_Isend failed at the call");
            MT_CHECK(MPI_Cancel(&r) == MPI_SUCCESS, "MPI_Cancel failed");
            MPI_Barrier(MPI_COMM_WORLD);
            MT_CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS, "the wait of a cancelled send failed");
            MPI_Test_cancelled(&st, &cancelled);
            if (cancelled) MT_CHECK(copied_ahead() == before, "a cancelled send's copy ahead was counted as taken");
            printf("# the send was %s\n", cancelled ? "cancelled" : "not cancelled (it had reached rank 1)");
            MPI_Bcast(&cancelled, 1, MPI_INT, 0, MPI_COMM_WORLD);
        } else {
            memset(h, 0, n);
            MPI_Barrier(MPI_COMM_WORLD);
            if (mt_rank == 1)
                MT_CHECK(MPI_Irecv(m, (int)n, t, 0, 500, MPI_COMM_WORLD, &r) == MPI_SUCCESS,
                         "MPI_Irecv failed at the call");
            MPI_Bcast(&cancelled, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (mt_rank == 1 && cancelled) {
                MPI_Cancel(&r);
                MPI_Wait(&r, &st);
                int gone = 0;
                MPI_Test_cancelled(&st, &gone);
                MT_CHECK(gone, "a receive for a cancelled send was matched");
            } else if (mt_rank == 1) {
                MT_CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS, "the receive of a send that was not cancelled failed");
                ocl_read(&e, m, 0, h, n);
                P2P_CHECK_BYTES(h, n, 500, "a send that was not cancelled");
            }
        }
        MPI_Type_free(&t);
        MT_CHECK(one_message(&e, m, h, n, 501, 0) == MPI_SUCCESS, "the transfer after the cancel failed");
    }

    MT_CASE(cases[c++]) {
        /* WINDOW sends of 256 KiB, one slot each, posted before rank 1 posts any receive. */
        const size_t n = 256 * 1024;
        MPI_Datatype t = ocl_type(&e);
        cl_mem ms[WINDOW];
        MPI_Request r[WINDOW];
        unsigned char *hs = p2p_alloc(n * WINDOW);
        for (int i = 0; i < WINDOW; ++i) ms[i] = ocl_alloc(&e, n);
        const long long before = copied_ahead();
        if (mt_rank == 0) {
            for (int i = 0; i < WINDOW; ++i) {
                mt_fill(hs + i * n, n, 600 + i);
                ocl_write(&e, ms[i], 0, hs + i * n, n);
                MT_CHECK(MPI_Isend(ms[i], (int)n, t, 1, 600 + i, MPI_COMM_WORLD, &r[i]) == MPI_SUCCESS,
                         "MPI_Isend %d failed at the call", i);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            MT_CHECK(MPI_Waitall(WINDOW, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "the window's sends failed");
            const long long taken = copied_ahead() - before;
            MT_CHECK(taken >= 1 && taken <= POOL_SLOTS / 2,
                     "%lld of a window of %d sends were copied ahead, expected 1 to %d (half the pool)", taken, WINDOW,
                     POOL_SLOTS / 2);
        } else if (mt_rank == 1) {
            MPI_Barrier(MPI_COMM_WORLD);
            for (int i = 0; i < WINDOW; ++i)
                MT_CHECK(MPI_Irecv(ms[i], (int)n, t, 0, 600 + i, MPI_COMM_WORLD, &r[i]) == MPI_SUCCESS,
                         "MPI_Irecv %d failed at the call", i);
            MT_CHECK(MPI_Waitall(WINDOW, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "the window's receives failed");
            for (int i = 0; i < WINDOW; ++i) {
                ocl_read(&e, ms[i], 0, hs + i * n, n);
                P2P_CHECK_BYTES(hs + i * n, n, 600 + i, "a message of the window");
            }
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
        }
        for (int i = 0; i < WINDOW; ++i) clReleaseMemObject(ms[i]);
        free(hs);
        MPI_Type_free(&t);
    }
    free(h);
    clReleaseMemObject(m);
    ocl_teardown(&e);
    return mt_finalize();
}
