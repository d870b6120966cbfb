/* MPI-ACC datatype attributes on host buffers (BRIEF A1-A4, A7): a type tagged
 * MPIX_ACC_BUF_HOST behaves exactly like an untagged one; attribute values read back
 * as set and survive MPI_Type_dup; values are captured at the call, so freeing or
 * changing the type while an MPI_Isend/MPI_Irecv is pending changes nothing; the
 * dissertation's names from mpiacc_compat.h compile; MPIX_Query_cuda_support says 1
 * exactly where the CUDA runtime finds a device, and the OpenCL query 1 exactly where
 * the OpenCL loader finds one.
 * MPIACC-TEST-RANKS: 2 */
#include "config.h" /* MPIACC_HAVE_CUDA, MPIACC_HAVE_OPENCL */
#include "p2p_util.h"
#include <mpiacc.h>
#include <mpiacc_compat.h>
#ifdef MPIACC_HAVE_OPENCL
#include "opencl_util.h"
#endif
#ifdef MPIACC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Whether a CUDA device is usable in this process, asked of the CUDA runtime itself, not
 * of MPI-ACC: never in a build without CUDA, nor where the runtime finds no driver or no
 * device. */
static int cuda_device_usable(void) {
#ifdef MPIACC_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
#else
    return 0;
#endif
}

/* Whether an OpenCL device is usable, asked of the OpenCL loader itself: a device on a
 * platform MPIACC_OPENCL_PLATFORM admits, as the library's query promises. */
static int opencl_device_usable(void) {
#ifdef MPIACC_HAVE_OPENCL
    cl_uint nd = 0;
    return ocl_matching_platform(&nd) != NULL;
#else
    return 0;
#endif
}

static MPI_Datatype tagged_dup(MPI_Datatype base, long kind) {
    MPI_Datatype t;
    MPI_Type_dup(base, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)kind);
    return t;
}

