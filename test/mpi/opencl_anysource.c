/* MPI_ANY_SOURCE receives into a cl_mem from three senders with mixed buffer kinds and
 * protocol sizes (matching). MPIACC-TEST-RANKS: 4 */
#include "opencl_util.h"

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    ocl_env e = ocl_setup();
    const char *name = "any_source_receives_into_cl_mem_from_three_senders";
    const char *name2 = "any_tag_wildcard_receive_into_cl_mem_reports_sender_and_tag";
    if (!ocl_all_ok(&e) || mt_size < 4) {
        mt_skip(name, mt_size < 4 ? "needs 4 ranks" : "no usable OpenCL platform");
        mt_skip(name2, mt_size < 4 ? "needs 4 ranks" : "no usable OpenCL platform");
        return mt_finalize();
    }
    const size_t sizes[4] = {0, 150, 200, (3 << 20) + 11}; /* by sender rank */
    const size_t cap = (4 << 20);
    MT_CASE(name) {
        MPI_Datatype t = ocl_type(&e);
        const int tag = 4000;
        if (mt_rank == 0) {
            int seen[4] = {0};
            cl_mem m = ocl_alloc(&e, cap);
            unsigned char *h = p2p_alloc(cap);
            for (int k = 0; k < 3; ++k) {
                MPI_Status st;
                MT_CHECK(MPI_Recv(m, (int)cap, t, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "recv");
                int src = st.MPI_SOURCE;
                MT_CHECK(src >= 1 && src <= 3 && !seen[src], "unexpected source %d", src);
                if (src < 1 || src > 3) continue;
                seen[src] = 1;
                MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)sizes[src], "from %d: %d bytes", src, p2p_count(&st, MPI_BYTE));
                ocl_read(&e, m, 0, h, sizes[src]);
                P2P_CHECK_BYTES(h, sizes[src], 4100 + src, "payload");
            }
            clReleaseMemObject(m);
            free(h);
        } else {
            size_t n = sizes[mt_rank];
            unsigned char *h = p2p_alloc(n);
            mt_fill(h, n, 4100 + mt_rank);
            if (mt_rank == 2) {
                MPI_Send(h, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD); /* host sender */
            } else {
                cl_mem m = ocl_alloc(&e, n);
                ocl_write(&e, m, 0, h, n);
                MPI_Send(m, (int)n, t, 0, tag, MPI_COMM_WORLD);
                clReleaseMemObject(m);
            }
            free(h);
        }
        MPI_Type_free(&t);
    }
    MT_CASE(name2) {
        MPI_Datatype t = ocl_type(&e);
        if (mt_rank == 0) {
            cl_mem m = ocl_alloc(&e, cap);
            int seen = 0;
            for (int k = 0; k < 3; ++k) {
                MPI_Status st;
                MPI_Recv(m, (int)cap, t, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                MT_CHECK(st.MPI_TAG == 4200 + st.MPI_SOURCE, "tag %d from %d", st.MPI_TAG, st.MPI_SOURCE);
                MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)sizes[st.MPI_SOURCE % 4], "count %d",
                         p2p_count(&st, MPI_BYTE));
                seen |= 1 << st.MPI_SOURCE;
            }
            MT_CHECK(seen == 0xe, "sources seen mask %x", seen);
            clReleaseMemObject(m);
        } else {
            size_t n = sizes[mt_rank];
            cl_mem m = ocl_alloc(&e, n);
            MPI_Send(m, (int)n, t, 0, 4200 + mt_rank, MPI_COMM_WORLD);
            clReleaseMemObject(m);
        }
        MPI_Type_free(&t);
    }
    ocl_teardown(&e);
    return mt_finalize();
}
