/* What libmpiacc adds to MPICH's host fast path, in nanoseconds, from one process:
 * MPI_Isend to itself, MPI_Recv, PMPI_Wait, against the same through PMPI_* only.
 * The two paths take turns block by block (who goes first alternating); each prints
 * its median over the rounds. Unlike bench/host_overhead's ping-pong, no second rank's
 * timing is in the number, so differences of 1 ns show.
 *
 *   $MPICC -O2 -o /tmp/wrapper-cost maint/diag/wrapper-cost.c -L.libs -lmpiacc
 *   MPIACC_CUDA_AUTODETECT=0 LD_LIBRARY_PATH=.libs mpiexec -n 1 /tmp/wrapper-cost [BYTES [WINDOW]]
 *
 * LD_LIBRARY_PATH picks the libmpiacc to measure, so two builds compare on one
 * machine. BYTES (default 8) under 200 takes MPI_Recv's bounced path, 200 and over
 * its in-place one. (A blocking MPI_Send to itself would wait: MPICH's self path
 * holds the send until the receive is posted.)
 *
 * With WINDOW, the message-rate path instead: WINDOW MPI_Irecv, WINDOW MPI_Isend to
 * itself, then MPI_Waitall on each (bench/host_overhead's windows use 64), timed a
 * message. WRAPPER_COST_ONLY=mpi (or pmpi) runs that path alone, for a profiler. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROUNDS = 400, CALLS = 2000, WINDOWS = 40, MAX_BYTES = 4096, MAX_WINDOW = 256 };

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    int (*isend)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    int (*irecv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    int (*recv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
    int (*waitall)(int, MPI_Request *, MPI_Status *);
} Path;

static const Path mpich = {PMPI_Isend, PMPI_Irecv, PMPI_Recv, PMPI_Waitall};
static const Path mpiacc = {MPI_Isend, MPI_Irecv, MPI_Recv, MPI_Waitall};

/* One block of CALLS exchanges, or of WINDOWS windows when `window` is set; the time of
 * one message, in ns. */
static double block(const Path *p, char *sbuf, char *rbuf, int bytes, int window) {
    MPI_Request q, r[MAX_WINDOW], s[MAX_WINDOW];
    double t0 = now_ns();
    if (window == 0) {
        for (int i = 0; i < CALLS; ++i) {
            p->isend(sbuf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &q);
            p->recv(rbuf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            PMPI_Wait(&q, MPI_STATUS_IGNORE);
        }
        return (now_ns() - t0) / CALLS;
    }
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
    int bytes = argc > 1 ? atoi(argv[1]) : 8;
    int window = argc > 2 ? atoi(argv[2]) : 0;
    if (bytes < 0 || bytes > MAX_BYTES || window < 0 || window > MAX_WINDOW) {
        fprintf(stderr, "wrapper-cost: BYTES must be 0..%d and WINDOW 1..%d\n", MAX_BYTES, MAX_WINDOW);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *only = getenv("WRAPPER_COST_ONLY");
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
    if (window) printf("windows of %d, ", window);
    printf("%d B: PMPI %.2f ns, MPI %.2f ns, libmpiacc adds %.2f ns (first quartiles: %.2f)\n", bytes,
           pmpi[ROUNDS / 2], mpi[ROUNDS / 2], mpi[ROUNDS / 2] - pmpi[ROUNDS / 2], mpi[ROUNDS / 4] - pmpi[ROUNDS / 4]);
    MPI_Finalize();
    return 0;
}
