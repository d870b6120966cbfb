/* Passive-target synchronisation with a transfer in flight. Rank 1 holds an exclusive
 * lock on rank 2's window while it waits in MPI_Recv for a 9 MiB host message from rank
 * 0; rank 0 posts that message with MPI_Isend and then locks, puts and unlocks at rank 2.
 * Rank 0's unlock waits in MPICH for the lock, which rank 1 gives back only once the
 * message is in, which needs rank 0 to answer the CTS. No MPI call lets MPI-ACC drive its
 * transfers while MPICH waits for a lock (there is no MPI_Win_test for locks), so by
 * default this program hangs under libmpiacc though it completes under MPICH alone (see
 * README, departures); with MPIACC_ASYNC_PROGRESS=1, which this test sets, the progress
 * thread answers the CTS and the program completes. Checks both puts and the message.
 * MPIACC-TEST-RANKS: 3 */
#include <stdlib.h>

#include "p2p_util.h"

#define W MPI_COMM_WORLD
#define N P2P_RNDV_BYTES

int main(int argc, char **argv) {
    setenv("MPIACC_ASYNC_PROGRESS", "1", 1);
    mt_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    int provided = 0;
    MPI_Query_thread(&provided);
    static const char *name = "unlock_waiting_for_a_lock_held_by_the_receiver_of_an_isend_completes";
    if (provided < MPI_THREAD_MULTIPLE) {
        mt_skip(name, "MPICH did not provide MPI_THREAD_MULTIPLE");
        return mt_finalize();
    }
    if (mt_size != 3) {
        if (mt_rank == 0) fprintf(stderr, "# rma_passive_progress needs exactly 3 ranks (has %d)\n", mt_size);
        MPI_Abort(W, 1);
    }
    int *mem = p2p_alloc(2 * sizeof(int));
    mem[0] = mem[1] = -1;
    MPI_Win win;
    /* MPI_Win_create, not MPI_Win_allocate: see progress_blocking_calls. */
    MPI_Win_create(mem, 2 * sizeof(int), sizeof(int), MPI_INFO_NULL, W, &win);
    unsigned char *msg = p2p_alloc(N);
    MPI_Barrier(W);

    MT_CASE(name) {
        int v = 10 + mt_rank, ready = 0;
        if (mt_rank == 1) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 2, 0, win);
            MPI_Put(&v, 1, MPI_INT, 2, 1, 1, MPI_INT, win);
            MPI_Win_flush(2, win); /* the lock is held from here on */
            MPI_Send(&ready, 1, MPI_INT, 0, 5, W);
            MPI_Status st;
            memset(msg, 0, N);
            MPI_Recv(msg, (int)N, MPI_BYTE, 0, 7, W, &st);
            P2P_CHECK_STATUS(st, 0, 7, N);
            P2P_CHECK_BYTES(msg, N, 7100, "the message");
            MPI_Win_unlock(2, win);
        } else if (mt_rank == 0) {
            MPI_Request q;
            MPI_Recv(&ready, 1, MPI_INT, 1, 5, W, MPI_STATUS_IGNORE);
            mt_fill(msg, N, 7100);
            MPI_Isend(msg, (int)N, MPI_BYTE, 1, 7, W, &q);
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 2, 0, win);
            MPI_Put(&v, 1, MPI_INT, 2, 0, 1, MPI_INT, win);
            MPI_Win_unlock(2, win);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(W);
        if (mt_rank == 2) {
            MPI_Win_lock(MPI_LOCK_SHARED, 2, 0, win);
            MT_CHECK(mem[0] == 10 && mem[1] == 11, "rank 2's window holds %d %d", mem[0], mem[1]);
            MPI_Win_unlock(2, win);
        }
    }

    MPI_Win_free(&win);
    free(msg);
    free(mem);
    return mt_finalize();
}
