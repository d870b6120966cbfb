/* What every collective refuses, whatever the buffer kinds: a datatype whose MPI-ACC
 * attributes describe no buffer (an unknown MPIX_ACC_BUF_TYPE value) in an argument
 * significant at the calling rank gets MPI_ERR_ARG through the communicator's error
 * handler, with a message naming the call, the argument and the attribute, before MPICH
 * sees the buffer. Every rank passes the same type, so every rank fails locally and none
 * waits in the collective. Arguments that are not significant (a non-root's receive side
 * of a gather) are not looked at, and MPI_IN_PLACE is fine. Traffic afterwards is
 * unaffected. Collectives on device buffers and their results: coll_device.c.
 * MPIACC-TEST-RANKS: 2 */
#include "mpiacc.h"
#include "p2p_util.h"

#define W MPI_COMM_WORLD

/* rc is MPI_ERR_ARG, and its string names the call, the argument and the attribute, in
 * MPI-ACC's own words. */
static void check_bad_kind(int rc, const char *call, const char *arg) {
    MT_CHECK(rc != MPI_SUCCESS && p2p_class(rc) == MPI_ERR_ARG, "%s: class %d, expected MPI_ERR_ARG", call,
             rc == MPI_SUCCESS ? 0 : p2p_class(rc));
    if (rc == MPI_SUCCESS) return;
    char s[MPI_MAX_ERROR_STRING + 1] = "", want[128];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    snprintf(want, sizeof want, "%s(%s", call, arg);
    MT_CHECK(strstr(s, want) != NULL, "%s: the error string does not name \"%s\": \"%s\"", call, want, s);
    MT_CHECK(strstr(s, "MPIX_ACC_BUF_TYPE") != NULL, "%s: the error string does not name the attribute: \"%s\"", call,
             s);
    MT_CHECK(p2p_plain_words(s), "%s: the error string has MPICH's or internal words: \"%s\"", call, s);
    MT_CHECK(len == (int)strlen(s), "%s: resultlen %d for a string of %zu", call, len, strlen(s));
}

