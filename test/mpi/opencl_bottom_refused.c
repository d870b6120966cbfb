/* MPI_BOTTOM with a type of absolute host addresses names no place in a cl_mem: such a
 * type tagged for an OpenCL buffer is refused with MPI_ERR_UNSUPPORTED_OPERATION (as every
 * non-contiguous device type is), by sends and receives, blocking and not, and the next
 * message still arrives.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

static const char *const cases[] = {"mpi_bottom_with_absolute_type_on_opencl_buffer_is_refused"};

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    ocl_env e = ocl_setup_or_skip(cases, 1);
    MT_CASE(cases[0]) {
        int a[4], b[4], len[2] = {4, 4};
        MPI_Aint disp[2];
        MPI_Datatype types[2] = {MPI_INT, MPI_INT}, t;
        MPI_Get_address(b, &disp[0]);
        MPI_Get_address(a, &disp[1]);
        MPI_Type_create_struct(2, len, disp, types, &t);
        MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_OPENCL);
        MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)e.queue);
        MPI_Type_commit(&t);
        const int peer = 1 - mt_rank;
        MPI_Request q = MPI_REQUEST_NULL;
        if (mt_rank < 2) {
            P2P_CHECK_UNSUPPORTED(MPI_Send(MPI_BOTTOM, 1, t, peer, 7, MPI_COMM_WORLD), "MPI_Send", "buf", NULL);
            P2P_CHECK_UNSUPPORTED(MPI_Isend(MPI_BOTTOM, 1, t, peer, 7, MPI_COMM_WORLD, &q), "MPI_Isend", "buf", NULL);
            P2P_CHECK_UNSUPPORTED(MPI_Recv(MPI_BOTTOM, 1, t, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv",
                                  "buf", NULL);
            P2P_CHECK_UNSUPPORTED(MPI_Irecv(MPI_BOTTOM, 1, t, peer, 7, MPI_COMM_WORLD, &q), "MPI_Irecv", "buf", NULL);
            int x = 10 + mt_rank, y = -1;
            MT_CHECK(MPI_Sendrecv(&x, 1, MPI_INT, peer, 8, &y, 1, MPI_INT, peer, 8, MPI_COMM_WORLD,
                                  MPI_STATUS_IGNORE) == MPI_SUCCESS,
                     "the exchange after the refusals failed");
            MT_CHECK(y == 10 + peer, "the exchange after the refusals got %d", y);
        }
        MPI_Type_free(&t);
    }
    ocl_teardown(&e);
    return mt_finalize();
}
