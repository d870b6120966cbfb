/* Bad input under MPI_ERRORS_RETURN: the exact error class, an error string that names
 * the call, the communicator's error handler invoked, nothing sent or received by the
 * failed call, and normal traffic afterwards. MPI-ACC's own checks: an unknown buffer
 * kind is MPI_ERR_ARG; MPIX_ACC_BUF_CUDA when CUDA is not usable is
 * MPI_ERR_UNSUPPORTED_OPERATION. MPICH's own checks (rank, count, tag, datatype) keep
 * their classes through MPI-ACC.
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"
#include <mpiacc.h>

#define UNKNOWN_KIND 42L

static MPI_Datatype tagged_char(long kind) {
    MPI_Datatype t;
    MPI_Type_dup(MPI_CHAR, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)kind);
    return t;
}

/* rc has class `cls` and its string names `call`. */
static void check_error(int rc, int cls, const char *call) {
    char s[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    MT_CHECK(rc != MPI_SUCCESS, "%s succeeded, expected error class %d", call, cls);
    if (rc == MPI_SUCCESS) return;
    MT_CHECK(p2p_class(rc) == cls, "%s: error class %d, expected %d", call, p2p_class(rc), cls);
    s[0] = 0;
    MPI_Error_string(rc, s, &len);
    s[len < 0 ? 0 : (len > MPI_MAX_ERROR_STRING ? MPI_MAX_ERROR_STRING : len)] = 0;
    MT_CHECK(strstr(s, call) != NULL, "error string does not name %s: \"%s\"", call, s);
}

/* A send with a bad buffer kind fails and sends nothing: rank 0 then sends a good
 * message on the same tag, and it is the first thing rank 1 receives. */
static void bad_send_sends_nothing(long kind, int cls, int tag, int nonblocking) {
    unsigned char buf[32], good[32];
    mt_fill(buf, sizeof buf, p2p_seed(tag, 0, 0)); /* what a wrongly sent message holds */
    mt_fill(good, sizeof good, p2p_seed(tag, 0, 1));
    if (mt_rank == 0) {
        MPI_Datatype t = tagged_char(kind);
        int rc;
        if (nonblocking) {
            MPI_Request q = MPI_REQUEST_NULL;
            rc = MPI_Isend(buf, sizeof buf, t, 1, tag, MPI_COMM_WORLD, &q);
            check_error(rc, cls, "MPI_Isend");
            if (rc == MPI_SUCCESS) MPI_Wait(&q, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Send(buf, sizeof buf, t, 1, tag, MPI_COMM_WORLD);
            check_error(rc, cls, "MPI_Send");
        }
        MPI_Type_free(&t);
        rc = MPI_Send(good, sizeof good, MPI_CHAR, 1, tag, MPI_COMM_WORLD);
        MT_CHECK(rc == MPI_SUCCESS, "the following normal send failed (class %d)", p2p_class(rc));
    } else if (mt_rank == 1) {
        unsigned char r[32];
        MPI_Status st;
        MPI_Recv(r, sizeof r, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st);
        if (memcmp(r, buf, sizeof r) == 0) {
            MT_CHECK(0, "the failed send delivered a message");
            MPI_Recv(r, sizeof r, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st); /* drain the good one */
        }
        P2P_CHECK_STATUS(st, 0, tag, sizeof good);
        MT_CHECK(memcmp(r, good, sizeof r) == 0, "the following normal message arrived damaged");
    }
}

/* A receive with a bad buffer kind fails, takes nothing and writes nothing: the
 * message rank 0 sent first is then received by a normal receive. */
static void bad_recv_takes_nothing(long kind, int cls, int tag, int nonblocking) {
    unsigned char good[32];
    mt_fill(good, sizeof good, p2p_seed(tag, 0, 1));
    MPI_Request sq = MPI_REQUEST_NULL;
    if (mt_rank == 0) MPI_Isend(good, sizeof good, MPI_CHAR, 1, tag, MPI_COMM_WORLD, &sq);
    if (mt_rank == 1) {
        unsigned char r[32];
        MPI_Status st;
        MPI_Datatype t = tagged_char(kind);
        int rc;
        memset(r, 0x6b, sizeof r);
        if (nonblocking) {
            MPI_Request q = MPI_REQUEST_NULL;
            rc = MPI_Irecv(r, sizeof r, t, 0, tag, MPI_COMM_WORLD, &q);
            check_error(rc, cls, "MPI_Irecv");
            if (rc == MPI_SUCCESS) MPI_Wait(&q, MPI_STATUS_IGNORE); /* it took the message */
        } else {
            rc = MPI_Recv(r, sizeof r, t, 0, tag, MPI_COMM_WORLD, &st);
            check_error(rc, cls, "MPI_Recv");
        }
        MPI_Type_free(&t);
        if (rc != MPI_SUCCESS) {
            P2P_CHECK_UNTOUCHED(r, sizeof r, 0x6b, "buffer of the failed receive");
            rc = MPI_Recv(r, sizeof r, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st);
            MT_CHECK(rc == MPI_SUCCESS, "the following normal receive failed (class %d)", p2p_class(rc));
            P2P_CHECK_STATUS(st, 0, tag, sizeof good);
            MT_CHECK(memcmp(r, good, sizeof r) == 0, "the following normal receive got other bytes");
        }
    }
    MPI_Wait(&sq, MPI_STATUS_IGNORE);
}

static int handler_calls, handler_class;
static void count_errors(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    ++handler_calls;
    handler_class = p2p_class(*code);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int cuda = MPIX_Query_cuda_support();

    MT_CASE("unknown_buf_type_send_gives_err_arg_and_sends_nothing") {
        bad_send_sends_nothing(UNKNOWN_KIND, MPI_ERR_ARG, 1300, 0);
    }

    MT_CASE("unknown_buf_type_isend_gives_err_arg_and_sends_nothing") {
        bad_send_sends_nothing(UNKNOWN_KIND, MPI_ERR_ARG, 1301, 1);
    }

    MT_CASE("unknown_buf_type_recv_gives_err_arg_and_takes_nothing") {
        bad_recv_takes_nothing(UNKNOWN_KIND, MPI_ERR_ARG, 1302, 0);
    }

    MT_CASE("unknown_buf_type_irecv_gives_err_arg_and_takes_nothing") {
        bad_recv_takes_nothing(UNKNOWN_KIND, MPI_ERR_ARG, 1303, 1);
    }

    if (cuda == 1) {
        mt_skip("cuda_buf_type_send_without_cuda_gives_err_unsupported_operation", "CUDA is usable here");
        mt_skip("cuda_buf_type_recv_without_cuda_gives_err_unsupported_operation", "CUDA is usable here");
    } else {
        MT_CASE("cuda_buf_type_send_without_cuda_gives_err_unsupported_operation") {
            bad_send_sends_nothing(MPIX_ACC_BUF_CUDA, MPI_ERR_UNSUPPORTED_OPERATION, 1310, 0);
            bad_send_sends_nothing(MPIX_ACC_BUF_CUDA, MPI_ERR_UNSUPPORTED_OPERATION, 1311, 1);
        }
        MT_CASE("cuda_buf_type_recv_without_cuda_gives_err_unsupported_operation") {
            bad_recv_takes_nothing(MPIX_ACC_BUF_CUDA, MPI_ERR_UNSUPPORTED_OPERATION, 1312, 0);
            bad_recv_takes_nothing(MPIX_ACC_BUF_CUDA, MPI_ERR_UNSUPPORTED_OPERATION, 1313, 1);
        }
    }

    MT_CASE("unknown_buf_type_error_goes_through_comm_error_handler") {
        const int tag = 1320;
        MPI_Comm comm;
        MPI_Errhandler eh;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        MPI_Comm_create_errhandler(count_errors, &eh);
        MPI_Comm_set_errhandler(comm, eh);
        handler_calls = 0;
        handler_class = -1;
        int v = 5, w = 6;
        if (mt_rank == 0) {
            MPI_Datatype t = tagged_char(UNKNOWN_KIND);
            int rc = MPI_Send(&v, sizeof v, t, 1, tag, comm);
            MT_CHECK(rc != MPI_SUCCESS, "MPI_Send with an unknown buffer kind succeeded");
            MT_CHECK(handler_calls == 1, "the communicator's error handler ran %d times", handler_calls);
            MT_CHECK(handler_class == MPI_ERR_ARG, "the handler saw class %d, expected MPI_ERR_ARG", handler_class);
            MPI_Type_free(&t);
            MPI_Send(&w, 1, MPI_INT, 1, tag, comm);
        } else if (mt_rank == 1) {
            int r = 0;
            MPI_Recv(&r, 1, MPI_INT, 0, tag, comm, MPI_STATUS_IGNORE);
            if (r == v) MPI_Recv(&r, 1, MPI_INT, 0, tag, comm, MPI_STATUS_IGNORE);
            MT_CHECK(r == w, "received %d, expected the normal message %d", r, w);
        }
        MPI_Comm_free(&comm);
        MPI_Errhandler_free(&eh);
    }

    MT_CASE("send_to_invalid_rank_gives_err_rank") {
        int v = 0;
        if (mt_rank == 0) {
            check_error(MPI_Send(&v, 1, MPI_INT, mt_size + 3, 1330, MPI_COMM_WORLD), MPI_ERR_RANK, "MPI_Send");
            check_error(MPI_Recv(&v, 1, MPI_INT, -7, 1330, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_RANK,
                        "MPI_Recv");
        }
    }

    MT_CASE("negative_count_gives_err_count") {
        int v = 0;
        if (mt_rank == 0) {
            MPI_Request q;
            check_error(MPI_Send(&v, -1, MPI_INT, 1, 1331, MPI_COMM_WORLD), MPI_ERR_COUNT, "MPI_Send");
            check_error(MPI_Irecv(&v, -5, MPI_INT, 1, 1331, MPI_COMM_WORLD, &q), MPI_ERR_COUNT, "MPI_Irecv");
        }
    }

    MT_CASE("null_receive_buffer_gives_err_buffer_and_takes_nothing") {
        const int tag = 1332;
        if (mt_rank == 0) {
            MPI_Request q;
            int v[2] = {0, 0};
            check_error(MPI_Recv(NULL, 8, MPI_BYTE, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_BUFFER,
                        "MPI_Recv");
            check_error(MPI_Irecv(NULL, 2, MPI_INT, 1, tag, MPI_COMM_WORLD, &q), MPI_ERR_BUFFER, "MPI_Irecv");
            check_error(MPI_Recv(NULL, 1024, MPI_BYTE, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_BUFFER,
                        "MPI_Recv");
            MT_CHECK(MPI_Recv(v, 2, MPI_INT, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS,
                     "the message after the refused receives");
            MT_CHECK(v[0] == 41 && v[1] == 42, "the message after the refused receives holds %d %d", v[0], v[1]);
        } else if (mt_rank == 1) {
            int v[2] = {41, 42};
            MPI_Send(v, 2, MPI_INT, 0, tag, MPI_COMM_WORLD);
        }
    }

    MT_CASE("invalid_tag_gives_err_tag") {
        int v = 0, *ub = NULL, flag = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
        if (mt_rank == 0) {
            check_error(MPI_Send(&v, 1, MPI_INT, 1, -5, MPI_COMM_WORLD), MPI_ERR_TAG, "MPI_Send");
            check_error(MPI_Send(&v, 1, MPI_INT, 1, MPI_ANY_TAG, MPI_COMM_WORLD), MPI_ERR_TAG, "MPI_Send");
            if (flag && *ub < 0x7fffffff)
                check_error(MPI_Recv(&v, 1, MPI_INT, 1, *ub + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_TAG,
                            "MPI_Recv");
        }
    }

    MT_CASE("null_or_uncommitted_datatype_gives_err_type") {
        int v[4] = {0, 0, 0, 0};
        MPI_Datatype u;
        MPI_Type_vector(2, 1, 2, MPI_INT, &u); /* never committed */
        if (mt_rank == 0) {
            check_error(MPI_Send(v, 1, MPI_DATATYPE_NULL, 1, 1332, MPI_COMM_WORLD), MPI_ERR_TYPE, "MPI_Send");
            check_error(MPI_Send(v, 1, u, 1, 1332, MPI_COMM_WORLD), MPI_ERR_TYPE, "MPI_Send");
        }
        MPI_Type_free(&u);
    }

    MT_CASE("one_type_is_judged_anew_after_each_attribute_change") {
        /* MPI-ACC keeps a type's attributes once read; a set, a replacement or a deletion of
         * one of them must be seen by the next call on that type. */
        const int tag = 1335;
        unsigned char buf[32];
        mt_fill(buf, sizeof buf, p2p_seed(tag, 0, 0));
        MPI_Datatype t = tagged_char(MPIX_ACC_BUF_HOST);
        if (mt_rank == 0) {
            MT_CHECK(MPI_Send(buf, sizeof buf, t, 1, tag, MPI_COMM_WORLD) == MPI_SUCCESS, "first send failed");
            MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)UNKNOWN_KIND); /* replaced */
            check_error(MPI_Send(buf, sizeof buf, t, 1, tag, MPI_COMM_WORLD), MPI_ERR_ARG, "MPI_Send");
            MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_HOST);
            MPI_Type_set_attr(t, MPIX_ACC_STREAM, (void *)0x1); /* a new one: wrong on host data */
            check_error(MPI_Send(buf, sizeof buf, t, 1, tag, MPI_COMM_WORLD), MPI_ERR_ARG, "MPI_Send");
            MPI_Type_delete_attr(t, MPIX_ACC_STREAM);
            MT_CHECK(MPI_Send(buf, sizeof buf, t, 1, tag, MPI_COMM_WORLD) == MPI_SUCCESS,
                     "send after the attribute was deleted failed");
        } else if (mt_rank == 1) {
            for (int i = 0; i < 2; ++i) {
                unsigned char r[32];
                MPI_Status st;
                MT_CHECK(MPI_Recv(r, sizeof r, t, 0, tag, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "receive %d failed", i);
                P2P_CHECK_STATUS(st, 0, tag, sizeof r);
                MT_CHECK(memcmp(r, buf, sizeof r) == 0, "message %d arrived damaged", i);
            }
        }
        MPI_Type_free(&t);
    }

    MT_CASE("normal_traffic_after_errors_still_works") {
        const int tag = 1340;
        const size_t sizes[3] = {16, P2P_ENVELOPE_BYTES, P2P_RNDV_BYTES};
        if (mt_rank <= 1) {
            const int peer = 1 - mt_rank;
            for (int i = 0; i < 3; ++i) {
                unsigned char *out = p2p_alloc(sizes[i]), *in = p2p_alloc(sizes[i]);
                MPI_Status st;
                mt_fill(out, sizes[i], p2p_seed(tag, mt_rank, i));
                int rc = MPI_Sendrecv(out, (int)sizes[i], MPI_BYTE, peer, tag + i, in, (int)sizes[i], MPI_BYTE, peer,
                                      tag + i, MPI_COMM_WORLD, &st);
                MT_CHECK(rc == MPI_SUCCESS, "MPI_Sendrecv failed with class %d", p2p_class(rc));
                P2P_CHECK_STATUS(st, peer, tag + i, sizes[i]);
                P2P_CHECK_BYTES(in, sizes[i], p2p_seed(tag, peer, i), "payload");
                free(out);
                free(in);
            }
        }
    }

    return mt_finalize();
}
