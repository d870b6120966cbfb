/* Derived datatypes on cl_mem buffers, packed and unpacked on the device: every pairing of
 * host and OpenCL sender and receiver, at an eager size and at several MiB (pipeline
 * chunks), with types that differ but share a signature (a vector received as contiguous
 * doubles, a transpose of blocklength 1, an indexed triangle, a struct), nonblocking calls,
 * MPI_Probe and MPI_Get_count, truncation (MPI_ERR_TRUNCATE, count 0, nothing written, as
 * MPICH), a footprint outside the cl_mem (MPI_ERR_TYPE), and guard bytes: the bytes a
 * receive type skips keep their pattern. Expected bytes come from MPI_Pack and MPI_Unpack
 * of the same data in host memory. A second send of a type flattens nothing, and 4 MiB
 * typed messages (MPI_Sendrecv_replace) go in chunks.
 * MPIACC-TEST-RANKS: 2 */
#include "any_buffer.h"

#define W MPI_COMM_WORLD
#define PATTERN 0xa5

/* Bytes from the origin to the end of `count` elements (types here have lb >= 0). */
static size_t span_of(MPI_Datatype t, int count) {
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(t, &lb, &ext);
    MPI_Type_get_true_extent(t, &tlb, &text);
    return count == 0 ? 0 : (size_t)(tlb + (MPI_Aint)(count - 1) * ext + text);
}

/* `t` for a buffer of `kind`: a duplicate, tagged for the cl_mem when it is one. */
static MPI_Datatype typed_for(int kind, MPI_Datatype t, ocl_env *e) {
    MPI_Datatype d;
    MPI_Type_dup(t, &d);
    if (kind == ANY_OPENCL) {
        MPI_Type_set_attr(d, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_OPENCL);
        MPI_Type_set_attr(d, MPIX_ACC_COMMAND_QUEUE, (void *)e->queue);
    }
    MPI_Type_commit(&d);
    return d;
}

typedef struct {
    MPI_Datatype type;
    int count;
} typed_side;

/* What a receive of (r) must hold after (s) was sent with mt_fill(seed) bytes: the
 * receive buffer's pattern with the packed stream unpacked into it, by MPICH on the host. */
static unsigned char *expected_bytes(typed_side s, typed_side r, uint64_t seed, size_t rspan, int truncated) {
    unsigned char *out = p2p_alloc(rspan);
    memset(out, PATTERN, rspan);
    if (truncated) return out;
    const size_t sspan = span_of(s.type, s.count);
    unsigned char *src = p2p_alloc(sspan);
    mt_fill(src, sspan, seed);
    int size = 0, pos = 0;
    MPI_Pack_size(s.count, s.type, W, &size);
    unsigned char *packed = p2p_alloc((size_t)size);
    MPI_Pack(src, s.count, s.type, packed, size, &pos, W);
    const int n = pos;
    pos = 0;
    MPI_Unpack(packed, n, &pos, out, r.count, r.type, W);
    free(packed);
    free(src);
    return out;
}

static void check_same(const unsigned char *got, const unsigned char *want, size_t n, const char *what) {
    size_t i = 0;
    while (i < n && got[i] == want[i]) ++i;
    MT_CHECK(i == n, "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i, n, i < n ? got[i] : 0,
             i < n ? want[i] : 0);
}

/* One message from rank 0 to rank 1. `mode`: 0 blocking, 1 nonblocking, 2 the receiver
 * probes first and checks MPI_Get_count in the receive type. */
