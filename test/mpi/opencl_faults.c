/* Failures in the middle of a pipeline, made on purpose (MPIACC_FAULT_CHUNK_COPY): a
 * receiver whose chunk copy into a cl_mem fails drains the rest of the message and fails
 * alone; a sender whose chunk copy fails tells the receiver, and both fail; chunks still
 * in flight are retired before their staging slots go back; later transfers arrive intact.
 * Rank 0 sends, rank 1 receives; each message is 5 chunks of 2 MiB (the last 3 bytes).
 * Between cl_mems that is the SHARED mode (two ranks of one node); the build with
 * SHARED_STAGING_OFF runs the same cases through the pipeline.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

static const char *cases[] = {
    "receiver_chunk_copy_failure_drains_the_message_fails_the_receive_alone",
    "sender_chunk_copy_failure_mid_pipeline_fails_both_sides",
    "sender_failure_after_chunks_went_out_has_the_receiver_take_exactly_those",
    "sender_failure_after_chunks_went_out_into_host_memory_likewise",
};

enum { CHUNKS = 5 };
static const size_t N = ((size_t)(CHUNKS - 1) << 21) + 3;

static void expect_injected_error(int rc, const char *call, const char *who) {
    MT_CHECK(rc != MPI_SUCCESS && p2p_class(rc) == MPI_ERR_OTHER, "%s: class %d, expected MPI_ERR_OTHER", who,
             p2p_class(rc));
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    MT_CHECK(strstr(msg, call) != NULL, "%s: \"%s\" does not name %s", who, msg, call);
    MT_CHECK(strstr(msg, "on purpose") != NULL, "%s: \"%s\" does not give the injected cause", who, msg);
}

/* One message rank 0 -> rank 1, from a cl_mem into a cl_mem (or into host memory),
 * nonblocking; the return codes of the waits, and the bytes when both succeeded. */
