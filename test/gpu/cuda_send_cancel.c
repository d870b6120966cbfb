/* MPI_Cancel and MPI_Request_free of CUDA sends nothing has matched yet, at 100 B, 1 MiB
 * and 16 MiB: the CUDA mirror of test/mpi/p2p_send_cancel.c (which runs the host and
 * OpenCL cases on PoCL). After a cancel, MPI_Wait returns; a send reported cancelled
 * never arrives, one reported not cancelled arrives intact though the device buffer was
 * overwritten after the wait; a later message on the same tag shows nothing is lost or
 * reordered. A send offered for an IPC pull (a peer on this node, MPIACC_IPC on) cannot
 * complete before it matches, since the peer reads the user's buffer itself: after the
 * cancel it stays pending until received, as before. A freed send still arrives when the
 * receive comes later.
 * MPIACC-TEST-RANKS: 2 */
#include "gpu_util.h"

#define FOLLOW_UP_BYTES 64
enum { REPORTED_NOT_CANCELLED = 0, REPORTED_CANCELLED = 1, PENDING_UNTIL_MATCHED = 2 };

static void cancel_size(size_t n, int tag) {
    if (mt_rank == 0) {
        unsigned char *h = malloc(n);
        if (!h) gpu_die(__FILE__, __LINE__, "out of host memory");
        mt_fill(h, n, (uint64_t)tag);
        void *d = gpu_malloc(n);
        gpu_upload(d, h, n);
        MPI_Datatype t = gpu_tagged(MPI_BYTE, MPIX_ACC_BUF_CUDA);
        MPI_Request r;
        MCK(MPI_Isend(d, (int)n, t, 1, tag, MPI_COMM_WORLD, &r));
        MCK(MPI_Cancel(&r));
        MPI_Status st;
        int done = 0;
        for (double until = MPI_Wtime() + 1.0; !done && MPI_Wtime() < until;) MCK(MPI_Test(&r, &done, &st));
        int outcome = PENDING_UNTIL_MATCHED;
        if (done) {
            int cancelled = -1;
            MPI_Test_cancelled(&st, &cancelled);
            outcome = cancelled ? REPORTED_CANCELLED : REPORTED_NOT_CANCELLED;
            gpu_memset(d, 0xee, n); /* complete: the buffer is the user's again */
        } else {
            MT_CHECK(gpu_ipc_knob_on(), "%zu-byte send still pending 1 s after MPI_Cancel with MPIACC_IPC=0", n);
        }
        MCK(MPI_Send(&outcome, 1, MPI_INT, 1, tag + 1, MPI_COMM_WORLD));
        unsigned char follow[FOLLOW_UP_BYTES];
        mt_fill(follow, sizeof follow, (uint64_t)tag + 1);
        MCK(MPI_Send(follow, sizeof follow, MPI_BYTE, 1, tag, MPI_COMM_WORLD));
        if (outcome == PENDING_UNTIL_MATCHED) gpu_wait(&r, MPI_STATUS_IGNORE, "IPC-offered send after MPI_Cancel");
        MCK(MPI_Recv(NULL, 0, MPI_BYTE, 1, tag + 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MCK(MPI_Type_free(&t));
        CK(cudaFree(d));
        free(h);
    } else {
        int outcome = -1;
        MCK(MPI_Recv(&outcome, 1, MPI_INT, 0, tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        unsigned char *h = malloc(n);
        if (!h) gpu_die(__FILE__, __LINE__, "out of host memory");
        MPI_Status st;
        MCK(MPI_Recv(h, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st));
        if (outcome != REPORTED_CANCELLED) {
            GPU_CHECK_STATUS(st, 0, tag, n, "%zu-byte send (outcome %d)", n, outcome);
            size_t bad = mt_verify(h, n, (uint64_t)tag);
            MT_CHECK(bad == (size_t)-1, "%zu-byte send not cancelled: first wrong byte at %zu", n, bad);
            MCK(MPI_Recv(h, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st));
        }
        GPU_CHECK_STATUS(st, 0, tag, FOLLOW_UP_BYTES, "follow-up after a %zu-byte send (outcome %d)", n, outcome);
        size_t bad = mt_verify(h, FOLLOW_UP_BYTES, (uint64_t)tag + 1);
        MT_CHECK(bad == (size_t)-1, "follow-up: first wrong byte at %zu", bad);
        MCK(MPI_Send(NULL, 0, MPI_BYTE, 0, tag + 2, MPI_COMM_WORLD));
        free(h);
    }
}

static void free_size(size_t n, int tag) {
    unsigned char *h = malloc(n);
    if (!h) gpu_die(__FILE__, __LINE__, "out of host memory");
    if (mt_rank == 0) {
        mt_fill(h, n, (uint64_t)tag);
        void *d = gpu_malloc(n);
        gpu_upload(d, h, n);
        MPI_Datatype t = gpu_tagged(MPI_BYTE, MPIX_ACC_BUF_CUDA);
        MPI_Request r;
        MCK(MPI_Isend(d, (int)n, t, 1, tag, MPI_COMM_WORLD, &r));
        MCK(MPI_Request_free(&r));
        MT_CHECK(r == MPI_REQUEST_NULL, "MPI_Request_free left the handle");
        MCK(MPI_Barrier(MPI_COMM_WORLD)); /* the receive is posted only now */
        MCK(MPI_Recv(NULL, 0, MPI_BYTE, 1, tag + 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MCK(MPI_Type_free(&t));
        CK(cudaFree(d));
    } else {
        MCK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_Status st;
        MCK(MPI_Recv(h, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st));
        GPU_CHECK_STATUS(st, 0, tag, n, "freed %zu-byte send", n);
        size_t bad = mt_verify(h, n, (uint64_t)tag);
        MT_CHECK(bad == (size_t)-1, "freed %zu-byte send: first wrong byte at %zu", n, bad);
        MCK(MPI_Send(NULL, 0, MPI_BYTE, 0, tag + 2, MPI_COMM_WORLD));
    }
    free(h);
}

static void c_cancel_100B(void) { cancel_size(100, 800); }
static void c_cancel_1MiB(void) { cancel_size(1 * MiB, 810); }
static void c_cancel_16MiB(void) { cancel_size(16 * MiB, 820); }
static void c_free_100B(void) { free_size(100, 830); }
static void c_free_1MiB(void) { free_size(1 * MiB, 840); }
static void c_free_16MiB(void) { free_size(16 * MiB, 850); }

static const gpu_case_t cases[] = {
    {"cancel_unmatched_cuda_isend_100B_wait_returns_and_arrives_unless_cancelled", c_cancel_100B, 0},
    {"cancel_unmatched_cuda_isend_1MiB_wait_returns_and_arrives_unless_cancelled", c_cancel_1MiB, 0},
    {"cancel_unmatched_cuda_isend_16MiB_wait_returns_and_arrives_unless_cancelled", c_cancel_16MiB, 0},
    {"request_free_unmatched_cuda_isend_100B_then_receive_gets_the_bytes", c_free_100B, 0},
    {"request_free_unmatched_cuda_isend_1MiB_then_receive_gets_the_bytes", c_free_1MiB, 0},
    {"request_free_unmatched_cuda_isend_16MiB_then_receive_gets_the_bytes", c_free_16MiB, 0},
};

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    gpu_setup(-1);
    gpu_run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    gpu_teardown();
    return mt_finalize();
}