/* Every collective with `buf` described by `t` in the arguments named. */
static void refuse_everywhere(void *buf, MPI_Datatype t, MPI_Comm ring) {
    int host[4] = {0, 0, 0, 0}, counts[2] = {1, 1}, displs[2] = {0, 1};
    MPI_Datatype types[2] = {t, t};
    MPI_Request q = MPI_REQUEST_NULL;
    check_bad_kind(MPI_Bcast(buf, 1, t, 0, W), "MPI_Bcast", "buffer");
    check_bad_kind(MPI_Reduce(buf, host, 1, t, MPI_BOR, 0, W), "MPI_Reduce", "sendbuf");
    /* one type describes both buffers of a reduction: the send side is looked at first */
    check_bad_kind(MPI_Allreduce(host, buf, 1, t, MPI_BOR, W), "MPI_Allreduce", "sendbuf");
    check_bad_kind(MPI_Gather(buf, 1, t, host, 1, MPI_BYTE, 0, W), "MPI_Gather", "sendbuf");
    check_bad_kind(MPI_Scatter(host, 1, MPI_BYTE, buf, 1, t, 0, W), "MPI_Scatter", "recvbuf");
    check_bad_kind(MPI_Allgather(host, 1, MPI_BYTE, buf, 1, t, W), "MPI_Allgather", "recvbuf");
    check_bad_kind(MPI_Alltoall(buf, 1, t, host, 1, MPI_BYTE, W), "MPI_Alltoall", "sendbuf");
    check_bad_kind(MPI_Alltoallw(buf, counts, displs, types, host, counts, displs, types, W), "MPI_Alltoallw",
                   "sendbuf");
    check_bad_kind(MPI_Reduce_scatter_block(buf, host, 1, t, MPI_BOR, W), "MPI_Reduce_scatter_block", "sendbuf");
    check_bad_kind(MPI_Scan(buf, host, 1, t, MPI_BOR, W), "MPI_Scan", "sendbuf");
    check_bad_kind(MPI_Neighbor_allgather(buf, 1, t, host, 1, MPI_BYTE, ring), "MPI_Neighbor_allgather", "sendbuf");
    check_bad_kind(MPI_Ibcast(buf, 1, t, 0, W, &q), "MPI_Ibcast", "buffer");
    check_bad_kind(MPI_Iallreduce(buf, host, 1, t, MPI_BOR, W, &q), "MPI_Iallreduce", "sendbuf");
    check_bad_kind(MPI_Ialltoallw(host, counts, displs, types, buf, counts, displs, types, W, &q), "MPI_Ialltoallw",
                   "sendbuf");
    /* MPI-4: large-count, persistent, and both */
    check_bad_kind(MPI_Bcast_c(buf, 1, t, 0, W), "MPI_Bcast_c", "buffer");
    check_bad_kind(MPI_Allreduce_c(host, buf, 1, t, MPI_BOR, W), "MPI_Allreduce_c", "sendbuf");
    check_bad_kind(MPI_Ialltoall_c(buf, 1, t, host, 1, MPI_BYTE, W, &q), "MPI_Ialltoall_c", "sendbuf");
    check_bad_kind(MPI_Bcast_init(buf, 1, t, 0, W, MPI_INFO_NULL, &q), "MPI_Bcast_init", "buffer");
    check_bad_kind(MPI_Gather_init(buf, 1, t, host, 1, MPI_BYTE, 0, W, MPI_INFO_NULL, &q), "MPI_Gather_init",
                   "sendbuf");
    check_bad_kind(MPI_Allgather_init_c(host, 1, MPI_BYTE, buf, 1, t, W, MPI_INFO_NULL, &q), "MPI_Allgather_init_c",
                   "recvbuf");
    check_bad_kind(MPI_Ineighbor_alltoall(buf, 1, t, host, 1, MPI_BYTE, ring, &q), "MPI_Ineighbor_alltoall", "sendbuf");
    MT_CHECK(q == MPI_REQUEST_NULL, "a refused nonblocking collective set its request");
}

/* A host Bcast and Allreduce, and a message rank 0 -> rank 1, all as usual. */
static void traffic_as_usual(int tag) {
    int v = mt_rank == 0 ? 1234 : -1, one = 1, sum = 0;
    MT_CHECK(MPI_Bcast(&v, 1, MPI_INT, 0, W) == MPI_SUCCESS && v == 1234, "MPI_Bcast afterwards gave %d", v);
    MT_CHECK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, W) == MPI_SUCCESS && sum == mt_size,
             "MPI_Allreduce afterwards gave %d", sum);
    unsigned char m[64], r[64];
    mt_fill(m, sizeof m, (uint64_t)tag);
    if (mt_rank == 0) MPI_Send(m, sizeof m, MPI_BYTE, 1, tag, W);
    if (mt_rank == 1) {
        MPI_Status st;
        MPI_Recv(r, sizeof r, MPI_BYTE, 0, tag, W, &st);
        P2P_CHECK_STATUS(st, 0, tag, sizeof m);
        P2P_CHECK_BYTES(r, sizeof r, (uint64_t)tag, "message after the refusals");
    }
}

