/* A queue pair that fails under a transfer (the soft-RoCE VM, maint/rxe-vm): rank 0's
 * first RDMA write names a wrong rkey (MPIACC_FAULT_RKEY=0:1), so the write completes in
 * error; the send and the receive both fail with MPI_ERR_OTHER and a message that says
 * RDMA failed, neither hangs, and later transfers between the two ranks go over the mpi
 * netmod, intact, both ways. On one host, or with no RDMA device, every case skips, by
 * name.
 * MPIACC-TEST-RANKS: 2 */

#include "opencl_util.h"

static const char *cases[] = {
    "a_wrong_rkey_fails_the_send_and_the_receive_with_a_message_and_no_hang",
    "transfers_after_the_queue_pair_failed_go_over_mpi_intact_both_ways",
};

static const size_t N = ((size_t)4 << 20) + 3; /* several chunks */

static void expect_rdma_error(int rc, const char *who) {
    MT_CHECK(rc != MPI_SUCCESS && p2p_class(rc) == MPI_ERR_OTHER, "%s: class %d, expected MPI_ERR_OTHER", who,
             p2p_class(rc));
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    MT_CHECK(strstr(msg, "RDMA") != NULL, "%s: \"%s\" does not say that RDMA failed", who, msg);
    printf("# %s: %s\n", who, msg);
}

int main(int argc, char **argv) {
    setenv("MPIACC_FAULT_RKEY", "0:1", 1);
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    char mine[MPI_MAX_PROCESSOR_NAME] = {0}, other[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(mine, &len);
    MPI_Sendrecv(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1 - mt_rank, 0, other, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                 1 - mt_rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ocl_env e = ocl_setup();
    const char *knob = getenv("MPIACC_TEST_IB");
    const char *why = strcmp(mine, other) == 0           ? "both ranks on one host (run in the soft-RoCE VM)"
                      : !p2p_rdma_device_here()          ? "no RDMA device on this host (run in the soft-RoCE VM)"
                      : !ocl_all_ok(&e)                  ? "no usable OpenCL platform"
                      : knob && strcmp(knob, "off") == 0 ? "the verbs netmod is off (MPIACC_TEST_IB=off)"
                                                         : NULL;
    if (why) {
        for (int i = 0; i < ncases; ++i) mt_skip(cases[i], why);
        ocl_teardown(&e);
        return mt_finalize();
    }
    MPI_Datatype t = ocl_type(&e);
    cl_mem m = ocl_alloc(&e, N);
    unsigned char *h = p2p_alloc(N);
    MT_CASE(cases[0]) {
        const double t0 = MPI_Wtime();
        int rc;
        if (mt_rank == 0) {
            mt_fill(h, N, 5);
            ocl_write(&e, m, 0, h, N);
            rc = MPI_Send(m, (int)N, t, 1, 5, MPI_COMM_WORLD);
            expect_rdma_error(rc, "rank 0's send");
            MT_CHECK(mpiacc_counter_value("ib.qp_errors") >= 1, "no queue pair error counted");
        } else {
            rc = MPI_Recv(m, (int)N, t, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            expect_rdma_error(rc, "rank 1's receive");
        }
        MT_CHECK(MPI_Wtime() - t0 < 60.0, "the failure took %.0f s to be reported", MPI_Wtime() - t0);
    }
    MT_CASE(cases[1]) {
        const long long messages =
            mpiacc_counter_value("netmod.mpi.chunk_sends") + mpiacc_counter_value("netmod.mpi.chunk_receives");
        for (int src = 0; src < 2; ++src) {
            if (mt_rank == src) {
                mt_fill(h, N, 6 + src);
                ocl_write(&e, m, 0, h, N);
                MT_CHECK(MPI_Send(m, (int)N, t, 1 - src, 6, MPI_COMM_WORLD) == MPI_SUCCESS, "send from %d", src);
            } else {
                ocl_fill(&e, m, N, 0);
                MT_CHECK(MPI_Recv(m, (int)N, t, src, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS,
                         "receive from %d", src);
                ocl_read(&e, m, 0, h, N);
                P2P_CHECK_BYTES(h, N, 6 + src, src ? "1 to 0" : "0 to 1");
            }
        }
        MT_CHECK(mpiacc_counter_value("netmod.mpi.chunk_sends") + mpiacc_counter_value("netmod.mpi.chunk_receives") >
                     messages,
                 "rank %d: the transfers after the failure did not go over mpi", mt_rank);
    }
    MPI_Type_free(&t);
    clReleaseMemObject(m);
    free(h);
    ocl_teardown(&e);
    return mt_finalize();
}
