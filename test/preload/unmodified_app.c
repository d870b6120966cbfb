/* An ordinary MPI program, built with MPICH's plain mpicc and linked against MPICH only.
 * test/preload/run.sh runs it as is and under LD_PRELOAD=libmpiacc.so and compares what
 * it prints: MPI-ACC must be invisible to it. It exchanges the sizes that matter to
 * MPI-ACC's protocol (under and at the envelope's length, past the rendezvous threshold),
 * a derived type, a probe and a wildcard receive, and prints a checksum of everything
 * received. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv(const unsigned char *p, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const size_t sizes[] = {0, 8, 199, 200, 201, 65536, (size_t)9 << 20};
    const int n = (int)(sizeof sizes / sizeof sizes[0]);
    uint64_t h = 1469598103934665603ull;
    int peer = 1 - rank;
    for (int i = 0; i < n && rank < 2; ++i) {
        size_t len = sizes[i];
        unsigned char *out = malloc(len + 1), *in = malloc(len + 1);
        for (size_t k = 0; k < len; ++k) out[k] = (unsigned char)(k * 31 + i + rank);
        MPI_Request r;
        MPI_Status st;
        MPI_Irecv(in, (int)len, MPI_BYTE, MPI_ANY_SOURCE, i, MPI_COMM_WORLD, &r);
        MPI_Send(out, (int)len, MPI_BYTE, peer, i, MPI_COMM_WORLD);
        MPI_Wait(&r, &st);
        int count;
        MPI_Get_count(&st, MPI_BYTE, &count);
        h = fnv(in, len, h);
        h = fnv((unsigned char *)&count, sizeof count, h);
        h = fnv((unsigned char *)&st.MPI_SOURCE, sizeof st.MPI_SOURCE, h);
        free(out);
        free(in);
    }
    if (rank < 2) {
        /* A vector of doubles, probed first, received as contiguous doubles. */
        double src[300], dst[100];
        for (int k = 0; k < 300; ++k) src[k] = k + 1000 * rank;
        MPI_Datatype vec;
        MPI_Type_vector(100, 1, 3, MPI_DOUBLE, &vec);
        MPI_Type_commit(&vec);
        MPI_Request r;
        MPI_Isend(src, 1, vec, peer, 99, MPI_COMM_WORLD, &r);
        MPI_Status st;
        MPI_Probe(peer, 99, MPI_COMM_WORLD, &st);
        int count;
        MPI_Get_count(&st, MPI_DOUBLE, &count);
        MPI_Recv(dst, 100, MPI_DOUBLE, peer, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        MPI_Type_free(&vec);
        h = fnv((unsigned char *)dst, sizeof dst, h);
        h = fnv((unsigned char *)&count, sizeof count, h);
    }
    uint64_t all[64] = {0};
    MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size && r < 64; ++r) printf("rank %d checksum %016llx\n", r, (unsigned long long)all[r]);
        /* Not part of the comparison: which library answered MPI_Send. */
        fprintf(stderr, "libmpiacc interposed: %s\n", dlsym(RTLD_DEFAULT, "mpiacc_counter_value") ? "yes" : "no");
    }
    MPI_Finalize();
    return 0;
}
