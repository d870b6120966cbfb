/* Truncation behaves the same at every size and for every pairing of host and OpenCL
 * buffers: a receive of half the message fails with MPI_ERR_TRUNCATE under
 * MPI_ERRORS_RETURN, whose string is MPI-ACC's own and names the call the user made
 * (never an MPICH error stack of internal calls); the status has the message's source
 * and tag and the count MPICH 4.0.2 gives (0: it delivers nothing of a message that does
 * not fit, so nothing is written into the buffer either); nothing past the buffer is
 * written; the sender completes normally, and the next message arrives intact. Sizes:
 * 100 B (a payload shorter than an envelope), 1 MiB (a payload under the host rendezvous
 * threshold) and 16 MiB (rendezvous); blocking and nonblocking receives.
 * MPIACC-TEST-RANKS: 2 */
#include "any_buffer.h"

#define GUARD 4096
#define PATTERN 0xa5

static void truncate_case(int send_kind, int recv_kind, size_t n, int nonblocking, ocl_env *e, int tag) {
    const size_t cap = n / 2;
    if (mt_rank == 0) {
        any_buffer s = any_alloc(send_kind, n, e);
        any_fill(&s, n, p2p_seed(tag, 0, 0));
        int rc = MPI_Send(any_ptr(&s), (int)n, s.type, 1, tag, MPI_COMM_WORLD);
        MT_CHECK(rc == MPI_SUCCESS, "the sender of the truncated message got class %d", p2p_class(rc));
        any_fill(&s, n, p2p_seed(tag, 0, 1));
        rc = MPI_Send(any_ptr(&s), (int)n, s.type, 1, tag + 1, MPI_COMM_WORLD);
        MT_CHECK(rc == MPI_SUCCESS, "the follow-up send got class %d", p2p_class(rc));
        any_free(&s);
    } else if (mt_rank == 1) {
        any_buffer r = any_alloc(recv_kind, n + GUARD, e);
        any_set(&r, PATTERN);
        MPI_Status st;
        memset(&st, 0x5a, sizeof st);
        const char *call = nonblocking ? "MPI_Irecv" : "MPI_Recv";
        int rc;
        if (nonblocking) {
            MPI_Request q;
            rc = MPI_Irecv(any_ptr(&r), (int)cap, r.type, 0, tag, MPI_COMM_WORLD, &q);
            MT_CHECK(rc == MPI_SUCCESS, "MPI_Irecv itself failed with class %d", p2p_class(rc));
            rc = MPI_Wait(&q, &st);
            MT_CHECK(q == MPI_REQUEST_NULL, "MPI_Wait left the request allocated after the error");
        } else {
            rc = MPI_Recv(any_ptr(&r), (int)cap, r.type, 0, tag, MPI_COMM_WORLD, &st);
        }
        MT_CHECK(p2p_class(rc) == MPI_ERR_TRUNCATE, "class %d, expected MPI_ERR_TRUNCATE", p2p_class(rc));
        if (rc != MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING + 1] = "";
            int len = 0;
            MPI_Error_string(rc, s, &len);
            MT_CHECK(strstr(s, call) && strstr(s, "longer than the receive buffer"),
                     "the error string does not name %s and say what was wrong: \"%.200s\"", call, s);
            MT_CHECK(!strstr(s, "internal_") && !strstr(s, "MPI_Test"), "an MPICH error stack: \"%.200s\"", s);
        }
        MT_CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == tag, "status source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
        MT_CHECK(p2p_count(&st, MPI_BYTE) == 0, "status count %d, expected 0 as MPICH gives", p2p_count(&st, MPI_BYTE));
        unsigned char *h = any_read(&r);
        P2P_CHECK_UNTOUCHED(h, cap, PATTERN, "the receive buffer of a message that did not fit");
        P2P_CHECK_UNTOUCHED(h + cap, n + GUARD - cap, PATTERN, "past the receive buffer");
        free(h);
        any_set(&r, 0);
        rc = MPI_Recv(any_ptr(&r), (int)n, r.type, 0, tag + 1, MPI_COMM_WORLD, &st);
        MT_CHECK(rc == MPI_SUCCESS, "the follow-up receive failed with class %d", p2p_class(rc));
        P2P_CHECK_STATUS(st, 0, tag + 1, n);
        h = any_read(&r);
        P2P_CHECK_BYTES(h, n, p2p_seed(tag, 0, 1), "the message after the truncation");
        free(h);
        any_free(&r);
    }
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    ocl_env e = ocl_setup();
    const int have_ocl = ocl_all_ok(&e);
    const size_t sizes[] = {100, 1 << 20, 16 << 20};
    const char *size_names[] = {"100_bytes", "1_MiB", "16_MiB"};
    int tag = 100;
    for (int sk = ANY_HOST; sk <= ANY_OPENCL; ++sk)
        for (int rk = ANY_HOST; rk <= ANY_OPENCL; ++rk)
            for (int s = 0; s < 3; ++s)
                for (int nb = 0; nb < 2; ++nb) {
                    char name[200];
                    snprintf(name, sizeof name, "truncated_%s_%s_to_%s_%s_is_mpi_err_truncate_count_0_nothing_written",
                             nb ? "irecv" : "recv", any_kind_name(sk), any_kind_name(rk), size_names[s]);
                    tag += 2;
                    if ((sk == ANY_OPENCL || rk == ANY_OPENCL) && !have_ocl) {
                        mt_skip(name, "no usable OpenCL platform");
                        continue;
                    }
                    MT_CASE(name) truncate_case(sk, rk, sizes[s], nb, &e, tag);
                }
    ocl_teardown(&e);
    return mt_finalize();
}
