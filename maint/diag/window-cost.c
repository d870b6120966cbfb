/* What libmpiacc adds to a window of small host receives, in nanoseconds a message, from
 * one process: WINDOW MPI_Irecv, then WINDOW MPI_Isend to itself, then MPI_Waitall on the
 * receives and on the sends, against the same through PMPI_* only. This is the receiving
 * side of bench/host_overhead's windows, where MPI-ACC's message rate at 8-64 B trails
 * MPICH's by 15-40%; with one process no second rank's timing is in the number. The two
 * paths take turns block by block (who goes first alternating); each prints its median.
 *
 *   $MPICC -O2 -o /tmp/window-cost maint/diag/window-cost.c -L.libs -lmpiacc
 *   MPIACC_CUDA_AUTODETECT=0 LD_LIBRARY_PATH=.libs mpiexec -n 1 /tmp/window-cost [BYTES [WINDOW]]
 *
 * BYTES (default 64) under 200 lands in MPI-ACC's bounce (an envelope must fit), 200 and
 * over in place. WINDOW defaults to 64, host_overhead's. WINDOW_COST_ONLY=mpi (or pmpi)
 * runs that path alone, for a profiler. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cost_timer.h"

enum { ROUNDS = 400, WINDOWS = 40, MAX_BYTES = 4096, MAX_WINDOW = 256 };

typedef struct {
    int (*isend)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    int (*irecv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    int (*waitall)(int, MPI_Request *, MPI_Status *);
} Path;

static const Path mpich = {PMPI_Isend, PMPI_Irecv, PMPI_Waitall};
static const Path mpiacc = {MPI_Isend, MPI_Irecv, MPI_Waitall};

/* One block of WINDOWS windows; the time of one message, in ns. */
static double block(const Path *p, char *sbuf, char *rbuf, int bytes, int window) {
    MPI_Request r[MAX_WINDOW], s[MAX_WINDOW];
    double t0 = now_ns();
    for (int k = 0; k < WINDOWS; ++k) {
        for (int w = 0; w < window; ++w)
            p->irecv(rbuf + (size_t)w * (size_t)bytes, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &r[w]);
        for (int w = 0; w < window; ++w) p->isend(sbuf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &s[w]);
        p->waitall(window, r, MPI_STATUSES_IGNORE);
        p->waitall(window, s, MPI_STATUSES_IGNORE);
    }
    return (now_ns() - t0) / ((double)WINDOWS * window);
}

int main(int argc, char **argv) {
    static char sbuf[MAX_BYTES], rbuf[MAX_WINDOW * MAX_BYTES];
    static double pmpi[ROUNDS], mpi[ROUNDS];
    MPI_Init(&argc, &argv);
    int bytes = argc > 1 ? atoi(argv[1]) : 64;
    int window = argc > 2 ? atoi(argv[2]) : 64;
    if (bytes < 0 || bytes > MAX_BYTES || window < 1 || window > MAX_WINDOW) {
        fprintf(stderr, "window-cost: BYTES must be 0..%d and WINDOW 1..%d\n", MAX_BYTES, MAX_WINDOW);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *only = getenv("WINDOW_COST_ONLY");
    for (int r = 0; r < ROUNDS; ++r) {
        for (int k = 0; k < 2; ++k) {
            const int through_mpiacc = only ? strcmp(only, "pmpi") != 0 : k ^ (r & 1);
            double t = block(through_mpiacc ? &mpiacc : &mpich, sbuf, rbuf, bytes, window);
            if (through_mpiacc)
                mpi[r] = t;
            else
                pmpi[r] = t;
        }
    }
    qsort(pmpi, ROUNDS, sizeof pmpi[0], by_value);
    qsort(mpi, ROUNDS, sizeof mpi[0], by_value);
    printf("%d B, windows of %d: PMPI %.2f ns a message, MPI %.2f ns, libmpiacc adds %.2f ns (first quartiles: %.2f)\n",
           bytes, window, pmpi[ROUNDS / 2], mpi[ROUNDS / 2], mpi[ROUNDS / 2] - pmpi[ROUNDS / 2],
           mpi[ROUNDS / 4] - pmpi[ROUNDS / 4]);
    MPI_Finalize();
    return 0;
}