/* Rank 0 sends n bytes with stype (a char type), rank 1 receives with rtype. */
static void send_bytes_with_types(size_t n, MPI_Datatype stype, MPI_Datatype rtype, int tag) {
    unsigned char *buf = p2p_alloc(n);
    if (mt_rank == 0) {
        mt_fill(buf, n, p2p_seed(tag, 0, (int)n));
        MPI_Send(buf, (int)n, stype, 1, tag, MPI_COMM_WORLD);
    } else if (mt_rank == 1) {
        MPI_Status st;
        memset(buf, 0, n);
        MPI_Recv(buf, (int)n, rtype, 0, tag, MPI_COMM_WORLD, &st);
        P2P_CHECK_STATUS(st, 0, tag, n);
        MT_CHECK(p2p_count(&st, rtype) == (int)n, "MPI_Get_count(tagged type) %d, expected %zu",
                 p2p_count(&st, rtype), n);
        P2P_CHECK_BYTES(buf, n, p2p_seed(tag, 0, (int)n), "payload");
    }
    free(buf);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    const size_t thr = p2p_host_threshold();
    const size_t sizes[] = {0, 1, 199, P2P_ENVELOPE_BYTES, 201, P2P_RNDV_BYTES, thr};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);

    MT_CASE("acc_keyvals_are_valid_and_distinct_after_init") {
        const int k[7] = {MPIX_ACC_BUF_TYPE, MPIX_ACC_STREAM, MPIX_ACC_COMMAND_QUEUE, MPIX_ACC_EVENT,
                          MPIX_ACC_CONTEXT, MPIX_ACC_DEVICE, MPIX_ACC_OFFSET};
        for (int i = 0; i < 7; ++i) {
            MT_CHECK(k[i] != MPI_KEYVAL_INVALID, "keyval %d is MPI_KEYVAL_INVALID", i);
            for (int j = 0; j < i; ++j) MT_CHECK(k[i] != k[j], "keyvals %d and %d are equal", j, i);
        }
    }

    MT_CASE("query_cuda_support_is_1_exactly_where_a_cuda_device_is_usable") {
        const int usable = cuda_device_usable();
        int a = MPIX_Query_cuda_support(), b = MPIX_Query_cuda_support();
        MT_CHECK(a == usable && b == usable, "MPIX_Query_cuda_support returned %d then %d where the CUDA runtime %s",
                 a, b, usable ? "finds a device" : "finds none (or is not built in)");
    }

    MT_CASE("query_opencl_support_is_1_exactly_where_an_opencl_device_is_usable") {
        const int usable = opencl_device_usable();
        int a = MPIX_Query_opencl_support(), b = MPIX_Query_opencl_support();
        MT_CHECK(a == usable && b == usable, "MPIX_Query_opencl_support returned %d then %d where the loader %s", a, b,
                 usable ? "finds a device" : "finds none (or OpenCL is not built in)");
    }

    MT_CASE("type_get_attr_returns_buf_type_value_set") {
        MPI_Datatype t = tagged_dup(MPI_CHAR, MPIX_ACC_BUF_HOST);
        void *v = NULL;
        int flag = 0;
        MPI_Type_get_attr(t, MPIX_ACC_BUF_TYPE, &v, &flag);
        MT_CHECK(flag == 1, "MPI_Type_get_attr flag %d", flag);
        MT_CHECK((long)v == MPIX_ACC_BUF_HOST, "value %ld, expected MPIX_ACC_BUF_HOST", (long)v);
        MPI_Type_free(&t);
    }

    MT_CASE("type_without_attribute_get_attr_flag_false") {
        MPI_Datatype t;
        void *v = NULL;
        int flag = 1;
        MPI_Type_dup(MPI_CHAR, &t);
        MPI_Type_get_attr(t, MPIX_ACC_BUF_TYPE, &v, &flag);
        MT_CHECK(flag == 0, "flag %d on a type never tagged", flag);
        MPI_Type_free(&t);
    }

    MT_CASE("type_dup_of_tagged_type_keeps_buf_type") {
        MPI_Datatype t = tagged_dup(MPI_CHAR, MPIX_ACC_BUF_HOST), d;
        void *v = NULL;
        int flag = 0;
        MPI_Type_dup(t, &d);
        MPI_Type_free(&t);
        MPI_Type_get_attr(d, MPIX_ACC_BUF_TYPE, &v, &flag);
        MT_CHECK(flag == 1 && (long)v == MPIX_ACC_BUF_HOST, "dup: flag %d value %ld", flag, (long)v);
        send_bytes_with_types(P2P_ENVELOPE_BYTES, d, d, 1200);
        MPI_Type_free(&d);
    }

    MT_CASE("host_tagged_type_send_recv_like_untagged") {
        MPI_Datatype t = tagged_dup(MPI_CHAR, MPIX_ACC_BUF_HOST);
        for (int i = 0; i < nsizes; ++i) send_bytes_with_types(sizes[i], t, t, 1210 + i);
        MPI_Type_free(&t);
    }

    MT_CASE("host_tagged_sender_untagged_receiver_and_reverse") {
        MPI_Datatype t = tagged_dup(MPI_CHAR, MPIX_ACC_BUF_HOST);
        for (int i = 0; i < nsizes; ++i) {
            send_bytes_with_types(sizes[i], t, MPI_CHAR, 1220 + i);
            send_bytes_with_types(sizes[i], MPI_CHAR, t, 1230 + i);
        }
        MPI_Type_free(&t);
    }

    MT_CASE("host_tagged_int_type_counts_in_ints") {
        const int tag = 1240, n = (int)(P2P_RNDV_BYTES / sizeof(int));
        MPI_Datatype t = tagged_dup(MPI_INT, MPIX_ACC_BUF_HOST);
        int *buf = p2p_alloc(n * sizeof(int));
        if (mt_rank == 0) {
            mt_fill(buf, n * sizeof(int), tag);
            MPI_Send(buf, n, t, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Status st;
            MPI_Recv(buf, n, t, 0, tag, MPI_COMM_WORLD, &st);
            MT_CHECK(p2p_count(&st, t) == n && p2p_count(&st, MPI_INT) == n, "counts %d %d, expected %d",
                     p2p_count(&st, t), p2p_count(&st, MPI_INT), n);
            P2P_CHECK_BYTES(buf, n * sizeof(int), tag, "payload");
        }
        free(buf);
        MPI_Type_free(&t);
    }

    MT_CASE("host_tagged_vector_type_received_as_contiguous") {
        const int tag = 1241;
        MPI_Datatype v, t;
        MPI_Type_vector(64, 5, 9, MPI_INT, &v);
        MPI_Type_commit(&v);
        MPI_Type_dup(v, &t);
        MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_HOST);
        int src[64 * 9], dst[64 * 5];
        for (int i = 0; i < 64 * 9; ++i) src[i] = i;
        if (mt_rank == 0) {
            MPI_Send(src, 1, t, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Recv(dst, 64 * 5, MPI_INT, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            int bad = -1;
            for (int b = 0; b < 64 && bad < 0; ++b)
                for (int j = 0; j < 5; ++j)
                    if (dst[b * 5 + j] != b * 9 + j && bad < 0) bad = b * 5 + j;
            MT_CHECK(bad < 0, "element %d is %d", bad, bad >= 0 ? dst[bad] : 0);
        }
        MPI_Type_free(&t);
        MPI_Type_free(&v);
    }

    MT_CASE("isend_with_tagged_type_freed_before_wait_delivers_intact") {
        /* BRIEF A4: the paper's example frees the datatype while its Isend is pending. */
        const int tag = 1250;
        const size_t n[3] = {64, P2P_ENVELOPE_BYTES, P2P_RNDV_BYTES};
        unsigned char *buf[3];
        for (int i = 0; i < 3; ++i) buf[i] = p2p_alloc(n[i]);
        if (mt_rank == 0) {
            MPI_Request req[3];
            for (int i = 0; i < 3; ++i) {
                MPI_Datatype t = tagged_dup(MPI_CHAR, MPIX_ACC_BUF_HOST);
                mt_fill(buf[i], n[i], p2p_seed(tag, 0, i));
                MPI_Isend(buf[i], (int)n[i], t, 1, tag + i, MPI_COMM_WORLD, &req[i]);
                MPI_Type_free(&t);
            }
            MPI_Waitall(3, req, MPI_STATUSES_IGNORE);
        } else if (mt_rank == 1) {
            for (int i = 2; i >= 0; --i) {
                MPI_Status st;
                MPI_Recv(buf[i], (int)n[i], MPI_CHAR, 0, tag + i, MPI_COMM_WORLD, &st);
                P2P_CHECK_STATUS(st, 0, tag + i, n[i]);
                P2P_CHECK_BYTES(buf[i], n[i], p2p_seed(tag, 0, i), "payload");
            }
        }
        for (int i = 0; i < 3; ++i) free(buf[i]);
    }

    MT_CASE("irecv_with_tagged_type_freed_before_wait_delivers_intact") {
        const int tag = 1260;
        const size_t n[3] = {64, P2P_ENVELOPE_BYTES, P2P_RNDV_BYTES};
        unsigned char *buf[3];
        for (int i = 0; i < 3; ++i) buf[i] = p2p_alloc(n[i]);
        MPI_Request req[3];
        if (mt_rank == 1) {
            for (int i = 0; i < 3; ++i) {
                MPI_Datatype t = tagged_dup(MPI_CHAR, MPIX_ACC_BUF_HOST);
                MPI_Irecv(buf[i], (int)n[i], t, 0, tag + i, MPI_COMM_WORLD, &req[i]);
                MPI_Type_free(&t);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD); /* the types are gone before anything is sent */
        if (mt_rank == 0) {
            for (int i = 0; i < 3; ++i) {
                mt_fill(buf[i], n[i], p2p_seed(tag, 0, i));
                MPI_Send(buf[i], (int)n[i], MPI_CHAR, 1, tag + i, MPI_COMM_WORLD);
            }
        } else if (mt_rank == 1) {
            MPI_Status st[3];
            MPI_Waitall(3, req, st);
            for (int i = 0; i < 3; ++i) {
                P2P_CHECK_STATUS(st[i], 0, tag + i, n[i]);
                P2P_CHECK_BYTES(buf[i], n[i], p2p_seed(tag, 0, i), "payload");
            }
        }
        for (int i = 0; i < 3; ++i) free(buf[i]);
    }

    MT_CASE("attribute_changed_after_isend_does_not_affect_it") {
        /* The value is captured at the call: retagging the type with an unknown kind
         * while the send is pending must neither fail it nor change its bytes. */
        const int tag = 1270;
        const size_t n = P2P_RNDV_BYTES;
        unsigned char *buf = p2p_alloc(n);
        if (mt_rank == 0) {
            MPI_Datatype t = tagged_dup(MPI_CHAR, MPIX_ACC_BUF_HOST);
            MPI_Request q;
            mt_fill(buf, n, tag);
            MPI_Isend(buf, (int)n, t, 1, tag, MPI_COMM_WORLD, &q);
            MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)42);
            int rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
            MT_CHECK(rc == MPI_SUCCESS, "MPI_Wait failed after the type was retagged");
            MPI_Type_delete_attr(t, MPIX_ACC_BUF_TYPE);
            MPI_Type_free(&t);
        } else if (mt_rank == 1) {
            MPI_Status st;
            MPI_Recv(buf, (int)n, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st);
            P2P_CHECK_STATUS(st, 0, tag, n);
            P2P_CHECK_BYTES(buf, n, tag, "payload");
        }
        free(buf);
    }

    MT_CASE("type_delete_attr_then_send_like_untagged") {
        MPI_Datatype t = tagged_dup(MPI_CHAR, MPIX_ACC_BUF_HOST);
        void *v;
        int flag = 1;
        MPI_Type_delete_attr(t, MPIX_ACC_BUF_TYPE);
        MPI_Type_get_attr(t, MPIX_ACC_BUF_TYPE, &v, &flag);
        MT_CHECK(flag == 0, "attribute still there after MPI_Type_delete_attr");
        send_bytes_with_types(P2P_ENVELOPE_BYTES, t, t, 1280);
        send_bytes_with_types(P2P_RNDV_BYTES, t, t, 1281);
        MPI_Type_free(&t);
    }

    MT_CASE("recv_init_startall_with_tagged_host_type_reused_100_times") {
        /* BRIEF A7 and E1: persistent receives of fixed-size fragments with Startall. */
        enum { K = 2, ROUNDS = 100, FRAG = 256 };
        const int tag = 1290;
        MPI_Datatype t = tagged_dup(MPI_BYTE, MPIX_ACC_BUF_HOST);
        unsigned char buf[K][FRAG];
        MPI_Request req[K];
        if (mt_rank <= 1) {
            for (int k = 0; k < K; ++k) {
                if (mt_rank == 1)
                    MPI_Recv_init(buf[k], FRAG, t, 0, tag + k, MPI_COMM_WORLD, &req[k]);
                else
                    MPI_Send_init(buf[k], FRAG, t, 1, tag + k, MPI_COMM_WORLD, &req[k]);
            }
            int bad = -1;
            for (int r = 0; r < ROUNDS; ++r) {
                for (int k = 0; k < K; ++k) {
                    if (mt_rank == 0) mt_fill(buf[k], FRAG, p2p_seed(tag + k, 0, r));
                    else memset(buf[k], 0, FRAG);
                }
                MPI_Startall(K, req);
                MPI_Waitall(K, req, MPI_STATUSES_IGNORE);
                if (mt_rank == 1)
                    for (int k = 0; k < K; ++k)
                        if (bad < 0 && mt_verify(buf[k], FRAG, p2p_seed(tag + k, 0, r)) != (size_t)-1) bad = r;
            }
            MT_CHECK(bad < 0, "round %d delivered other bytes", bad);
            for (int k = 0; k < K; ++k) MPI_Request_free(&req[k]);
        }
        MPI_Type_free(&t);
    }

    MT_CASE("compat_names_compile_and_equal_mpix_names") {
        MT_CHECK(BUF_TYPE == MPIX_ACC_BUF_TYPE, "BUF_TYPE");
        MT_CHECK(BUF_TYPE_CUDA == (void *)(long)MPIX_ACC_BUF_CUDA, "BUF_TYPE_CUDA");
        MT_CHECK(BUF_TYPE_OPENCL == (void *)(long)MPIX_ACC_BUF_OPENCL, "BUF_TYPE_OPENCL");
        MT_CHECK(BUF_TYPE_OCL == BUF_TYPE_OPENCL, "BUF_TYPE_OCL");
        MT_CHECK(STREAM_TYPE == MPIX_ACC_STREAM, "STREAM_TYPE");
        MT_CHECK(COMMAND_QUEUE == MPIX_ACC_COMMAND_QUEUE, "COMMAND_QUEUE");
        MT_CHECK(EVENT == MPIX_ACC_EVENT, "EVENT");
        /* the dissertation's calling pattern, on a host buffer */
        MPI_Datatype t;
        MPI_Type_dup(MPI_CHAR, &t);
        MPI_Type_set_attr(t, BUF_TYPE, (void *)(long)MPIX_ACC_BUF_HOST);
        send_bytes_with_types(1000, t, t, 1295);
        MPI_Type_free(&t);
    }

    return mt_finalize();
}
