/* MPI_Pack and MPI_Unpack (and their external and large-count forms) take host memory
 * only until ROADMAP 1: a typed buffer of a device kind gets MPI_ERR_UNSUPPORTED_OPERATION
 * naming the call and the argument, the position stays where it was, and host packing is
 * unaffected, with tagged types about. A cl_mem gets the same where OpenCL is usable.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

#define W MPI_COMM_WORLD

/* Every pack and unpack call with the typed side `buf` described by `t`. */
static void refuse_all(void *buf, MPI_Datatype t, const char *cause) {
    char packed[256];
    int pos = 0;
    MPI_Aint xpos = 0;
    MPI_Count cpos = 0;
    P2P_CHECK_UNSUPPORTED(MPI_Pack(buf, 8, t, packed, sizeof packed, &pos, W), "MPI_Pack", "inbuf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_Unpack(packed, sizeof packed, &pos, buf, 8, t, W), "MPI_Unpack", "outbuf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_Pack_c(buf, 8, t, packed, sizeof packed, &cpos, W), "MPI_Pack_c", "inbuf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_Pack_external("external32", buf, 8, t, packed, sizeof packed, &xpos), "MPI_Pack_external",
                  "inbuf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_Unpack_external("external32", packed, sizeof packed, &xpos, buf, 8, t), "MPI_Unpack_external",
                  "outbuf", cause);
    MT_CHECK(pos == 0 && xpos == 0 && cpos == 0, "a refused call moved the position (%d %ld %lld)", pos, (long)xpos,
             (long long)cpos);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(W, MPI_ERRORS_RETURN);
    MPI_Datatype cuda_t;
    MPI_Type_dup(MPI_BYTE, &cuda_t);
    MPI_Type_set_attr(cuda_t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    unsigned char host[64];
    mt_fill(host, sizeof host, 9100);

    /* Without a usable CUDA device the refusal is "no usable CUDA device": the same class. */
    MT_CASE("pack_and_unpack_refuse_cuda_tagged_buffers") { refuse_all(host, cuda_t, NULL); }

    MT_CASE("host_pack_and_unpack_work_with_tagged_types_about") {
        char packed[256];
        int pos = 0, ints[4] = {1, 2, 3, 4}, back[4] = {0, 0, 0, 0};
        MT_CHECK(MPI_Pack(ints, 4, MPI_INT, packed, sizeof packed, &pos, W) == MPI_SUCCESS && pos == 16,
                 "MPI_Pack of 4 ints: position %d", pos);
        pos = 0;
        MT_CHECK(MPI_Unpack(packed, sizeof packed, &pos, back, 4, MPI_INT, W) == MPI_SUCCESS && back[3] == 4,
                 "MPI_Unpack of 4 ints gave %d at the end", back[3]);
    }

    static const char *cl_case = "pack_and_unpack_refuse_cl_mem_buffers";
    ocl_env e;
    if (ocl_setup_for_case(&e, cl_case)) {
        MT_CASE(cl_case) {
            cl_mem m = ocl_alloc(&e, 64);
            MPI_Datatype t = ocl_type(&e);
            refuse_all((void *)m, t, "packing device buffers is not supported");
            MPI_Type_free(&t);
            clReleaseMemObject(m);
        }
    }
    ocl_teardown(&e);
    MPI_Type_free(&cuda_t);
    return mt_finalize();
}
