/* One-sided calls take host memory only (device windows and origins are not supported
 * yet). An origin or result buffer tagged with a device MPIX_ACC_BUF_TYPE gets
 * MPI_ERR_UNSUPPORTED_OPERATION through the window's error handler, naming the call and
 * the argument, before MPICH reads it; the epoch goes on, and a host MPI_Put after the
 * refusals lands. A cl_mem origin gets the same, where OpenCL is usable.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

#define W MPI_COMM_WORLD

static int win_handler_calls;
static void count_win_errors(MPI_Win *win, int *code, ...) {
    (void)win;
    (void)code;
    ++win_handler_calls;
}

/* Every origin-side call with `buf` described by `t`, in one fence epoch on `win` (whose
 * memory is `mem`, 16 ints); then a host MPI_Put that must arrive. */
static void refuse_in_epoch(MPI_Win win, int *mem, void *buf, MPI_Datatype t, const char *cause) {
    const int peer = 1 - mt_rank;
    int host[4] = {1, 2, 3, 4}, result[4] = {0, 0, 0, 0};
    MPI_Request q = MPI_REQUEST_NULL;
    for (int i = 0; i < 16; ++i) mem[i] = -1;
    MPI_Win_fence(0, win);
    P2P_CHECK_UNSUPPORTED(MPI_Put(buf, 4, t, peer, 0, 4, MPI_BYTE, win), "MPI_Put", "origin_addr", cause);
    P2P_CHECK_UNSUPPORTED(MPI_Get(buf, 4, t, peer, 0, 4, MPI_BYTE, win), "MPI_Get", "origin_addr", cause);
    P2P_CHECK_UNSUPPORTED(MPI_Accumulate(buf, 4, t, peer, 0, 4, MPI_BYTE, MPI_REPLACE, win), "MPI_Accumulate", "origin_addr",
                  cause);
    P2P_CHECK_UNSUPPORTED(MPI_Get_accumulate(host, 4, MPI_BYTE, buf, 4, t, peer, 0, 4, MPI_BYTE, MPI_NO_OP, win),
                  "MPI_Get_accumulate", "result_addr", cause);
    P2P_CHECK_UNSUPPORTED(MPI_Fetch_and_op(buf, result, t, peer, 0, MPI_REPLACE, win), "MPI_Fetch_and_op", "origin_addr",
                  cause);
    P2P_CHECK_UNSUPPORTED(MPI_Compare_and_swap(host, host, buf, t, peer, 0, win), "MPI_Compare_and_swap", "origin_addr",
                  cause);
    P2P_CHECK_UNSUPPORTED(MPI_Rput(buf, 4, t, peer, 0, 4, MPI_BYTE, win, &q), "MPI_Rput", "origin_addr", cause);
    MT_CHECK(q == MPI_REQUEST_NULL, "a refused MPI_Rput set its request");
    int mine[2] = {100 + mt_rank, 200 + mt_rank};
    MT_CHECK(MPI_Put(mine, 2, MPI_INT, peer, 4, 2, MPI_INT, win) == MPI_SUCCESS, "the host MPI_Put failed");
    MPI_Win_fence(0, win);
    MT_CHECK(mem[4] == 100 + peer && mem[5] == 200 + peer && mem[0] == -1,
             "window after the epoch: %d %d (first %d), expected %d %d (-1)", mem[4], mem[5], mem[0], 100 + peer,
             200 + peer);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    int *mem = NULL;
    MPI_Win win;
    MPI_Win_allocate(16 * sizeof(int), sizeof(int), MPI_INFO_NULL, W, &mem, &win);
    MPI_Errhandler eh;
    MPI_Win_create_errhandler(count_win_errors, &eh);
    MPI_Win_set_errhandler(win, eh);
    MPI_Datatype cuda_t;
    MPI_Type_dup(MPI_BYTE, &cuda_t);
    MPI_Type_set_attr(cuda_t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    unsigned char host[64] = {0};

    /* Without a usable CUDA device the refusal is "no usable CUDA device": the same class. */
    MT_CASE("rma_refuses_cuda_tagged_origin_and_result_buffers_through_the_window_handler") {
        win_handler_calls = 0;
        refuse_in_epoch(win, mem, host, cuda_t, NULL);
        MT_CHECK(win_handler_calls == 7, "the window's handler ran %d times, expected 7", win_handler_calls);
    }

    static const char *cl_case = "rma_refuses_cl_mem_origin_buffers";
    ocl_env e;
    if (ocl_setup_for_case(&e, cl_case)) {
        MT_CASE(cl_case) {
            cl_mem m = ocl_alloc(&e, 64);
            MPI_Datatype t = ocl_type(&e);
            refuse_in_epoch(win, mem, (void *)m, t, "one-sided communication on device buffers is not supported");
            MPI_Type_free(&t);
            clReleaseMemObject(m);
        }
    }
    ocl_teardown(&e);

    MPI_Type_free(&cuda_t);
    MPI_Win_free(&win);
    MPI_Errhandler_free(&eh);
    return mt_finalize();
}
