/* Bounded resources (DESIGN 2.7): 1,000 concurrent 1 MiB MPI_Isend from a cl_mem with a
 * 16 MiB staging pool complete without deadlock, and the pool never grows past it; a
 * receiver admits a bounded number of pipeline transfers per sender.
 * Built twice: chunks copied out of the sender's shared slots (MPIACC_PIPELINE_DEPTH, 4
 * here), and, with NODE_PIPELINE, carried by MPICH as between nodes to this node's
 * receiver, which runs such pipelines 2 chunks deep, so that each transfer of several
 * chunks holds 2 of a budget of 2 x 2.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

#ifdef NODE_PIPELINE
enum { DEPTH = 2 };
#else
enum { DEPTH = 4 };
#endif
/* MPIACC_PIPELINE_TRANSFERS, set to 2 in main. */
enum { BUDGET = 2 * DEPTH };

/* Eight messages of n bytes from one cl_mem into host buffers, all eight envelopes at
 * the receiver before its first completion call; `expect_queued`: whether some transfer
 * must have waited for admission (protocol.pipeline.queued), or none may have. */
static void admission_window(ocl_env *e, int tag, size_t n, int expect_queued) {
    enum { W = 8 };
    MPI_Datatype t = ocl_type(e);
    cl_mem m = ocl_alloc(e, n);
    unsigned char *h[W];
    for (int i = 0; i < W; ++i) h[i] = p2p_alloc(n);
    MPI_Request r[W];
    if (mt_rank == 0) {
        mt_fill(h[0], n, 9);
        ocl_write(e, m, 0, h[0], n);
        for (int i = 0; i < W; ++i) MPI_Isend(m, (int)n, t, 1, tag, MPI_COMM_WORLD, &r[i]);
        MPI_Send(NULL, 0, MPI_BYTE, 1, tag + 1, MPI_COMM_WORLD);
        MT_CHECK(MPI_Waitall(W, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "sender waitall");
    } else if (mt_rank == 1) {
        const long long queued = mpiacc_counter_value("protocol.pipeline.queued");
        for (int i = 0; i < W; ++i) MPI_Irecv(h[i], (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r[i]);
        /* All eight envelopes are here before the first completion call looks. */
        int probe_flag = 0;
        while (!probe_flag) MPI_Iprobe(0, tag + 1, MPI_COMM_WORLD, &probe_flag, MPI_STATUS_IGNORE);
        MPI_Recv(NULL, 0, MPI_BYTE, 0, tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Status st[W];
        MT_CHECK(MPI_Waitall(W, r, st) == MPI_SUCCESS, "receiver waitall");
        for (int i = 0; i < W; ++i) {
            P2P_CHECK_BYTES(h[i], n, 9, "message");
            MT_CHECK(p2p_count(&st[i], MPI_BYTE) == (int)n, "message %d: %d bytes", i, p2p_count(&st[i], MPI_BYTE));
        }
        const long long waited = mpiacc_counter_value("protocol.pipeline.queued") - queued;
        if (expect_queued)
            MT_CHECK(waited > 0, "no transfer of %zu bytes waited for admission", n);
        else
            MT_CHECK(waited == 0, "%lld transfers of %zu bytes waited for admission", waited, n);
    }
    for (int i = 0; i < W; ++i) free(h[i]);
    clReleaseMemObject(m);
    MPI_Type_free(&t);
}

/* Pipeline envelopes this rank has taken, in either mode this test is built for; each
 * has had its admission decided (the budget taken, or queued) by the time it counts. */
static long long pipeline_envelopes(void) {
    return mpiacc_counter_value("protocol.recv.pipeline") + mpiacc_counter_value("protocol.recv.shared");
}

/* Tests `r` (while `*done` is 0) until `target` pipeline envelopes have been taken;
 * whether they were within 10 s. */
static int take_envelopes(MPI_Request *r, int *done, long long target) {
    for (double t0 = MPI_Wtime(); MPI_Wtime() - t0 < 10.0;) {
        if (!*done) MPI_Test(r, done, MPI_STATUS_IGNORE);
        if (pipeline_envelopes() >= target) return 1;
    }
    return 0;
}

/* BUDGET - DEPTH + 1 one-chunk sends wait for a user event, so their receives stay
 * admitted (5 of the budget of 8 chunks at depth 4); a two-chunk receive (a share of
 * DEPTH) then waits, and a one-chunk receive posted once it waits must wait behind it
 * rather than take the chunk left, until the event is set. The held sends come from a
 * second context, so that their copies, queued behind the event on MPI-ACC's queue for
 * that context, hold up nothing of the other two sends on the sender. */
static void single_does_not_pass_waiting_several(ocl_env *e, int tag) {
    enum { HELD = BUDGET - DEPTH + 1 };
    const size_t one = (1 << 20) + 3, two = (2 << 20) + 3;
    MPI_Datatype t = ocl_type(e);
    unsigned char *h[HELD + 2];
    for (int i = 0; i < HELD + 2; ++i) h[i] = p2p_alloc(two);
    MPI_Request r[HELD + 2];
    if (mt_rank == 0) {
        ocl_env other = ocl_setup();
        MT_CHECK(other.ok, "no second OpenCL context");
        cl_mem m = ocl_alloc(e, two), held = ocl_alloc(&other, one);
        mt_fill(h[0], two, 11);
        ocl_write(e, m, 0, h[0], two);
        ocl_write(&other, held, 0, h[0], one);
        cl_int err;
        cl_event gate = clCreateUserEvent(other.context, &err);
        MPI_Datatype gated = ocl_type(&other);
        MPI_Type_set_attr(gated, MPIX_ACC_EVENT, (void *)gate);
        for (int i = 0; i < HELD; ++i) MPI_Isend(held, (int)one, gated, 1, tag, MPI_COMM_WORLD, &r[i]);
        MPI_Isend(m, (int)two, t, 1, tag + 1, MPI_COMM_WORLD, &r[HELD]);
        MPI_Isend(m, (int)one, t, 1, tag + 2, MPI_COMM_WORLD, &r[HELD + 1]);
        char go;
        MPI_Recv(&go, 1, MPI_CHAR, 1, tag + 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        clSetUserEventStatus(gate, CL_COMPLETE);
        MT_CHECK(MPI_Waitall(HELD + 2, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "sender waitall");
        MPI_Type_free(&gated);
        clReleaseEvent(gate);
        clReleaseMemObject(held);
        clReleaseMemObject(m);
        ocl_teardown(&other);
    } else if (mt_rank == 1) {
        /* Each receive is posted once the envelopes of the ones before it have been taken
         * and admitted (or queued): counted, not waited for by the clock, since the sender
         * may take longer than any fixed wait to create its second context (NVIDIA's
         * OpenCL), and a later receive must not find its envelope first. */
        const long long env0 = pipeline_envelopes(), queued0 = mpiacc_counter_value("protocol.pipeline.queued");
        int flag = 0, two_done = 0, passed = 0;
        for (int i = 0; i < HELD; ++i) MPI_Irecv(h[i], (int)one, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r[i]);
        MT_CHECK(take_envelopes(&r[0], &flag, env0 + HELD), "the %d held sends' envelopes were not taken in 10 s",
                 (int)HELD);
        MT_CHECK(mpiacc_counter_value("protocol.pipeline.queued") == queued0, "a held receive waited for admission");
        for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 0.2;) MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
        MT_CHECK(!flag, "a held receive completed before the event was set");
        MPI_Irecv(h[HELD], (int)two, MPI_BYTE, 0, tag + 1, MPI_COMM_WORLD, &r[HELD]);
        MT_CHECK(take_envelopes(&r[HELD], &two_done, env0 + HELD + 1), "the two-chunk envelope was not taken in 10 s");
        MT_CHECK(mpiacc_counter_value("protocol.pipeline.queued") == queued0 + 1,
                 "the two-chunk receive was admitted with %d admitted receives held by the event", (int)HELD);
        for (double t0 = MPI_Wtime(); !two_done && MPI_Wtime() - t0 < 0.2;)
            MPI_Test(&r[HELD], &two_done, MPI_STATUS_IGNORE);
        MT_CHECK(!two_done, "the two-chunk receive completed with %d admitted receives held by the event", (int)HELD);
        MPI_Irecv(h[HELD + 1], (int)one, MPI_BYTE, 0, tag + 2, MPI_COMM_WORLD, &r[HELD + 1]);
        MT_CHECK(take_envelopes(&r[HELD + 1], &passed, env0 + HELD + 2),
                 "the one-chunk envelope was not taken in 10 s");
        MT_CHECK(mpiacc_counter_value("protocol.pipeline.queued") == queued0 + 2,
                 "a one-chunk receive was admitted past the waiting two-chunk one");
        /* A second is ample for the unheld one-chunk transfer to finish if it is admitted. */
        for (double t0 = MPI_Wtime(); !passed && MPI_Wtime() - t0 < 1.0;)
            MPI_Test(&r[HELD + 1], &passed, MPI_STATUS_IGNORE);
        MT_CHECK(!passed, "a one-chunk receive passed the waiting two-chunk one");
        char go = 1;
        MPI_Send(&go, 1, MPI_CHAR, 0, tag + 3, MPI_COMM_WORLD);
        MPI_Status st[HELD + 2];
        MT_CHECK(MPI_Waitall(HELD + 2, r, st) == MPI_SUCCESS, "receiver waitall");
        for (int i = 0; i < HELD + 2; ++i) {
            const size_t n = i == HELD ? two : one;
            P2P_CHECK_BYTES(h[i], n, 11, "message");
            if ((i == HELD && two_done) || (i == HELD + 1 && passed)) continue; /* its status went to MPI_Test */
            MT_CHECK(p2p_count(&st[i], MPI_BYTE) == (int)n, "message %d: %d bytes", i, p2p_count(&st[i], MPI_BYTE));
        }
    }
    for (int i = 0; i < HELD + 2; ++i) free(h[i]);
    MPI_Type_free(&t);
}

int main(int argc, char **argv) {
    /* Knobs are read at MPI_Init. The admission cases count against two transfers'
     * budget (BUDGET chunks), whatever the defaults. */
    setenv("MPIACC_POOL_SIZE", "16M", 1);
    setenv("MPIACC_PIPELINE_TRANSFERS", "2", 1);
    setenv("MPIACC_CHUNK_SIZE", "2M", 1);
    setenv("MPIACC_PIPELINE_DEPTH", "4", 1);
#ifdef NODE_PIPELINE
    setenv("MPIACC_SHARED_STAGING", "0", 1);
#endif
    MT_INIT(&argc, &argv);
    const char *names[] = {"thousand_concurrent_1mib_isends_through_16mib_pool_complete",
                           "window_of_eight_two_chunk_pipeline_receives_queues_and_all_arrive",
#ifdef NODE_PIPELINE
                           "window_of_eight_one_chunk_node_pipeline_receives_queues_at_depth_2_and_all_arrive",
#else
                           "window_of_eight_one_chunk_pipeline_receives_runs_at_once_and_all_arrive",
#endif
                           "one_chunk_receive_waits_behind_a_waiting_two_chunk_one"};
#ifdef NODE_PIPELINE
    /* Its depths are those of a pipeline inside one node. */
    if (!mt_one_host()) {
        for (int i = 0; i < 4; ++i) mt_skip(names[i], "the ranks are on different hosts: no pipeline of one node");
        return mt_finalize();
    }
#endif
    ocl_env e = ocl_setup_or_skip(names, 4);
    MT_CASE(names[0]) {
        enum { N = 1000 };
        const size_t n = 1 << 20;
        const int tag = 5000;
        MPI_Datatype t = ocl_type(&e);
        cl_mem m = ocl_alloc(&e, n);
        unsigned char *h = p2p_alloc(n);
        if (mt_rank == 0) {
            mt_fill(h, n, 5);
            ocl_write(&e, m, 0, h, n);
            MPI_Request *r = malloc(N * sizeof *r);
            for (int i = 0; i < N; ++i) MPI_Isend(m, (int)n, t, 1, tag, MPI_COMM_WORLD, &r[i]);
            int rc = MPI_Waitall(N, r, MPI_STATUSES_IGNORE);
            MT_CHECK(rc == MPI_SUCCESS, "waitall %d", rc);
            free(r);
        } else if (mt_rank == 1) {
            /* The receiver stages into its own cl_mem too, through its own 16 MiB pool. */
            for (int i = 0; i < N; ++i) {
                MPI_Status st;
                MPI_Recv(m, (int)n, t, 0, tag, MPI_COMM_WORLD, &st);
                if (i % 97 == 0 || i == N - 1) {
                    ocl_read(&e, m, 0, h, n);
                    P2P_CHECK_BYTES(h, n, 5, "message");
                }
                MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "message %d: %d bytes", i, p2p_count(&st, MPI_BYTE));
            }
        }
        /* 16 MiB of slots from 4 MiB segments: at most 4 pinned allocations. */
        MT_CHECK(mpiacc_counter_value("opencl.pinned.alloc") <= 4, "%lld pinned allocations for a 16 MiB pool",
                 mpiacc_counter_value("opencl.pinned.alloc"));
        free(h);
        clReleaseMemObject(m);
        MPI_Type_free(&t);
    }
    /* cl_mem -> host is a pipeline transfer. The receiver admits per sender
     * MPIACC_PIPELINE_TRANSFERS (set to 2 here) transfers of several chunks, or BUDGET of
     * one chunk; the rest wait before their CTS. Eight one-chunk receives fit a budget of
     * 8 (depth 4), and queue at depth 2. */
    MT_CASE(names[1]) admission_window(&e, 5100, (2 << 20) + 3, 1);
    MT_CASE(names[2]) admission_window(&e, 5200, (1 << 20) + 3, BUDGET < 8);
    MT_CASE(names[3]) single_does_not_pass_waiting_several(&e, 5300);
    ocl_teardown(&e);
    return mt_finalize();
}
