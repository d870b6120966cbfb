/* Sends whose requests were freed (or cancelled without being withdrawn) and that no
 * receive ever matches do not hold MPI_Finalize: both ranks return from it, and under
 * MPIACC_VERBOSE the sender says how many it abandoned. Host 16 MiB (rendezvous) and
 * cl_mem 100 B, 1 MiB and 16 MiB; the OpenCL ones only where PoCL or another platform is
 * usable. A hang fails the test by run-test's time limit. The verdict is printed after
 * MPI_Finalize, by rank 0, so the TAP lines are written by hand.
 * MPIACC-TEST-RANKS: 2 */
#include <unistd.h>

/* The harness's case helpers (collective verdicts) go unused: the verdict comes after
 * MPI_Finalize. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "opencl_util.h"

int main(int argc, char **argv) {
    setenv("MPIACC_VERBOSE", "1", 1); /* read at MPI_Init */
    MT_INIT(&argc, &argv);
    ocl_env e = ocl_setup();
    const int have_ocl = ocl_all_ok(&e);
    const size_t big = (size_t)16 << 20;
    int expected = 0;
    unsigned char *host = NULL, *host2 = NULL;
    cl_mem mems[3] = {0};
    MPI_Datatype t = MPI_DATATYPE_NULL;
    if (mt_rank == 0) {
        MPI_Request r;
        host = p2p_alloc(big);
        host2 = p2p_alloc(big);
        mt_fill(host, big, 1);
        mt_fill(host2, big, 2);
        MPI_Isend(host, (int)big, MPI_BYTE, 1, 700, MPI_COMM_WORLD, &r);
        MPI_Request_free(&r);
        ++expected;
        MPI_Isend(host2, (int)big, MPI_BYTE, 1, 701, MPI_COMM_WORLD, &r);
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        ++expected;
        if (have_ocl) {
            t = ocl_type(&e);
            const size_t n[3] = {100, (size_t)1 << 20, big};
            for (int i = 0; i < 3; ++i) {
                mems[i] = ocl_alloc(&e, n[i]);
                ocl_fill(&e, mems[i], n[i], 0x31);
                MPI_Isend(mems[i], (int)n[i], t, 1, 710 + i, MPI_COMM_WORLD, &r);
                MPI_Request_free(&r);
                /* 100 B goes as an eager payload, which MPICH completes on its own. */
                if (i > 0) ++expected;
            }
        }
    }
    /* Rank 1 posts nothing. Rank 0 keeps what MPI_Finalize prints. */
    char path[] = "/tmp/p2p_send_free_finalize.XXXXXX";
    int saved = -1, fd = -1;
    if (mt_rank == 0) {
        fflush(stderr);
        fd = mkstemp(path);
        saved = dup(2);
        if (fd >= 0) dup2(fd, 2);
    }
    if (t != MPI_DATATYPE_NULL) MPI_Type_free(&t);
    MPI_Finalize();
    if (mt_rank != 0) return 0;
    fflush(stderr);
    dup2(saved, 2);
    char text[1 << 16] = "";
    ssize_t got = fd >= 0 ? pread(fd, text, sizeof text - 1, 0) : -1;
    if (got > 0) text[got] = '\0';
    if (fd >= 0) close(fd);
    unlink(path);
    printf("ok 1 - freed_unmatched_sends_do_not_hang_mpi_finalize\n");
    char want[128];
    snprintf(want, sizeof want, "MPI_Finalize: %d send(s)", expected);
    const char *line = strstr(text, want);
    const int warned = line && strstr(line, "abandoned");
    if (!warned) fprintf(stderr, "# expected \"%s ... abandoned\" in:\n%s\n", want, text);
    printf("%s 2 - mpi_finalize_under_mpiacc_verbose_counts_the_abandoned_sends\n", warned ? "ok" : "not ok");
    printf("1..2\n");
    for (int i = 0; i < 3; ++i)
        if (mems[i]) clReleaseMemObject(mems[i]);
    free(host);
    free(host2);
    return 0;
}
