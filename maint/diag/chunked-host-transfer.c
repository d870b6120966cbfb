/* Does cutting a host message into chunks cost MPICH bandwidth between two ranks of a
 * node? MPI-ACC's pipeline with IPC off sends a host sender's buffer to a device receiver
 * as 2 MiB messages into pinned slots; criterion 5 of issue 4 holds it to MPICH's
 * host-to-host rate for the whole message, measured as bench/pt2pt measures it (windows
 * of messages from one buffer into one buffer).
 *
 *   $MPICC -O2 -o /tmp/chunked maint/diag/chunked-host-transfer.c
 *   mpiexec -n 2 /tmp/chunked [ROUNDS]
 *
 * Each line: message size, chunk size (the message as consecutive messages of that size,
 * all posted at once), GB/s of windows of 16 messages, median of ROUNDS. Both buffers
 * come from malloc, like the benchmark's. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WINDOW = 16, MAX_CHUNKS = 64 };

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    if (rounds < 1 || rounds > 64) rounds = 7;
    const size_t sizes[] = {4u << 20, 16u << 20};
    const size_t chunks[] = {0, 4u << 20, 2u << 20, 1u << 20};
    char *buf = malloc(16u << 20);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    memset(buf, rank, 16u << 20);
    if (rank == 0) printf("%10s %10s %8s\n", "bytes", "chunk", "GB/s");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            size_t n = sizes[s], chunk = chunks[c] ? chunks[c] : n;
            if (chunk > n || (chunks[c] && chunk == n)) continue;
            int per = (int)(n / chunk);
            double rate[64];
            for (int r = 0; r < rounds + 1; r++) {
                MPI_Request req[MAX_CHUNKS];
                MPI_Status st[MAX_CHUNKS];
                MPI_Barrier(MPI_COMM_WORLD);
                double t = MPI_Wtime();
                for (int w = 0; w < WINDOW; w++) {
                    for (int k = 0; k < per; k++) {
                        if (rank == 0)
                            MPI_Isend(buf + k * chunk, (int)chunk, MPI_BYTE, 1, k, MPI_COMM_WORLD, &req[k]);
                        else
                            MPI_Irecv(buf + k * chunk, (int)chunk, MPI_BYTE, 0, k, MPI_COMM_WORLD, &req[k]);
                    }
                    MPI_Waitall(per, req, st);
                }
                char ack = 0;
                if (rank == 1)
                    MPI_Send(&ack, 1, MPI_BYTE, 0, 99, MPI_COMM_WORLD);
                else
                    MPI_Recv(&ack, 1, MPI_BYTE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                t = MPI_Wtime() - t;
                if (r > 0) rate[r - 1] = (double)WINDOW * n / t / 1e9;
            }
            qsort(rate, rounds, sizeof rate[0], cmp);
            if (rank == 0) printf("%10zu %10zu %8.2f\n", n, chunk, rate[rounds / 2]);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