static int handler_calls, handler_class;
static void count_errors(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    ++handler_calls;
    MPI_Error_class(*code, &handler_class);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(W, MPI_ERRORS_RETURN);
    MPI_Comm ring;
    {
        int dims[1] = {mt_size}, periods[1] = {1};
        MPI_Cart_create(W, 1, dims, periods, 0, &ring);
        MPI_Comm_set_errhandler(ring, MPI_ERRORS_RETURN);
    }
    /* A kind MPI-ACC does not know: no buffer can be of it, on any machine. */
    MPI_Datatype bad_t;
    MPI_Type_dup(MPI_BYTE, &bad_t);
    MPI_Type_set_attr(bad_t, MPIX_ACC_BUF_TYPE, (void *)42L);
    int host[4] = {0, 0, 0, 0};

    MT_CASE("collectives_refuse_an_unknown_buffer_kind_naming_call_and_argument") {
        refuse_everywhere(host, bad_t, ring);
        traffic_as_usual(4001);
    }

    MT_CASE("arguments_not_significant_here_and_in_place_are_not_refused") {
        int mine = 10 + mt_rank, all[2] = {-1, -1}, part = -1;
        /* Non-roots' receive side of a gather and send side of a scatter: any type. */
        int rc =
            MPI_Gather(&mine, 1, MPI_INT, mt_rank == 0 ? (void *)all : NULL, 1, mt_rank == 0 ? MPI_INT : bad_t, 0, W);
        MT_CHECK(rc == MPI_SUCCESS, "MPI_Gather with an unknown kind at a non-root's recvbuf: class %d", p2p_class(rc));
        if (mt_rank == 0) MT_CHECK(all[0] == 10 && all[1] == 11, "MPI_Gather gave %d %d", all[0], all[1]);
        int src[2] = {20, 21};
        rc = MPI_Scatter(mt_rank == 0 ? (void *)src : NULL, 1, mt_rank == 0 ? MPI_INT : bad_t, &part, 1, MPI_INT, 0, W);
        MT_CHECK(rc == MPI_SUCCESS && part == 20 + mt_rank, "MPI_Scatter: class %d, part %d",
                 rc == MPI_SUCCESS ? 0 : p2p_class(rc), part);
        int v = 1 + mt_rank;
        rc = MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, W);
        MT_CHECK(rc == MPI_SUCCESS && v == 3, "MPI_Allreduce(MPI_IN_PLACE): class %d, %d",
                 rc == MPI_SUCCESS ? 0 : p2p_class(rc), v);
    }

    MT_CASE("persistent_and_large_count_collectives_on_host_buffers_work") {
        int v = 0, sum = -1;
        MPI_Request q;
        MT_CHECK(MPI_Allreduce_init(&v, &sum, 1, MPI_INT, MPI_SUM, W, MPI_INFO_NULL, &q) == MPI_SUCCESS,
                 "MPI_Allreduce_init failed");
        for (int round = 1; round <= 3; ++round) {
            v = round * (1 + mt_rank);
            MPI_Start(&q);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
            MT_CHECK(sum == round * 3, "round %d of a persistent MPI_Allreduce gave %d", round, sum);
        }
        MPI_Request_free(&q);
        long long big[4] = {0, 0, 0, 0};
        if (mt_rank == 0) big[0] = big[3] = 77;
        MT_CHECK(MPI_Bcast_c(big, 4, MPI_LONG_LONG, 0, W) == MPI_SUCCESS && big[0] == 77 && big[3] == 77,
                 "MPI_Bcast_c gave %lld %lld", big[0], big[3]);
    }

    MT_CASE("a_refusal_goes_through_the_communicators_error_handler") {
        MPI_Comm c;
        MPI_Errhandler eh;
        MPI_Comm_dup(W, &c);
        MPI_Comm_create_errhandler(count_errors, &eh);
        MPI_Comm_set_errhandler(c, eh);
        handler_calls = 0;
        handler_class = -1;
        int rc = MPI_Allreduce(host, host + 1, 1, bad_t, MPI_BOR, c);
        MT_CHECK(p2p_class(rc) == MPI_ERR_ARG, "MPI_Allreduce: class %d", p2p_class(rc));
        MT_CHECK(handler_calls == 1 && handler_class == MPI_ERR_ARG, "the handler ran %d times (class %d)",
                 handler_calls, handler_class);
        MPI_Errhandler_free(&eh);
        MPI_Comm_free(&c);
    }

    MPI_Type_free(&bad_t);
    MPI_Comm_free(&ring);
    return mt_finalize();
}
