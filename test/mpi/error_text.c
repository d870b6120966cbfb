/* MPI-ACC's error text: a refusal keeps the standard class (MPI_Error_class) and
 * MPI_Error_string gives MPI-ACC's words, opening with the user's call and argument,
 * not MPICH's "Unsupported file operation" and its "MPI_Send(0)" location. Codes MPICH
 * made itself keep MPICH's text. MPI allows any buffer when the count is 0, a NULL
 * cl_mem included: such messages move, with the status MPICH would give.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

#define W MPI_COMM_WORLD

static MPI_Datatype tagged(MPI_Datatype base, long kind) {
    MPI_Datatype t;
    MPI_Type_dup(base, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)kind);
    return t;
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(W, MPI_ERRORS_RETURN);
    const int peer = 1 - mt_rank;

    const char *cuda_case = "cuda_buffer_without_a_device_reads_not_supported_on_device_buffers";
    if (MPIX_Query_cuda_support()) {
        mt_skip(cuda_case, "a CUDA device is usable here");
    } else {
        MT_CASE(cuda_case) {
            char host[16];
            MPI_Datatype t = tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
            MPI_Request q = MPI_REQUEST_NULL;
            P2P_CHECK_UNSUPPORTED(MPI_Isend(host, 16, t, peer, 1, W, &q), "MPI_Isend", "buf",
                                  "buf is CUDA memory (MPIX_ACC_BUF_TYPE), and no usable CUDA device was found");
            MT_CHECK(q == MPI_REQUEST_NULL, "a refused MPI_Isend set its request");
            P2P_CHECK_UNSUPPORTED(MPI_Recv(host, 16, t, peer, 1, W, MPI_STATUS_IGNORE), "MPI_Recv", "buf",
                                  "no usable CUDA device");
            MPI_Type_free(&t);
        }
    }

    MT_CASE("a_code_mpich_made_keeps_mpich_text") {
        int x = 0, rc = MPI_Send(&x, 1, MPI_INT, 99, 0, W); /* no rank 99 */
        char s[MPI_MAX_ERROR_STRING + 1] = "";
        int len = 0;
        MPI_Error_string(rc, s, &len);
        MT_CHECK(p2p_class(rc) == MPI_ERR_RANK, "class %d, expected MPI_ERR_RANK", p2p_class(rc));
        MT_CHECK(strstr(s, "rank") != NULL, "MPICH's text for a bad rank is \"%s\"", s);
        MPI_Error_string(MPI_ERR_UNSUPPORTED_OPERATION, s, &len);
        MT_CHECK(len > 0 && len == (int)strlen(s), "the class's own string is \"%s\" (%d)", s, len);
    }

    const char *opencl_cases[] = {
        "vector_type_at_mpi_bottom_on_a_cl_mem_names_the_call_and_buf",
        "null_cl_mem_with_count_0_sends_and_receives_nothing",
        "null_cl_mem_with_count_0_in_nonblocking_calls",
        "host_pointer_tagged_opencl_names_the_call_and_buf",
    };
    ocl_env e = ocl_setup();
    if (!ocl_all_ok(&e)) {
        for (int i = 0; i < 4; ++i) mt_skip(opencl_cases[i], "no usable OpenCL platform");
    } else {
        MT_CASE(opencl_cases[0]) {
            cl_mem m = ocl_alloc(&e, 4096);
            MPI_Datatype vec, t;
            MPI_Type_vector(8, 1, 4, MPI_INT, &vec);
            t = tagged(vec, MPIX_ACC_BUF_OPENCL);
            MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)e.queue);
            MPI_Type_commit(&t);
            P2P_CHECK_UNSUPPORTED(MPI_Send(MPI_BOTTOM, 1, t, peer, 2, W), "MPI_Send", "buf",
                                  "names no place in a cl_mem");
            MPI_Type_free(&t);
            MPI_Type_free(&vec);
            clReleaseMemObject(m);
        }
        MT_CASE(opencl_cases[1]) {
            MPI_Datatype t = ocl_type(&e);
            int rc;
            if (mt_rank == 0) {
                rc = MPI_Send(NULL, 0, t, 1, 3, W);
                MT_CHECK(rc == MPI_SUCCESS, "MPI_Send of a NULL cl_mem, count 0, returned class %d", p2p_class(rc));
            } else {
                MPI_Status st;
                st.MPI_SOURCE = st.MPI_TAG = -7;
                rc = MPI_Recv(NULL, 0, t, 0, MPI_ANY_TAG, W, &st);
                MT_CHECK(rc == MPI_SUCCESS, "MPI_Recv into a NULL cl_mem, count 0, returned class %d", p2p_class(rc));
                MT_CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 3, "status source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
                MT_CHECK(p2p_count(&st, MPI_BYTE) == 0, "count %d", p2p_count(&st, MPI_BYTE));
            }
            MPI_Type_free(&t);
        }
        MT_CASE(opencl_cases[2]) {
            MPI_Datatype t = ocl_type(&e);
            MPI_Request q[2];
            MPI_Status st[2];
            /* Both ways at once; a real message after it on the same tag comes second. */
            int rc = MPI_Irecv(NULL, 0, t, peer, 4, W, &q[0]);
            if (rc == MPI_SUCCESS) rc = MPI_Isend(NULL, 0, t, peer, 4, W, &q[1]);
            MT_CHECK(rc == MPI_SUCCESS, "posting count-0 NULL cl_mem calls returned class %d", p2p_class(rc));
            if (rc == MPI_SUCCESS) {
                rc = MPI_Waitall(2, q, st);
                MT_CHECK(rc == MPI_SUCCESS, "MPI_Waitall returned class %d", p2p_class(rc));
                MT_CHECK(st[0].MPI_SOURCE == peer && st[0].MPI_TAG == 4 && p2p_count(&st[0], MPI_BYTE) == 0,
                         "receive status source %d tag %d count %d", st[0].MPI_SOURCE, st[0].MPI_TAG,
                         p2p_count(&st[0], MPI_BYTE));
            }
            unsigned char out[64], in[64];
            mt_fill(out, sizeof out, 40 + mt_rank);
            MPI_Sendrecv(out, 64, MPI_BYTE, peer, 4, in, 64, MPI_BYTE, peer, 4, W, MPI_STATUS_IGNORE);
            P2P_CHECK_BYTES(in, 64, 40 + peer, "message after the empty ones");
            MPI_Type_free(&t);
        }
        MT_CASE(opencl_cases[3]) {
            char host[64];
            MPI_Datatype t = ocl_type(&e);
            int rc = MPI_Send(host, 64, t, peer, 5, W);
            char s[MPI_MAX_ERROR_STRING + 1] = "";
            int len = 0;
            MT_CHECK(rc != MPI_SUCCESS && p2p_class(rc) == MPI_ERR_BUFFER, "class %d, expected MPI_ERR_BUFFER",
                     rc == MPI_SUCCESS ? 0 : p2p_class(rc));
            if (rc != MPI_SUCCESS) MPI_Error_string(rc, s, &len);
            MT_CHECK(strncmp(s, "MPI_Send(buf): ", 15) == 0 && strstr(s, "is not a cl_mem") && p2p_plain_words(s),
                     "the error string is \"%s\"", s);
            MPI_Type_free(&t);
        }
    }
    ocl_teardown(&e);
    return mt_finalize();
}
