/* A CUDA IPC pull that fails to enqueue (MPIACC_FAULT_PULL, set here before MPI_Init to
 * "1:3,1:10": rank 1's 3rd and 10th pulls) fails its own receive alone, with
 * MPI_ERR_OTHER naming the call and the pull, whether it went in a batch with others
 * (a window, cudaMemcpyBatchAsync) or alone (a blocking receive); the sender's requests
 * complete, every other message arrives whole, and a clean window follows. Device to
 * device, 256 KiB messages (pulled, not staged), across GPUs where there are two.
 * MPIACC-TEST-RANKS: 2 */
#include "gpu_util.h"

#define W MPI_COMM_WORLD
#define N 8
#define LEN (256 * KiB)

/* Which of rank 1's pulls the fault knob names; counted from the first. */
#define FAULT_SPEC "1:3,1:10"

/* The error class of `code`, and whether its message names `call` and the pull fault. */
static void check_fault_code(int code, const char *call, const char *what) {
    int cls = MPI_SUCCESS, len = 0;
    char text[MPI_MAX_ERROR_STRING];
    MPI_Error_class(code, &cls);
    MPI_Error_string(code, text, &len);
    MT_CHECK(cls == MPI_ERR_OTHER, "%s: error class %d, not MPI_ERR_OTHER (%s)", what, cls, text);
    MT_CHECK(strstr(text, call) != NULL, "%s: the message does not name %s: %s", what, call, text);
    MT_CHECK(strstr(text, "MPIACC_FAULT_PULL") != NULL, "%s: the message does not name the failed pull: %s", what,
             text);
}

/* A window of N device messages that rank 1's first progress round finds all matched;
 * `faulty`: one of its pulls is to fail. Checks on both ranks. */
static void window(int tagbase, int faulty) {
    unsigned char *buf[N];
    MPI_Request q[N];
    MPI_Status sts[N];
    MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    MCK(MPI_Barrier(W));
    for (int i = 0; i < N; ++i) {
        buf[i] = gpu_malloc(LEN + GPU_GUARD);
        if (mt_rank == 0) {
            gpu_upload(buf[i], gpu_ref + gpu_offset(tagbase + i), LEN);
            MCK(MPI_Isend(buf[i], LEN, t, 1, tagbase + i, W, &q[i]));
        } else {
            gpu_memset(buf[i], GPU_SENTINEL, LEN + GPU_GUARD);
            MCK(MPI_Irecv(buf[i], LEN, t, 0, tagbase + i, W, &q[i]));
        }
    }
    if (mt_rank == 1) usleep(100 * 1000); /* rank 0's envelopes all queued before the next poll */
    for (int i = 0; i < N; ++i) sts[i].MPI_ERROR = MPI_SUCCESS;
    const int rc = MPI_Waitall(N, q, sts);
    if (mt_rank == 0) {
        MT_CHECK(rc == MPI_SUCCESS, "the sender's MPI_Waitall returned %d: a failed pull is the receiver's", rc);
    } else {
        int failed = 0;
        for (int i = 0; i < N; ++i) {
            if (rc == MPI_ERR_IN_STATUS && sts[i].MPI_ERROR != MPI_SUCCESS) {
                ++failed;
                check_fault_code(sts[i].MPI_ERROR, "MPI_Irecv", "the receive whose pull failed");
                continue;
            }
            GPU_CHECK_STATUS(sts[i], 0, tagbase + i, LEN, "window message %d", i);
            const unsigned char *got = gpu_download(buf[i], LEN + GPU_GUARD);
            GPU_CHECK_SAME(got, gpu_ref + gpu_offset(tagbase + i), LEN, "window message %d", i);
            GPU_CHECK_UNTOUCHED(got + LEN, GPU_GUARD, GPU_SENTINEL, "after window message %d", i);
        }
        if (faulty) {
            MT_CHECK(rc == MPI_ERR_IN_STATUS, "MPI_Waitall returned %d with a pull failing, not MPI_ERR_IN_STATUS", rc);
            MT_CHECK(failed == 1, "%d receives of the window failed, not exactly the one whose pull failed", failed);
        } else {
            MT_CHECK(rc == MPI_SUCCESS && failed == 0, "a clean window: MPI_Waitall returned %d, %d receives failed",
                     rc, failed);
        }
    }
    for (int i = 0; i < N; ++i) CK(cudaFree(buf[i]));
    MCK(MPI_Type_free(&t));
}

/* Rank 1's pulls 1-8: the window, whose 3rd pull fails. */
static void c_window_with_a_failed_pull(void) { window(100, 1); }

/* Rank 1's pulls 9-11: three blocking device receives; the 10th pull, the second
 * receive's, fails that MPI_Recv alone. */
static void c_blocking_receive_with_a_failed_pull(void) {
    MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    unsigned char *d = gpu_malloc(LEN + GPU_GUARD);
    for (int k = 0; k < 3; ++k) {
        const int tag = 200 + k;
        if (mt_rank == 0) {
            gpu_upload(d, gpu_ref + gpu_offset(tag), LEN);
            MCK(MPI_Send(d, LEN, t, 1, tag, W));
        } else {
            MPI_Status st;
            gpu_memset(d, GPU_SENTINEL, LEN + GPU_GUARD);
            const int rc = MPI_Recv(d, LEN, t, 0, tag, W, &st);
            if (k == 1) {
                MT_CHECK(rc != MPI_SUCCESS, "the receive whose pull failed returned MPI_SUCCESS");
                if (rc != MPI_SUCCESS) check_fault_code(rc, "MPI_Recv", "the blocking receive whose pull failed");
                continue;
            }
            MT_CHECK(rc == MPI_SUCCESS, "blocking receive %d returned %d", k, rc);
            GPU_CHECK_STATUS(st, 0, tag, LEN, "blocking receive %d", k);
            const unsigned char *got = gpu_download(d, LEN + GPU_GUARD);
            GPU_CHECK_SAME(got, gpu_ref + gpu_offset(tag), LEN, "blocking receive %d", k);
        }
    }
    CK(cudaFree(d));
    MCK(MPI_Type_free(&t));
}

/* Rank 1's pulls 12-19: nothing fails, everything arrives. */
static void c_clean_window_after_the_faults(void) { window(300, 0); }

static const gpu_case_t cases[] = {
    {"a_failed_pull_in_a_window_fails_that_receive_alone", c_window_with_a_failed_pull, 0},
    {"a_failed_pull_of_a_blocking_receive_fails_that_mpi_recv_alone", c_blocking_receive_with_a_failed_pull, 0},
    {"a_clean_window_after_the_failed_pulls_arrives_whole", c_clean_window_after_the_faults, 0},
};

int main(int argc, char **argv) {
    /* Before MPI_Init, which reads the knobs. */
    setenv("MPIACC_FAULT_PULL", FAULT_SPEC, 1);
    MT_INIT(&argc, &argv);
    gpu_setup(-1);
    if (!gpu_skip_why && !gpu_ipc_knob_on()) gpu_skip_why = "needs CUDA IPC (MPIACC_IPC=0 is set)";
    gpu_run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    gpu_teardown();
    return mt_finalize();
}
