/* MPI-4's MPI_Isendrecv and MPI_Isendrecv_replace through MPI-ACC: both ranks exchange
 * at once, at a payload size and above the host rendezvous threshold (where the message
 * on the wire is an envelope that a plain MPICH receive would take as data), with a
 * cl_mem where OpenCL is usable, with MPI_PROC_NULL, and with bad input (a clear error,
 * nothing posted, traffic afterwards as usual).
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

#define W MPI_COMM_WORLD

static int other(void) { return 1 - mt_rank; }

/* Each rank sends n bytes seeded (tag, its rank) and receives the other's. */
static void exchange(size_t n, int tag, int replace) {
    unsigned char *s = p2p_alloc(n), *r = p2p_alloc(n);
    mt_fill(s, n, p2p_seed(tag, mt_rank, 0));
    memset(r, 0, n);
    MPI_Request q = MPI_REQUEST_NULL;
    MPI_Status st;
    int rc;
    if (replace) {
        memcpy(r, s, n);
        rc = MPI_Isendrecv_replace(r, (int)n, MPI_BYTE, other(), tag, other(), tag, W, &q);
    } else {
        rc = MPI_Isendrecv(s, (int)n, MPI_BYTE, other(), tag, r, (int)n, MPI_BYTE, other(), tag, W, &q);
    }
    MT_CHECK(rc == MPI_SUCCESS, "%s of %zu bytes: class %d", replace ? "MPI_Isendrecv_replace" : "MPI_Isendrecv", n,
             rc == MPI_SUCCESS ? 0 : p2p_class(rc));
    if (rc == MPI_SUCCESS) {
        MPI_Wait(&q, &st);
        P2P_CHECK_STATUS(st, other(), tag, n);
        P2P_CHECK_BYTES(r, n, p2p_seed(tag, other(), 0), "received half");
    }
    free(s);
    free(r);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(W, MPI_ERRORS_RETURN);

    MT_CASE("isendrecv_exchanges_payloads_and_rendezvous_messages") {
        exchange(64, 6001, 0);
        exchange(P2P_ENVELOPE_BYTES, 6002, 0);
        exchange(P2P_RNDV_BYTES, 6003, 0);
    }

    MT_CASE("isendrecv_replace_exchanges_payloads_and_rendezvous_messages") {
        exchange(64, 6011, 1);
        exchange(P2P_RNDV_BYTES + 3, 6012, 1);
    }

    MT_CASE("isendrecv_c_takes_the_same_path") {
        const size_t n = P2P_RNDV_BYTES;
        const int tag = 6021;
        unsigned char *s = p2p_alloc(n), *r = p2p_alloc(n);
        mt_fill(s, n, p2p_seed(tag, mt_rank, 0));
        MPI_Request q;
        MPI_Status st;
        MT_CHECK(MPI_Isendrecv_c(s, (MPI_Count)n, MPI_BYTE, other(), tag, r, (MPI_Count)n, MPI_BYTE, other(), tag, W,
                                 &q) == MPI_SUCCESS,
                 "MPI_Isendrecv_c failed");
        MPI_Wait(&q, &st);
        P2P_CHECK_STATUS(st, other(), tag, n);
        P2P_CHECK_BYTES(r, n, p2p_seed(tag, other(), 0), "MPI_Isendrecv_c received half");
        free(s);
        free(r);
    }

    MT_CASE("isendrecv_with_proc_null_completes_with_the_empty_status") {
        int x = 5, y = 7;
        MPI_Request q;
        MPI_Status st;
        MT_CHECK(MPI_Isendrecv(&x, 1, MPI_INT, MPI_PROC_NULL, 1, &y, 1, MPI_INT, MPI_PROC_NULL, 1, W, &q) == MPI_SUCCESS,
                 "MPI_Isendrecv to and from MPI_PROC_NULL failed");
        MPI_Wait(&q, &st);
        int n = -1;
        MPI_Get_count(&st, MPI_INT, &n);
        MT_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && n == 0 && y == 7,
                 "status source %d tag %d count %d, buffer %d", st.MPI_SOURCE, st.MPI_TAG, n, y);
    }

    MT_CASE("bad_input_fails_clearly_and_posts_nothing") {
        const int tag = 6031;
        MPI_Datatype bad;
        MPI_Type_dup(MPI_BYTE, &bad);
        MPI_Type_set_attr(bad, MPIX_ACC_BUF_TYPE, (void *)42L);
        unsigned char s[32], r[32];
        MPI_Request q = MPI_REQUEST_NULL;
        int rc = MPI_Isendrecv(s, sizeof s, bad, other(), tag, r, sizeof r, MPI_BYTE, other(), tag, W, &q);
        MT_CHECK(rc != MPI_SUCCESS && p2p_class(rc) == MPI_ERR_ARG && q == MPI_REQUEST_NULL,
                 "a bad send type: class %d", rc == MPI_SUCCESS ? 0 : p2p_class(rc));
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING] = "";
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            MT_CHECK(strstr(msg, "MPI_Isendrecv") != NULL, "the error string does not name the call: \"%s\"", msg);
        }
        rc = MPI_Isendrecv(s, sizeof s, MPI_BYTE, other(), tag, r, sizeof r, bad, other(), tag, W, &q);
        MT_CHECK(rc != MPI_SUCCESS && p2p_class(rc) == MPI_ERR_ARG, "a bad receive type: class %d",
                 rc == MPI_SUCCESS ? 0 : p2p_class(rc));
        MPI_Type_free(&bad);
        /* Nothing was posted: the next exchange on the same tag pairs as usual. */
        exchange(48, tag, 0);
    }

    static const char *cl_case = "isendrecv_between_cl_mem_buffers";
    ocl_env e;
    if (ocl_setup_for_case(&e, cl_case)) {
        MT_CASE(cl_case) {
            const size_t sizes[] = {64, P2P_RNDV_BYTES};
            for (int k = 0; k < 2; ++k) {
                const size_t n = sizes[k];
                const int tag = 6041 + k;
                unsigned char *h = p2p_alloc(n);
                cl_mem s = ocl_alloc(&e, n), r = ocl_alloc(&e, n);
                mt_fill(h, n, p2p_seed(tag, mt_rank, 0));
                ocl_write(&e, s, 0, h, n);
                ocl_fill(&e, r, n, 0);
                MPI_Datatype t = ocl_type(&e);
                MPI_Request q;
                MPI_Status st;
                MT_CHECK(MPI_Isendrecv((void *)s, (int)n, t, other(), tag, (void *)r, (int)n, t, other(), tag, W, &q) ==
                             MPI_SUCCESS,
                         "MPI_Isendrecv of cl_mem, %zu bytes, failed", n);
                MPI_Wait(&q, &st);
                P2P_CHECK_STATUS(st, other(), tag, n);
                ocl_read(&e, r, 0, h, n);
                P2P_CHECK_BYTES(h, n, p2p_seed(tag, other(), 0), "cl_mem received half");
                MPI_Type_free(&t);
                clReleaseMemObject(s);
                clReleaseMemObject(r);
                free(h);
            }
        }
    }
    ocl_teardown(&e);
    return mt_finalize();
}
