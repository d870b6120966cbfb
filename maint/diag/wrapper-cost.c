/* What libmpiacc adds to MPICH's host fast path, in nanoseconds, from one process:
 * MPI_Isend to itself, MPI_Recv, PMPI_Wait, against the same through PMPI_* only.
 * The two paths take turns block by block (who goes first alternating); each prints
 * its median over the rounds. Unlike bench/host_overhead's ping-pong, no second rank's
 * timing is in the number, so differences of 1 ns show.
 *
 *   $MPICC -O2 -o /tmp/wrapper-cost maint/diag/wrapper-cost.c -L.libs -lmpiacc
 *   MPIACC_CUDA_AUTODETECT=0 LD_LIBRARY_PATH=.libs mpiexec -n 1 /tmp/wrapper-cost [BYTES]
 *
 * LD_LIBRARY_PATH picks the libmpiacc to measure, so two builds compare in one
 * session. BYTES (default 8) under 200 takes MPI_Recv's bounced path, 200 and over
 * its in-place one. (A blocking MPI_Send to itself would wait: MPICH's self path
 * holds the send until the receive is posted.) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "cost_timer.h"

enum { ROUNDS = 400, CALLS = 2000, MAX_BYTES = 4096 };

/* One block of CALLS exchanges; the time of one, in ns. */
static double block(int through_mpiacc, char *sbuf, char *rbuf, int bytes) {
    MPI_Request q;
    double t0 = now_ns();
    if (through_mpiacc) {
        for (int i = 0; i < CALLS; ++i) {
            MPI_Isend(sbuf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &q);
            MPI_Recv(rbuf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            PMPI_Wait(&q, MPI_STATUS_IGNORE);
        }
    } else {
        for (int i = 0; i < CALLS; ++i) {
            PMPI_Isend(sbuf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &q);
            PMPI_Recv(rbuf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            PMPI_Wait(&q, MPI_STATUS_IGNORE);
        }
    }
    return (now_ns() - t0) / CALLS;
}

int main(int argc, char **argv) {
    static char sbuf[MAX_BYTES], rbuf[MAX_BYTES];
    static double pmpi[ROUNDS], mpi[ROUNDS];
    MPI_Init(&argc, &argv);
    int bytes = argc > 1 ? atoi(argv[1]) : 8;
    if (bytes < 0 || bytes > MAX_BYTES) {
        fprintf(stderr, "wrapper-cost: BYTES must be 0..%d\n", MAX_BYTES);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int r = 0; r < ROUNDS; ++r) {
        for (int k = 0; k < 2; ++k) {
            int through_mpiacc = k ^ (r & 1);
            double t = block(through_mpiacc, sbuf, rbuf, bytes);
            if (through_mpiacc)
                mpi[r] = t;
            else
                pmpi[r] = t;
        }
    }
    qsort(pmpi, ROUNDS, sizeof pmpi[0], by_value);
    qsort(mpi, ROUNDS, sizeof mpi[0], by_value);
    printf("%d B: PMPI %.2f ns, MPI %.2f ns, libmpiacc adds %.2f ns (first quartiles: %.2f)\n", bytes,
           pmpi[ROUNDS / 2], mpi[ROUNDS / 2], mpi[ROUNDS / 2] - pmpi[ROUNDS / 2], mpi[ROUNDS / 4] - pmpi[ROUNDS / 4]);
    MPI_Finalize();
    return 0;
}
