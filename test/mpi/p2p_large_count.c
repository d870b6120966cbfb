/* MPI-4's large-count point-to-point calls (MPI_Send_c, MPI_Recv_c, ...) take the paths
 * of their int twins. A large-count receive of a message sent by rendezvous gets the data,
 * not the envelope; MPI-ACC attributes hold for a count above INT_MAX (carried on the
 * one-element contiguous type it becomes); and a message of more than INT_MAX elements
 * arrives whole, with status and MPI_Get_count_c as MPICH gives them.
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"
#include <limits.h>
#include <mpiacc.h>

#define W MPI_COMM_WORLD

/* Fast pattern for multi-GiB buffers: word i holds i * K + seed. */
static void fill_words(uint64_t *w, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; ++i) w[i] = i * 0x9E3779B97F4A7C15ull + seed;
}
static size_t first_bad_word(const uint64_t *w, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; ++i)
        if (w[i] != i * 0x9E3779B97F4A7C15ull + seed) return i;
    return (size_t)-1;
}

static int handler_calls;
static void count_errors(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    (void)code;
    ++handler_calls;
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);

    /* Types made by the large-count constructors (MPI_Type_vector_c, as MPI_Send_c's own
     * types are) answer only the large-count queries in MPICH 4.0.2: describing them with
     * MPI_Type_get_envelope raised an error on a handler the user never called, fatal by
     * default (MPICH's pt2pt/pt2pt_large aborted). */
    MT_CASE("types_from_large_count_constructors_travel_without_an_error") {
        MPI_Errhandler eh;
        MPI_Comm_create_errhandler(count_errors, &eh);
        MPI_Comm_set_errhandler(W, eh);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, eh);
        handler_calls = 0;
        MPI_Datatype vec, contig;
        MPI_Type_vector_c(64, 2, 3, MPI_INT, &vec); /* not dense: packed through MPI-ACC */
        MPI_Type_contiguous_c(100, MPI_INT, &contig);
        MPI_Type_commit(&vec);
        MPI_Type_commit(&contig);
        int buf[64 * 3];
        const int tag = 4990;
        for (int k = 0; k < 2; ++k) {
            MPI_Datatype t = k ? contig : vec;
            const int ints = k ? 100 : 64 * 3;
            if (mt_rank == 0) {
                for (int i = 0; i < ints; ++i) buf[i] = tag * 1000 + k * 500 + i;
                MT_CHECK(MPI_Send(buf, 1, t, 1, tag + k, W) == MPI_SUCCESS, "MPI_Send failed");
            } else if (mt_rank == 1) {
                for (int i = 0; i < ints; ++i) buf[i] = -1;
                MPI_Status st;
                MT_CHECK(MPI_Recv(buf, 1, t, 0, tag + k, W, &st) == MPI_SUCCESS, "MPI_Recv failed");
                for (int i = 0; i < ints; ++i) {
                    const int want = (k == 0 && i % 3 == 2) ? -1 : tag * 1000 + k * 500 + i;
                    if (buf[i] != want) {
                        MT_CHECK(0, "type %d: int %d is %d, expected %d", k, i, buf[i], want);
                        break;
                    }
                }
            }
        }
        MT_CHECK(handler_calls == 0, "an error handler was called %d times", handler_calls);
        MPI_Type_free(&vec);
        MPI_Type_free(&contig);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
        MPI_Errhandler_free(&eh);
    }
    MPI_Comm_set_errhandler(W, MPI_ERRORS_RETURN);

    MT_CASE("recv_c_of_a_rendezvous_message_gets_the_data_not_the_envelope") {
        const size_t n = P2P_RNDV_BYTES;
        const int tag = 5001;
        unsigned char *buf = p2p_alloc(n);
        if (mt_rank == 0) {
            mt_fill(buf, n, tag);
            /* an int send: MPI-ACC's envelope, whatever the receive's count type */
            MT_CHECK(MPI_Send(buf, (int)n, MPI_BYTE, 1, tag, W) == MPI_SUCCESS, "MPI_Send failed");
            MPI_Request q;
            MT_CHECK(MPI_Isend_c(buf, (MPI_Count)n, MPI_BYTE, 1, tag + 1, W, &q) == MPI_SUCCESS, "MPI_Isend_c failed");
            MPI_Wait(&q, MPI_STATUS_IGNORE);
        } else if (mt_rank == 1) {
            MPI_Status st;
            MPI_Count got = -1;
            memset(buf, 0, n);
            MT_CHECK(MPI_Recv_c(buf, (MPI_Count)n + 100, MPI_BYTE, 0, tag, W, &st) == MPI_SUCCESS, "MPI_Recv_c failed");
            MPI_Get_count_c(&st, MPI_BYTE, &got);
            MT_CHECK(got == (MPI_Count)n, "MPI_Recv_c: count %lld, expected %zu", (long long)got, n);
            P2P_CHECK_BYTES(buf, n, tag, "MPI_Recv_c payload");
            MPI_Request q;
            memset(buf, 0, n);
            MT_CHECK(MPI_Irecv_c(buf, (MPI_Count)n, MPI_BYTE, 0, tag + 1, W, &q) == MPI_SUCCESS, "MPI_Irecv_c failed");
            MPI_Wait(&q, &st);
            P2P_CHECK_STATUS(st, 0, tag + 1, n);
            P2P_CHECK_BYTES(buf, n, tag, "MPI_Irecv_c payload");
        }
        free(buf);
    }

    /* A type of size 0 makes a count above INT_MAX cost no memory. Tagged with an unknown
     * buffer kind, the call must fail as the int call does (MPI_ERR_ARG): the attribute
     * went with the count. Untagged, it is an empty message. */
    MT_CASE("count_above_int_max_keeps_the_types_mpiacc_attributes") {
        const MPI_Count big = (MPI_Count)INT_MAX + 7;
        const int tag = 5003;
        MPI_Datatype empty, tagged;
        MPI_Type_contiguous(0, MPI_INT, &empty);
        MPI_Type_commit(&empty);
        MPI_Type_dup(empty, &tagged);
        MPI_Type_set_attr(tagged, MPIX_ACC_BUF_TYPE, (void *)42L);
        int x = 0;
        if (mt_rank == 0) {
            int rc = MPI_Send_c(&x, big, tagged, 1, tag, W);
            MT_CHECK(rc != MPI_SUCCESS && p2p_class(rc) == MPI_ERR_ARG, "MPI_Send_c with an unknown kind: class %d",
                     rc == MPI_SUCCESS ? 0 : p2p_class(rc));
            MT_CHECK(MPI_Send_c(&x, big, empty, 1, tag, W) == MPI_SUCCESS, "MPI_Send_c of an empty type failed");
        } else if (mt_rank == 1) {
            MPI_Status st;
            MPI_Count got = -1;
            int rc = MPI_Recv_c(&x, big, empty, 0, tag, W, &st);
            MT_CHECK(rc == MPI_SUCCESS, "MPI_Recv_c of an empty type: class %d", rc == MPI_SUCCESS ? 0 : p2p_class(rc));
            MPI_Get_count_c(&st, MPI_BYTE, &got);
            MT_CHECK(got == 0 && st.MPI_SOURCE == 0 && st.MPI_TAG == tag, "status: %lld bytes from %d tag %d",
                     (long long)got, st.MPI_SOURCE, st.MPI_TAG);
        }
        MPI_Type_free(&tagged);
        MPI_Type_free(&empty);
    }

    /* 2 GiB + 16 bytes as MPI_BYTE: more elements than an int holds, through the host
     * rendezvous (one element of a contiguous type, then MPICH's large-count data path). */
    MT_CASE("more_than_int_max_elements_arrive_whole") {
        const size_t n = ((size_t)1 << 31) + 16;
        const int tag = 5005;
        uint64_t *w = malloc(n);
        int have = w != NULL, all = 0;
        MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, W);
        if (!all) {
            MT_CHECK(0, "could not allocate 2 GiB on every rank");
        } else if (mt_rank == 0) {
            fill_words(w, n / 8, tag);
            MT_CHECK(MPI_Send_c(w, (MPI_Count)n, MPI_BYTE, 1, tag, W) == MPI_SUCCESS, "MPI_Send_c of 2 GiB failed");
        } else if (mt_rank == 1) {
            MPI_Status st;
            MPI_Count got = -1;
            memset(w, 0, n);
            MT_CHECK(MPI_Recv_c(w, (MPI_Count)n, MPI_BYTE, 0, tag, W, &st) == MPI_SUCCESS,
                     "MPI_Recv_c of 2 GiB failed");
            MPI_Get_count_c(&st, MPI_BYTE, &got);
            MT_CHECK(got == (MPI_Count)n, "count %lld, expected %zu", (long long)got, n);
            size_t bad = first_bad_word(w, n / 8, tag);
            MT_CHECK(bad == (size_t)-1, "first wrong word at %zu of %zu", bad, n / 8);
        }
        free(w);
    }

    /* An int count whose packed bytes pass INT_MAX: (1 << 29) + 4 MPI_INTs, 2 GiB + 16
     * bytes, exchanged in place both ways, blocking and not. */
    MT_CASE("sendrecv_replace_of_more_than_int_max_packed_bytes") {
        const int count = (1 << 29) + 4;
        const size_t n = (size_t)count * sizeof(int);
        uint64_t *w = malloc(n);
        int have = w != NULL, all = 0;
        MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, W);
        for (int nonblocking = 0; all && nonblocking < 2; ++nonblocking) {
            const int tag = 5007 + nonblocking;
            const char *call = nonblocking ? "MPI_Isendrecv_replace" : "MPI_Sendrecv_replace";
            MPI_Status st;
            MPI_Count got = -1;
            fill_words(w, n / 8, (uint64_t)(tag + mt_rank));
            int rc;
            if (nonblocking) {
                MPI_Request q;
                rc = MPI_Isendrecv_replace(w, count, MPI_INT, 1 - mt_rank, tag, 1 - mt_rank, tag, W, &q);
                if (rc == MPI_SUCCESS) MPI_Wait(&q, &st);
            } else {
                rc = MPI_Sendrecv_replace(w, count, MPI_INT, 1 - mt_rank, tag, 1 - mt_rank, tag, W, &st);
            }
            MT_CHECK(rc == MPI_SUCCESS, "%s of 2 GiB + 16 bytes: class %d", call,
                     rc == MPI_SUCCESS ? 0 : p2p_class(rc));
            if (rc != MPI_SUCCESS) continue;
            MPI_Get_count_c(&st, MPI_INT, &got);
            MT_CHECK(got == count, "%s: count %lld, expected %d", call, (long long)got, count);
            size_t bad = first_bad_word(w, n / 8, (uint64_t)(tag + 1 - mt_rank));
            MT_CHECK(bad == (size_t)-1, "%s: first wrong word at %zu of %zu", call, bad, n / 8);
        }
        if (!all) MT_CHECK(0, "could not allocate 2 GiB on every rank");
        free(w);
    }

    return mt_finalize();
}