static void transfer_to(ocl_env *e, cl_mem m, unsigned char *h, int tag, int into_host, int *send_rc,
                        int *recv_rc) {
    MPI_Datatype t = ocl_type(e);
    MPI_Request r;
    *send_rc = *recv_rc = MPI_SUCCESS;
    if (mt_rank == 0) {
        mt_fill(h, N, tag);
        ocl_write(e, m, 0, h, N);
        MT_CHECK(MPI_Isend(m, (int)N, t, 1, tag, MPI_COMM_WORLD, &r) == MPI_SUCCESS, "MPI_Isend failed at the call");
        *send_rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else if (mt_rank == 1) {
        memset(h, 0, N);
        int rc = into_host ? MPI_Irecv(h, (int)N, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r)
                           : MPI_Irecv(m, (int)N, t, 0, tag, MPI_COMM_WORLD, &r);
        MT_CHECK(rc == MPI_SUCCESS, "MPI_Irecv failed at the call");
        *recv_rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
        if (*recv_rc == MPI_SUCCESS) {
            if (!into_host) ocl_read(e, m, 0, h, N);
            P2P_CHECK_BYTES(h, N, tag, "message");
        }
    }
    MPI_Type_free(&t);
}

static void transfer(ocl_env *e, cl_mem m, unsigned char *h, int tag, int *send_rc, int *recv_rc) {
    transfer_to(e, m, h, tag, 0, send_rc, recv_rc);
}

/* Two good transfers after a failed one: the staging slots, the pipelines and MPICH's
 * matching are all in order again. */
static void later_transfers_arrive(ocl_env *e, cl_mem m, unsigned char *h, int tag) {
    for (int k = 0; k < 2; ++k) {
        int s, r;
        transfer(e, m, h, tag + k, &s, &r);
        MT_CHECK(s == MPI_SUCCESS && r == MPI_SUCCESS, "transfer %d after the failure: send %d, receive %d", k, s, r);
    }
}

/* Rank 0's copy of the fifth chunk fails: with 4 chunks in flight it is made only once a
 * chunk has gone out, so sends are posted. Its ABORT says how many: rank 1 takes exactly
 * those and drops them (into the cl_mem, or into the user's host buffer, whose content is
 * then undefined) and cancels the rest, so no send is left unmatched; both calls fail. */
static void sender_fails_after_chunks_went_out(ocl_env *e, cl_mem m, unsigned char *h, int tag, int into_host) {
    const char *into = into_host ? "into host memory" : "into a cl_mem";
    const long long drained = mpiacc_counter_value("protocol.recv.drained");
    int s, r;
    transfer_to(e, m, h, tag, into_host, &s, &r);
    if (mt_rank == 0) expect_injected_error(s, "MPI_Isend", "send whose fifth chunk copy failed");
    if (mt_rank == 1) {
        MT_CHECK(r != MPI_SUCCESS && p2p_class(r) == MPI_ERR_OTHER,
                 "the receive %s of a send that failed after chunks went out got class %d", into, p2p_class(r));
        MT_CHECK(mpiacc_counter_value("protocol.recv.drained") == drained + 1,
                 "the receive %s did not take the chunks the sender had posted", into);
    }
    later_transfers_arrive(e, m, h, tag + 10);
}

int main(int argc, char **argv) {
    /* Chunk copies are counted per process. Rank 1's second is chunk 2 of message 1.
     * Rank 0 copies 5 chunks a message: messages 1-3 are its copies 1-15, so copy 17 is
     * chunk 2 of message 4 (which stops there); messages 5-6 are copies 18-27, so copy 32
     * is chunk 5 of message 7; messages 8-9 are copies 33-42, so copy 47 is chunk 5 of
     * message 10. */
    setenv("MPIACC_FAULT_CHUNK_COPY", "1:2,0:17,0:32,0:47", 1);
    setenv("MPIACC_PIPELINE_DEPTH", "4", 1);
    setenv("MPIACC_CHUNK_SIZE", "2M", 1);
#ifdef SHARED_STAGING_OFF
    setenv("MPIACC_SHARED_STAGING", "0", 1);
#endif
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    ocl_env e = ocl_setup_or_skip(cases, ncases);
    cl_mem m = ocl_alloc(&e, N);
    unsigned char *h = p2p_alloc(N);
    int c = 0;

    MT_CASE(cases[c++]) {
        /* Message 1: rank 1's copy of its second chunk fails to start. The sender, which
         * cannot be stopped, completes; the receiver takes the other chunks and drops them. */
        const long long drained = mpiacc_counter_value("protocol.recv.drained");
        int s, r;
        transfer(&e, m, h, 4000, &s, &r);
        if (mt_rank == 0) MT_CHECK(s == MPI_SUCCESS, "the sender of a message its receiver failed to land got %d", s);
        if (mt_rank == 1) {
            expect_injected_error(r, "MPI_Irecv", "receive whose chunk copy failed");
            MT_CHECK(mpiacc_counter_value("protocol.recv.drained") == drained + 1, "the receive did not drain");
        }
        later_transfers_arrive(&e, m, h, 4010); /* messages 2 and 3 */
    }

    MT_CASE(cases[c++]) {
        /* Message 4: rank 0's copy of its second chunk fails to start while the first may
         * still be copying: that one is retired before its slot goes back. */
        const long long retired = mpiacc_counter_value("protocol.chunks_retired");
        int s, r;
        transfer(&e, m, h, 4100, &s, &r);
        if (mt_rank == 0) {
            expect_injected_error(s, "MPI_Isend", "send whose chunk copy failed");
            MT_CHECK(mpiacc_counter_value("protocol.chunks_retired") > retired,
                     "the first chunk of the failed send was not retired");
        }
        if (mt_rank == 1) {
            MT_CHECK(r != MPI_SUCCESS && p2p_class(r) == MPI_ERR_OTHER,
                     "the receive of a send that failed mid-pipeline got class %d", p2p_class(r));
        }
        later_transfers_arrive(&e, m, h, 4110);
    }

    MT_CASE(cases[c++]) {
        sender_fails_after_chunks_went_out(&e, m, h, 4200, 0); /* message 7, then 8 and 9 */
    }

    MT_CASE(cases[c++]) {
        sender_fails_after_chunks_went_out(&e, m, h, 4300, 1); /* message 10, then 11 and 12 */
    }
    free(h);
    clReleaseMemObject(m);
    ocl_teardown(&e);
    return mt_finalize();
}
