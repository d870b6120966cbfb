/* A window of large cl_mem -> host receives whose envelopes one completion call finds
 * together, with a sender pool smaller than two transfers' chunks in flight. Every
 * rendezvous the call starts has its CTS out, so the sender fills staging slots for each;
 * they must all be driven at once (DESIGN 2.7: pools never deadlock). Finishing them one
 * after another hung: the parked ones kept the sender's whole pool. (With the default of
 * three transfers admitted per sender that takes a race; with no limit it is certain.)
 * MPIACC-TEST-RANKS: 2 */
#include <unistd.h>

#include "opencl_util.h"

enum { W = 6 };
static const size_t kBytes = (16u << 20) + 5; /* 9 chunks of 2 MiB: more than the depth */

/* Rank 0 sends W messages from one cl_mem; rank 1 lets every envelope arrive before it
 * posts its receives (so MPICH completes them all at the post), then completes the window
 * with `complete`. */
static void window_case(ocl_env *e, int tag, int (*complete)(MPI_Request *r, MPI_Status *st)) {
    MPI_Datatype t = ocl_type(e);
    cl_mem m = ocl_alloc(e, kBytes);
    unsigned char *h[W];
    for (int i = 0; i < W; ++i) h[i] = p2p_alloc(kBytes);
    MPI_Request r[W];
    if (mt_rank == 0) {
        mt_fill(h[0], kBytes, (unsigned)tag);
        ocl_write(e, m, 0, h[0], kBytes);
        for (int i = 0; i < W; ++i) MPI_Isend(m, (int)kBytes, t, 1, tag, MPI_COMM_WORLD, &r[i]);
        MT_CHECK(MPI_Waitall(W, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "sender waitall");
    } else if (mt_rank == 1) {
        usleep(300 * 1000); /* no MPI call meanwhile: the envelopes wait unexpected */
        for (int i = 0; i < W; ++i) MPI_Irecv(h[i], (int)kBytes, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r[i]);
        MPI_Status st[W];
        MT_CHECK(complete(r, st) == MPI_SUCCESS, "receiver completion");
        for (int i = 0; i < W; ++i) {
            P2P_CHECK_BYTES(h[i], kBytes, (unsigned)tag, "message");
            MT_CHECK(p2p_count(&st[i], MPI_BYTE) == (int)kBytes, "message %d: %d bytes", i,
                     p2p_count(&st[i], MPI_BYTE));
            MT_CHECK(st[i].MPI_SOURCE == 0 && st[i].MPI_TAG == tag, "message %d: source %d tag %d", i, st[i].MPI_SOURCE,
                     st[i].MPI_TAG);
        }
    }
    for (int i = 0; i < W; ++i) free(h[i]);
    clReleaseMemObject(m);
    MPI_Type_free(&t);
}

static int by_waitall(MPI_Request *r, MPI_Status *st) { return MPI_Waitall(W, r, st); }

static int by_testsome(MPI_Request *r, MPI_Status *st) {
    int left = W;
    while (left > 0) {
        int n = 0, idx[W];
        MPI_Status got[W];
        int rc = MPI_Testsome(W, r, &n, idx, got);
        if (rc != MPI_SUCCESS) return rc;
        if (n == MPI_UNDEFINED) break;
        for (int k = 0; k < n; ++k) st[idx[k]] = got[k];
        left -= n;
    }
    return left == 0 ? MPI_SUCCESS : MPI_ERR_OTHER;
}

int main(int argc, char **argv) {
    /* Knobs are read at MPI_Init: 8 MiB = 4 slots of 2 MiB, one transfer's depth; every
     * transfer admitted at once, so that W - 1 of them could sit parked. */
    setenv("MPIACC_POOL_SIZE", "8M", 1);
    setenv("MPIACC_PIPELINE_TRANSFERS", "0", 1);
    MT_INIT(&argc, &argv);
    const char *names[] = {"window_of_16mib_cl_mem_to_host_receives_completes_by_waitall_with_an_8mib_pool",
                           "window_of_16mib_cl_mem_to_host_receives_completes_by_testsome_with_an_8mib_pool"};
    ocl_env e = ocl_setup_or_skip(names, 2);
    MT_CASE(names[0]) window_case(&e, 6100, by_waitall);
    MT_CASE(names[1]) window_case(&e, 6200, by_testsome);
    ocl_teardown(&e);
    return mt_finalize();
}