static void transfer(const char *name, int skind, typed_side s, int rkind, typed_side r, int mode, ocl_env *e,
                     int tag) {
    MT_CASE(name) {
        const uint64_t seed = p2p_seed(tag, 0, 0);
        int ssize = 0, rsize = 0;
        MPI_Type_size(s.type, &ssize);
        MPI_Type_size(r.type, &rsize);
        const long long sent = (long long)ssize * s.count, room = (long long)rsize * r.count;
        const int truncated = sent > room;
        if (mt_rank == 0) {
            const size_t span = span_of(s.type, s.count);
            any_buffer b = any_alloc(skind, span, e);
            any_fill(&b, span, seed);
            MPI_Datatype t = typed_for(skind, s.type, e);
            MPI_Request q;
            int rc = mode == 1 ? MPI_Isend(any_ptr(&b), s.count, t, 1, tag, W, &q)
                               : MPI_Send(any_ptr(&b), s.count, t, 1, tag, W);
            if (mode == 1 && rc == MPI_SUCCESS) rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
            MT_CHECK(rc == MPI_SUCCESS, "the send returned class %d", p2p_class(rc));
            MPI_Type_free(&t);
            any_free(&b);
        } else if (mt_rank == 1) {
            const size_t span = span_of(r.type, r.count) + 4096; /* guard bytes past the end */
            any_buffer b = any_alloc(rkind, span, e);
            any_set(&b, PATTERN);
            MPI_Datatype t = typed_for(rkind, r.type, e);
            MPI_Status st;
            if (mode == 2) {
                MT_CHECK(MPI_Probe(0, tag, W, &st) == MPI_SUCCESS, "MPI_Probe failed");
                int bytes = -1, elements = -1;
                MPI_Get_count(&st, MPI_BYTE, &bytes);
                MPI_Get_count(&st, r.type, &elements);
                MT_CHECK(bytes == (int)sent, "MPI_Probe: count %d bytes, expected %lld", bytes, sent);
                const int want = rsize && sent % rsize == 0 ? (int)(sent / rsize) : MPI_UNDEFINED;
                MT_CHECK(elements == want, "MPI_Get_count in the receive type: %d, expected %d", elements, want);
            }
            MPI_Request q;
            int rc = mode == 1 ? MPI_Irecv(any_ptr(&b), r.count, t, 0, tag, W, &q)
                               : MPI_Recv(any_ptr(&b), r.count, t, 0, tag, W, &st);
            if (mode == 1 && rc == MPI_SUCCESS) rc = MPI_Wait(&q, &st);
            if (truncated) {
                MT_CHECK(p2p_class(rc) == MPI_ERR_TRUNCATE, "a receive of %lld of %lld bytes: class %d", room, sent,
                         p2p_class(rc));
                MT_CHECK(p2p_count(&st, MPI_BYTE) == 0, "truncated: status count %d, expected 0 as MPICH gives",
                         p2p_count(&st, MPI_BYTE));
            } else {
                MT_CHECK(rc == MPI_SUCCESS, "the receive returned class %d", p2p_class(rc));
                P2P_CHECK_STATUS(st, 0, tag, sent);
            }
            unsigned char *got = any_read(&b);
            unsigned char *want = expected_bytes(s, r, seed, span, truncated);
            check_same(got, want, span, "the receive buffer (guard bytes included)");
            free(got);
            free(want);
            MPI_Type_free(&t);
            any_free(&b);
        }
    }
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(W, MPI_ERRORS_RETURN);
    static const char *const need[] = {"opencl_typed_transfers"};
    ocl_env e = ocl_setup_or_skip(need, 1);

    /* A column block of a 64 x 64 double matrix (64 rows of 2 doubles: 1 KiB packed), and
     * half of each row of a 16384-row matrix of 64 doubles (4 MiB packed: pipeline chunks). */
    MPI_Datatype col_small, col_big, half_big, contig_small, contig_big, tri, tri_dense, rows, transpose, pair, strct,
        strct_resized;
    MPI_Type_vector(64, 2, 64, MPI_DOUBLE, &col_small);
    MPI_Type_vector(16384, 32, 64, MPI_DOUBLE, &col_big);
    MPI_Type_vector(8192, 32, 64, MPI_DOUBLE, &half_big);
    MPI_Type_contiguous(2 * 64, MPI_DOUBLE, &contig_small);
    MPI_Type_contiguous(16384 * 32, MPI_DOUBLE, &contig_big);
    /* A lower triangle of a 96 x 96 int matrix, and the same ints dense. */
    int bl[96], dp[96], total = 0;
    for (int i = 0; i < 96; ++i) {
        bl[i] = i + 1;
        dp[i] = i * 96;
        total += i + 1;
    }
    MPI_Type_indexed(96, bl, dp, MPI_INT, &tri);
    MPI_Type_contiguous(total, MPI_INT, &tri_dense);
    /* A transpose: a 48 x 48 float matrix read row by row one way and column by column
     * (blocklength 1) the other. */
    MPI_Type_contiguous(48 * 48, MPI_FLOAT, &rows);
    MPI_Datatype column;
    MPI_Type_vector(48, 1, 48, MPI_FLOAT, &column);
    MPI_Type_create_resized(column, 0, sizeof(float), &pair);
    MPI_Datatype columns;
    MPI_Type_contiguous(48, pair, &columns);
    MPI_Type_create_resized(columns, 0, 48 * 48 * sizeof(float), &transpose);
    MPI_Type_free(&columns);
    MPI_Type_free(&column);
    /* A struct of an int and two doubles with a hole, resized so that counts above 1 leave gaps. */
    int sl[2] = {1, 2};
    MPI_Aint sd[2] = {4, 24};
    MPI_Datatype st_types[2] = {MPI_INT, MPI_DOUBLE};
    MPI_Type_create_struct(2, sl, sd, st_types, &strct);
    MPI_Type_create_resized(strct, 0, 64, &strct_resized);
    MPI_Datatype all[] = {col_small, col_big, half_big,  contig_small, contig_big, tri,
                          tri_dense, rows,    transpose, pair,         strct,      strct_resized};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) MPI_Type_commit(&all[i]);

    const int kinds[2] = {ANY_HOST, ANY_OPENCL};
    char name[200];
    int tag = 100;
    for (int sk = 0; sk < 2; ++sk)
        for (int rk = 0; rk < 2; ++rk) {
            const char *sn = any_kind_name(kinds[sk]), *rn = any_kind_name(kinds[rk]);
            struct {
                const char *what;
                typed_side s, r;
                int mode;
            } cases[] = {
                {"vector_1k", {col_small, 1}, {col_small, 1}, 0},
                {"vector_4m", {col_big, 1}, {col_big, 1}, 0},
                {"vector_to_contiguous_1k", {col_small, 1}, {contig_small, 1}, 0},
                {"contiguous_to_vector_4m_nonblocking", {contig_big, 1}, {col_big, 1}, 1},
                {"vector_4m_nonblocking", {col_big, 1}, {col_big, 1}, 1},
                {"lower_triangle_to_dense", {tri, 3}, {tri_dense, 3}, 0},
                {"transpose_blocklength_1", {rows, 2}, {transpose, 2}, 0},
                {"struct_resized_probe_get_count", {strct_resized, 500}, {strct_resized, 500}, 2},
                {"vector_4m_truncated", {col_big, 1}, {half_big, 1}, 0},
                {"vector_1k_truncated", {col_small, 2}, {col_small, 1}, 0},
            };
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
                if (kinds[sk] == ANY_HOST && kinds[rk] == ANY_HOST) continue; /* p2p_datatypes has those */
                snprintf(
                    name, sizeof name, "%s_%s_to_%s%s", cases[c].what, sn, rn,
                    strstr(cases[c].what, "truncated") ? "_is_mpi_err_truncate_nothing_written" : "_bytes_and_guards");
                transfer(name, kinds[sk], cases[c].s, kinds[rk], cases[c].r, cases[c].mode, &e, tag);
                tag += 2;
            }
        }

    MT_CASE("vector_on_cl_mem_reaching_before_its_offset_is_mpi_err_type") {
        /* A type whose lowest byte lies before its origin, at MPIX_ACC_OFFSET 8: 16 bytes
         * before the cl_mem. */
        int len = 4;
        MPI_Aint disp = -24;
        MPI_Datatype before, t;
        MPI_Type_create_hindexed(1, &len, &disp, MPI_INT, &before);
        MPI_Type_commit(&before);
        t = typed_for(ANY_OPENCL, before, &e);
        MPI_Type_set_attr(t, MPIX_ACC_OFFSET, (void *)8);
        cl_mem m = ocl_alloc(&e, 256);
        int rc = MPI_Send(m, 1, t, 1 - mt_rank, 9, W);
        MT_CHECK(p2p_class(rc) == MPI_ERR_TYPE, "MPI_Send returned class %d, expected MPI_ERR_TYPE", p2p_class(rc));
        char s[MPI_MAX_ERROR_STRING];
        int n = 0;
        MPI_Error_string(rc, s, &n);
        MT_CHECK(strstr(s, "MPI_Send") && strstr(s, "MPIX_ACC_OFFSET"), "the message names no call or offset: %s", s);
        clReleaseMemObject(m);
        MPI_Type_free(&t);
        MPI_Type_free(&before);
    }

    MT_CASE("second_send_of_a_cl_mem_type_flattens_nothing_and_4m_goes_in_chunks") {
        /* Both ranks send and receive: the same tagged types twice each. */
        MPI_Datatype small = typed_for(ANY_OPENCL, col_small, &e), big = typed_for(ANY_OPENCL, col_big, &e);
        const size_t small_span = span_of(col_small, 1), big_span = span_of(col_big, 1);
        cl_mem s = ocl_alloc(&e, small_span), b = ocl_alloc(&e, big_span);
        const int peer = 1 - mt_rank;
        long long flattened[3], typed[3], chunked[3];
        for (int round = 0; round < 3; ++round) {
            flattened[round] = mpiacc_counter_value("datatype.flatten");
            typed[round] = mpiacc_counter_value("protocol.typed_device_buffers");
            chunked[round] =
                mpiacc_counter_value("protocol.recv.pipeline") + mpiacc_counter_value("protocol.recv.shared");
            if (round == 2) break;
            MPI_Datatype t = round == 0 ? small : big;
            cl_mem m = round == 0 ? s : b;
            int rc = MPI_Sendrecv_replace(m, 1, t, peer, 40 + round, peer, 40 + round, W, MPI_STATUS_IGNORE);
            MT_CHECK(rc == MPI_SUCCESS, "round %d: MPI_Sendrecv_replace returned class %d", round, p2p_class(rc));
            rc = MPI_Sendrecv_replace(m, 1, t, peer, 50 + round, peer, 50 + round, W, MPI_STATUS_IGNORE);
            MT_CHECK(rc == MPI_SUCCESS, "round %d: again: class %d", round, p2p_class(rc));
        }
        /* Each type is flattened at most once (its first use), never at the second send. */
        MT_CHECK(flattened[2] - flattened[0] <= 2, "the same two types were flattened %lld times",
                 flattened[2] - flattened[0]);
        MT_CHECK(typed[1] - typed[0] == 4 && typed[2] - typed[1] == 4,
                 "typed device buffers made: %lld and %lld, expected 4 a round (2 sends, 2 receives)",
                 typed[1] - typed[0], typed[2] - typed[1]);
        MT_CHECK(chunked[2] - chunked[1] == 2, "4 MiB typed messages received in chunks: %lld of 2",
                 chunked[2] - chunked[1]);
        clReleaseMemObject(s);
        clReleaseMemObject(b);
        MPI_Type_free(&small);
        MPI_Type_free(&big);
    }

    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) MPI_Type_free(&all[i]);
    ocl_teardown(&e);
    return mt_finalize();
}
