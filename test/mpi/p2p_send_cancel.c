/* MPI_Cancel and MPI_Request_free of sends nothing has matched yet, from host memory and
 * from a cl_mem, at 100 B, 1 MiB and 16 MiB. After a cancel, MPI_Wait returns (MPI 3.8.4)
 * and the status says exactly what happens: a send reported cancelled never arrives, one
 * reported not cancelled arrives intact once the receive is posted, even though the
 * user's buffer was overwritten after the wait. A later message on the same tag shows
 * nothing is lost or reordered. A freed send still arrives when the receive comes later.
 * OpenCL cases run on PoCL in CI and skip by name without a platform.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

enum { HOST, OPENCL };
static const size_t sizes[] = {100, (size_t)1 << 20, (size_t)16 << 20};
static const char *size_names[] = {"100B", "1MiB", "16MiB"};
#define FOLLOW_UP_BYTES 64

static ocl_env env;
static int have_ocl;

/* Rank 0's send buffer of `n` bytes filled with `seed`: host memory or a cl_mem. */
static void *send_buffer(int kind, size_t n, uint64_t seed) {
    unsigned char *h = p2p_alloc(n);
    mt_fill(h, n, seed);
    if (kind == HOST) return h;
    cl_mem m = ocl_alloc(&env, n);
    ocl_write(&env, m, 0, h, n);
    free(h);
    return m;
}

static void overwrite(int kind, void *buf, size_t n) {
    if (kind == HOST)
        memset(buf, 0xee, n);
    else
        ocl_fill(&env, (cl_mem)buf, n, 0xee);
}

static void release(int kind, void *buf) {
    if (kind == HOST)
        free(buf);
    else
        clReleaseMemObject((cl_mem)buf);
}

/* Where the library (not MPICH) handles the send: host data at or above the rendezvous
 * threshold, and any cl_mem. A host Isend below it is MPICH's own request, which MPICH
 * (ch4:ucx) can neither cancel nor complete once it went by its own rendezvous: plain
 * MPICH hangs there too. */
static int library_send(int kind, size_t n) {
    const long long threshold = mpiacc_knob_value("MPIACC_HOST_RNDV_THRESHOLD");
    return kind == OPENCL || n <= 4096 || (threshold > 0 && n >= (size_t)threshold);
}

/* `settle`: progress runs a while before the cancel, so that a staged payload is in MPICH
 * already (not withdrawn: the library keeps it and the wait still returns). */
