/* Run by test/user/fatal_abort.sh under mpiexec: a collective on a buffer whose datatype
 * says CUDA memory, under the default handler (MPI_ERRORS_ARE_FATAL). MPI-ACC refuses it
 * and the job must abort with the user's call and MPI-ACC's text on stderr. */
#include <mpi.h>
#include <stdio.h>

#include "mpiacc.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int in[4] = {1, 2, 3, 4}, out[4];
    MPI_Datatype t;
    MPI_Type_dup(MPI_INT, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    MPI_Allreduce(in, out, 4, t, MPI_SUM, MPI_COMM_WORLD);
    printf("fatal_child: MPI_Allreduce returned\n");
    MPI_Finalize();
    return 0;
}
