/* Run by test/user/fatal_abort.sh under mpiexec: a call MPI-ACC refuses, on a buffer whose
 * datatype says CUDA memory, under the default handler (MPI_ERRORS_ARE_FATAL): a
 * collective on MPI_COMM_WORLD, or with "win" an MPI_Put in a window's fence epoch. The
 * job must abort with the user's call and MPI-ACC's text on stderr. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "mpiacc.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int in[4] = {1, 2, 3, 4}, out[4];
    MPI_Datatype t;
    MPI_Type_dup(MPI_INT, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    if (argc > 1 && strcmp(argv[1], "win") == 0) {
        MPI_Win win;
        MPI_Win_create(out, sizeof out, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Win_fence(0, win);
        MPI_Put(in, 4, t, 0, 0, 4, MPI_INT, win);
        printf("fatal_child: MPI_Put returned\n");
        MPI_Win_fence(0, win);
        MPI_Win_free(&win);
    } else {
        MPI_Allreduce(in, out, 4, t, MPI_SUM, MPI_COMM_WORLD);
        printf("fatal_child: MPI_Allreduce returned\n");
    }
    MPI_Type_free(&t);
    MPI_Finalize();
    return 0;
}