static void cancel_case(int kind, size_t n, int tag, int settle) {
    MPI_Datatype t = MPI_BYTE;
    if (kind == OPENCL) t = ocl_type(&env);
    if (mt_rank == 0) {
        void *buf = send_buffer(kind, n, p2p_seed(tag, 0, 0));
        MPI_Request r;
        MT_CHECK(MPI_Isend(buf, (int)n, t, 1, tag, MPI_COMM_WORLD, &r) == MPI_SUCCESS, "isend");
        for (double until = MPI_Wtime() + 0.1; settle && MPI_Wtime() < until;) {
            int flag;
            MPI_Iprobe(1, tag + 3, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        }
        MT_CHECK(MPI_Cancel(&r) == MPI_SUCCESS, "MPI_Cancel failed");
        MPI_Status st;
        MT_CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS, "MPI_Wait after MPI_Cancel failed");
        MT_CHECK(r == MPI_REQUEST_NULL, "request not freed");
        int cancelled = -1;
        MPI_Test_cancelled(&st, &cancelled);
        /* Complete: the buffer is the user's again. */
        overwrite(kind, buf, n);
        MPI_Send(&cancelled, 1, MPI_INT, 1, tag + 1, MPI_COMM_WORLD);
        unsigned char follow[FOLLOW_UP_BYTES];
        mt_fill(follow, sizeof follow, p2p_seed(tag, 0, 1));
        MPI_Send(follow, sizeof follow, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
        MPI_Recv(NULL, 0, MPI_BYTE, 1, tag + 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        release(kind, buf);
    } else {
        int cancelled = -1;
        MPI_Recv(&cancelled, 1, MPI_INT, 0, tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MT_CHECK(cancelled == 0 || cancelled == 1, "MPI_Test_cancelled gave %d", cancelled);
        unsigned char *h = p2p_alloc(n);
        MPI_Status st;
        MPI_Recv(h, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
        if (!cancelled) {
            P2P_CHECK_STATUS(st, 0, tag, n);
            P2P_CHECK_BYTES(h, n, p2p_seed(tag, 0, 0), "send reported not cancelled");
            MPI_Recv(h, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
        }
        /* A send reported cancelled never arrives: the first message here is the next one. */
        P2P_CHECK_STATUS(st, 0, tag, FOLLOW_UP_BYTES);
        P2P_CHECK_BYTES(h, FOLLOW_UP_BYTES, p2p_seed(tag, 0, 1), "follow-up message");
        MPI_Send(NULL, 0, MPI_BYTE, 0, tag + 2, MPI_COMM_WORLD);
        free(h);
    }
    if (kind == OPENCL) MPI_Type_free(&t);
}

static void free_case(int kind, int si, int tag) {
    const size_t n = sizes[si];
    MPI_Datatype t = MPI_BYTE;
    if (kind == OPENCL) t = ocl_type(&env);
    if (mt_rank == 0) {
        void *buf = send_buffer(kind, n, p2p_seed(tag, 0, 0));
        MPI_Request r;
        MT_CHECK(MPI_Isend(buf, (int)n, t, 1, tag, MPI_COMM_WORLD, &r) == MPI_SUCCESS, "isend");
        MT_CHECK(MPI_Request_free(&r) == MPI_SUCCESS && r == MPI_REQUEST_NULL, "MPI_Request_free");
        MPI_Barrier(MPI_COMM_WORLD); /* the receive is posted only now */
        /* The buffer may be reused once the receiver says it has the data. */
        MPI_Recv(NULL, 0, MPI_BYTE, 1, tag + 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        release(kind, buf);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        unsigned char *h = p2p_alloc(n);
        MPI_Status st;
        MPI_Recv(h, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
        P2P_CHECK_STATUS(st, 0, tag, n);
        P2P_CHECK_BYTES(h, n, p2p_seed(tag, 0, 0), "freed send");
        MPI_Send(NULL, 0, MPI_BYTE, 0, tag + 2, MPI_COMM_WORLD);
        free(h);
    }
    if (kind == OPENCL) MPI_Type_free(&t);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    env = ocl_setup();
    have_ocl = ocl_all_ok(&env);
    const char *kind_names[] = {"host", "opencl"};
    char name[160];
    int tag = 600;
    for (int kind = HOST; kind <= OPENCL; ++kind) {
        for (int si = 0; si < 3; ++si, tag += 10) {
            snprintf(name, sizeof name, "cancel_unmatched_%s_isend_%s_wait_returns_and_arrives_unless_cancelled",
                     kind_names[kind], size_names[si]);
            if (kind == OPENCL && !have_ocl) {
                mt_skip(name, "no usable OpenCL platform");
            } else if (!library_send(kind, sizes[si])) {
                mt_skip(name, "MPICH's own rendezvous send: ch4:ucx cannot cancel it (plain MPICH hangs too)");
            } else {
                MT_CASE(name) { cancel_case(kind, sizes[si], tag, 0); }
            }
            snprintf(name, sizeof name, "request_free_unmatched_%s_isend_%s_then_receive_gets_the_bytes",
                     kind_names[kind], size_names[si]);
            if (kind == OPENCL && !have_ocl) {
                mt_skip(name, "no usable OpenCL platform");
            } else {
                MT_CASE(name) { free_case(kind, si, tag + 5); }
            }
        }
    }
    const char *settled = "cancel_opencl_isend_64KiB_whose_staged_payload_is_in_mpich_wait_returns_and_it_arrives";
    if (!have_ocl) {
        mt_skip(settled, "no usable OpenCL platform");
    } else {
        MT_CASE(settled) { cancel_case(OPENCL, 65536, tag, 1); }
    }
    ocl_teardown(&env);
    return mt_finalize();
}
