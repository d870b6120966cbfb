/* Host derived datatypes: vector, hvector, indexed, indexed_block, struct, resized and
 * subarray, sent and received with the same type or with a different type of the same
 * signature (vector to contiguous and back). Checks every byte the receive type covers
 * and that the gaps between its blocks stay untouched. Sizes include a type whose data
 * is exactly 200 bytes and a 9 MiB vector (above the host rendezvous threshold).
 *
 * Each layout is described by a byte map: map[k] is the offset in the buffer of the
 * k-th byte of the type's data, in type-map order. The sender fills its whole buffer
 * with mt_fill(seed); the k-th received byte must be mt_byte(seed, send_map[k]).
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"
#include <stddef.h>

#define SENTINEL 0xcd

struct layout {
    size_t n;      /* bytes of data */
    size_t extent; /* bytes of buffer to allocate */
    size_t *map;
};

static struct layout layout_new(size_t n, size_t extent) {
    struct layout l = {n, extent, p2p_alloc(n * sizeof(size_t))};
    return l;
}

static struct layout contiguous_layout(size_t n) {
    struct layout l = layout_new(n, n);
    for (size_t k = 0; k < n; ++k) l.map[k] = k;
    return l;
}

/* count blocks of blocklen bytes, block i starting at i * stride bytes */
static struct layout strided_layout(size_t count, size_t blocklen, size_t stride) {
    struct layout l = layout_new(count * blocklen, (count - 1) * stride + blocklen);
    size_t k = 0;
    for (size_t i = 0; i < count; ++i)
        for (size_t j = 0; j < blocklen; ++j) l.map[k++] = i * stride + j;
    return l;
}

/* blocks given in bytes */
static struct layout block_layout(int nblocks, const size_t *len, const size_t *disp) {
    size_t n = 0, extent = 0;
    for (int i = 0; i < nblocks; ++i) {
        n += len[i];
        if (disp[i] + len[i] > extent) extent = disp[i] + len[i];
    }
    struct layout l = layout_new(n, extent);
    size_t k = 0;
    for (int i = 0; i < nblocks; ++i)
        for (size_t j = 0; j < len[i]; ++j) l.map[k++] = disp[i] + j;
    return l;
}

/* Rank 0 sends `scount` of `stype` from a buffer laid out as `s`; rank 1 receives
 * `rcount` of `rtype` into a buffer laid out as `r` and checks data and gaps. */
static void transfer_and_check(MPI_Datatype stype, int scount, const struct layout *s, MPI_Datatype rtype,
                               int rcount, const struct layout *r, int tag) {
    const uint64_t seed = p2p_seed(tag, 0, 0);
    MT_CHECK(s->n == r->n, "test error: layouts of %zu and %zu bytes", s->n, r->n);
    if (mt_rank == 0) {
        unsigned char *buf = p2p_alloc(s->extent);
        mt_fill(buf, s->extent, seed);
        MPI_Send(buf, scount, stype, 1, tag, MPI_COMM_WORLD);
        free(buf);
    } else if (mt_rank == 1) {
        unsigned char *buf = p2p_alloc(r->extent), *covered = calloc(r->extent ? r->extent : 1, 1);
        MPI_Status st;
        memset(buf, SENTINEL, r->extent);
        MPI_Recv(buf, rcount, rtype, 0, tag, MPI_COMM_WORLD, &st);
        MT_CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == tag, "source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
        int elems = -1, count = -1;
        MPI_Get_count(&st, rtype, &count);
        MT_CHECK(count == rcount, "MPI_Get_count in receive-type units %d, expected %d", count, rcount);
        MPI_Get_elements(&st, MPI_BYTE, &elems);
        MT_CHECK(elems == (int)r->n, "MPI_Get_elements(MPI_BYTE) %d, expected %zu", elems, r->n);
        size_t bad = (size_t)-1;
        for (size_t k = 0; k < r->n && k < s->n; ++k) {
            covered[r->map[k]] = 1;
            if (bad == (size_t)-1 && buf[r->map[k]] != mt_byte(seed, s->map[k])) bad = k;
        }
        MT_CHECK(bad == (size_t)-1, "data byte %zu (buffer offset %zu) is wrong", bad,
                 bad == (size_t)-1 ? 0 : r->map[bad]);
        size_t gap = (size_t)-1;
        for (size_t i = 0; i < r->extent && gap == (size_t)-1; ++i)
            if (!covered[i] && buf[i] != SENTINEL) gap = i;
        MT_CHECK(gap == (size_t)-1, "gap byte at offset %zu was written", gap);
        free(buf);
        free(covered);
    }
}

static void layout_free(struct layout *l) { free(l->map); }

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);

    MT_CASE("vector_sent_and_received_as_vector_leaves_gaps_untouched") {
        MPI_Datatype v;
        MPI_Type_vector(100, 3, 7, MPI_INT, &v);
        MPI_Type_commit(&v);
        struct layout l = strided_layout(100, 3 * sizeof(int), 7 * sizeof(int));
        transfer_and_check(v, 1, &l, v, 1, &l, 1000);
        layout_free(&l);
        MPI_Type_free(&v);
    }

    MT_CASE("vector_sent_received_as_contiguous") {
        MPI_Datatype v;
        MPI_Type_vector(100, 3, 7, MPI_INT, &v);
        MPI_Type_commit(&v);
        struct layout s = strided_layout(100, 3 * sizeof(int), 7 * sizeof(int)), r = contiguous_layout(300 * sizeof(int));
        transfer_and_check(v, 1, &s, MPI_INT, 300, &r, 1001);
        layout_free(&s);
        layout_free(&r);
        MPI_Type_free(&v);
    }

    MT_CASE("contiguous_sent_received_as_vector_leaves_gaps_untouched") {
        MPI_Datatype v;
        MPI_Type_vector(100, 3, 7, MPI_INT, &v);
        MPI_Type_commit(&v);
        struct layout s = contiguous_layout(300 * sizeof(int)), r = strided_layout(100, 3 * sizeof(int), 7 * sizeof(int));
        transfer_and_check(MPI_INT, 300, &s, v, 1, &r, 1003);
        layout_free(&s);
        layout_free(&r);
        MPI_Type_free(&v);
    }

    MT_CASE("hvector_of_bytes_with_odd_stride_round_trip") {
        MPI_Datatype hv;
        MPI_Type_create_hvector(1000, 3, 7, MPI_BYTE, &hv);
        MPI_Type_commit(&hv);
        struct layout l = strided_layout(1000, 3, 7);
        transfer_and_check(hv, 1, &l, hv, 1, &l, 1004);
        layout_free(&l);
        MPI_Type_free(&hv);
    }

    MT_CASE("indexed_type_round_trip_and_received_as_contiguous") {
        /* triangular: block i has i+1 ints at int offset i*(i+1) */
        enum { NB = 40 };
        int len[NB], disp[NB];
        size_t blen[NB], bdisp[NB], total = 0;
        for (int i = 0; i < NB; ++i) {
            len[i] = i + 1;
            disp[i] = i * (i + 1);
            blen[i] = (size_t)len[i] * sizeof(int);
            bdisp[i] = (size_t)disp[i] * sizeof(int);
            total += blen[i];
        }
        MPI_Datatype t;
        MPI_Type_indexed(NB, len, disp, MPI_INT, &t);
        MPI_Type_commit(&t);
        struct layout l = block_layout(NB, blen, bdisp), c = contiguous_layout(total);
        transfer_and_check(t, 1, &l, t, 1, &l, 1005);
        transfer_and_check(t, 1, &l, MPI_BYTE, (int)total, &c, 1006);
        layout_free(&l);
        layout_free(&c);
        MPI_Type_free(&t);
    }

    MT_CASE("indexed_block_type_round_trip") {
        enum { NB = 6 };
        int disp[NB] = {9, 0, 4, 20, 14, 30}; /* out of order on purpose */
        size_t blen[NB], bdisp[NB];
        for (int i = 0; i < NB; ++i) {
            blen[i] = 2 * sizeof(double);
            bdisp[i] = (size_t)disp[i] * sizeof(double);
        }
        MPI_Datatype t;
        MPI_Type_create_indexed_block(NB, 2, disp, MPI_DOUBLE, &t);
        MPI_Type_commit(&t);
        struct layout l = block_layout(NB, blen, bdisp);
        transfer_and_check(t, 1, &l, t, 1, &l, 1007);
        layout_free(&l);
        MPI_Type_free(&t);
    }

    MT_CASE("struct_type_array_round_trip_leaves_padding_untouched") {
        struct rec {
            int a;
            double b;
            char c[3];
        };
        enum { N = 50 };
        int bl[3] = {1, 1, 3};
        MPI_Aint d[3] = {offsetof(struct rec, a), offsetof(struct rec, b), offsetof(struct rec, c)};
        MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, t0, t;
        MPI_Type_create_struct(3, bl, d, ty, &t0);
        MPI_Type_create_resized(t0, 0, sizeof(struct rec), &t);
        MPI_Type_commit(&t);
        size_t blen[3 * N], bdisp[3 * N];
        for (int i = 0; i < N; ++i) {
            blen[3 * i] = sizeof(int), bdisp[3 * i] = i * sizeof(struct rec) + offsetof(struct rec, a);
            blen[3 * i + 1] = sizeof(double), bdisp[3 * i + 1] = i * sizeof(struct rec) + offsetof(struct rec, b);
            blen[3 * i + 2] = 3, bdisp[3 * i + 2] = i * sizeof(struct rec) + offsetof(struct rec, c);
        }
        struct layout l = block_layout(3 * N, blen, bdisp);
        l.extent = N * sizeof(struct rec);
        transfer_and_check(t, N, &l, t, N, &l, 1008);
        layout_free(&l);
        MPI_Type_free(&t0);
        MPI_Type_free(&t);
    }

    MT_CASE("resized_type_with_count_round_trip_and_to_contiguous") {
        /* every third int: MPI_INT resized to an extent of three ints */
        enum { N = 500 };
        MPI_Datatype t;
        MPI_Type_create_resized(MPI_INT, 0, 3 * sizeof(int), &t);
        MPI_Type_commit(&t);
        struct layout l = strided_layout(N, sizeof(int), 3 * sizeof(int)), c = contiguous_layout(N * sizeof(int));
        transfer_and_check(t, N, &l, t, N, &l, 1009);
        transfer_and_check(t, N, &l, MPI_INT, N, &c, 1010);
        layout_free(&l);
        layout_free(&c);
        MPI_Type_free(&t);
    }

    MT_CASE("subarray_type_to_subarray_at_another_position") {
        /* a 4x5x6 block of a 10x12x14 int array (C order), from (2,3,4) to (5,1,0) */
        const int sizes[3] = {10, 12, 14}, sub[3] = {4, 5, 6}, from[3] = {2, 3, 4}, to[3] = {5, 1, 0};
        MPI_Datatype ts, tr;
        MPI_Type_create_subarray(3, sizes, sub, from, MPI_ORDER_C, MPI_INT, &ts);
        MPI_Type_create_subarray(3, sizes, sub, to, MPI_ORDER_C, MPI_INT, &tr);
        MPI_Type_commit(&ts);
        MPI_Type_commit(&tr);
        enum { NB = 4 * 5 };
        size_t blen[NB], ds[NB], dr[NB];
        int b = 0;
        for (int i = 0; i < sub[0]; ++i)
            for (int j = 0; j < sub[1]; ++j, ++b) {
                blen[b] = sub[2] * sizeof(int);
                ds[b] = (((size_t)(from[0] + i) * sizes[1] + from[1] + j) * sizes[2] + from[2]) * sizeof(int);
                dr[b] = (((size_t)(to[0] + i) * sizes[1] + to[1] + j) * sizes[2] + to[2]) * sizeof(int);
            }
        struct layout ls = block_layout(NB, blen, ds), lr = block_layout(NB, blen, dr);
        ls.extent = lr.extent = (size_t)sizes[0] * sizes[1] * sizes[2] * sizeof(int);
        transfer_and_check(ts, 1, &ls, tr, 1, &lr, 1011);
        layout_free(&ls);
        layout_free(&lr);
        MPI_Type_free(&ts);
        MPI_Type_free(&tr);
    }

    MT_CASE("vector_with_exactly_200_data_bytes_received_as_contiguous") {
        /* 5 blocks of 10 ints: 200 bytes, the envelope's length */
        MPI_Datatype v;
        MPI_Type_vector(5, 10, 20, MPI_INT, &v);
        MPI_Type_commit(&v);
        struct layout s = strided_layout(5, 10 * sizeof(int), 20 * sizeof(int)), c = contiguous_layout(200);
        transfer_and_check(v, 1, &s, MPI_BYTE, 200, &c, 1012);
        transfer_and_check(MPI_BYTE, 200, &c, v, 1, &s, 1013);
        layout_free(&s);
        layout_free(&c);
        MPI_Type_free(&v);
    }

    MT_CASE("vector_9MiB_sent_received_as_contiguous_and_back") {
        const size_t blk = 256, count = P2P_RNDV_BYTES / blk;
        MPI_Datatype v;
        MPI_Type_vector((int)count, (int)blk, (int)(2 * blk), MPI_BYTE, &v);
        MPI_Type_commit(&v);
        struct layout s = strided_layout(count, blk, 2 * blk), c = contiguous_layout(P2P_RNDV_BYTES);
        transfer_and_check(v, 1, &s, MPI_BYTE, (int)P2P_RNDV_BYTES, &c, 1014);
        transfer_and_check(MPI_BYTE, (int)P2P_RNDV_BYTES, &c, v, 1, &s, 1015);
        transfer_and_check(v, 1, &s, v, 1, &s, 1016);
        layout_free(&s);
        layout_free(&c);
        MPI_Type_free(&v);
    }

    MT_CASE("partial_derived_receive_get_count_undefined_get_elements_exact") {
        /* 7 ints into room for three triples: Get_count(triple) is MPI_UNDEFINED,
         * Get_elements(triple) is 7, and the last two ints stay untouched. */
        const int tag = 1017;
        MPI_Datatype triple;
        MPI_Type_contiguous(3, MPI_INT, &triple);
        MPI_Type_commit(&triple);
        if (mt_rank == 0) {
            int x[7] = {1, 2, 3, 4, 5, 6, 7};
            MPI_Send(x, 7, MPI_INT, 1, tag, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            int y[9];
            MPI_Status st;
            for (int i = 0; i < 9; ++i) y[i] = -1;
            MPI_Recv(y, 3, triple, 0, tag, MPI_COMM_WORLD, &st);
            int count = 0, elems = 0;
            MPI_Get_count(&st, triple, &count);
            MPI_Get_elements(&st, triple, &elems);
            MT_CHECK(count == MPI_UNDEFINED, "MPI_Get_count(triple) %d, expected MPI_UNDEFINED", count);
            MT_CHECK(elems == 7, "MPI_Get_elements(triple) %d, expected 7", elems);
            for (int i = 0; i < 9; ++i)
                MT_CHECK(y[i] == (i < 7 ? i + 1 : -1), "element %d is %d", i, y[i]);
        }
        MPI_Type_free(&triple);
    }

    MT_CASE("reused_datatype_handle_is_not_read_with_a_freed_types_size") {
        /* MPICH hands a freed datatype handle out again. A receive holds its own duplicate
         * of a derived type; once that duplicate is freed, a new type that gets the same
         * handle must be read with its own size and layout: 10 chars truncate a 50-byte
         * message (MPI_ERR_TRUNCATE, guard intact) rather than be read as 10 vectors. */
        const int tag = 1018;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        for (int round = 0; round < 20; ++round) {
            MPI_Datatype dbl, chr;
            MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &dbl); /* 16 bytes over an extent of 24 */
            MPI_Type_commit(&dbl);
            if (mt_rank == 0) {
                double d[2] = {1.5, 2.5};
                MPI_Send(d, 2, MPI_DOUBLE, 1, tag, MPI_COMM_WORLD);
            } else if (mt_rank == 1) {
                double d[3] = {0, 0, 0};
                MPI_Request r;
                MPI_Irecv(d, 1, dbl, 0, tag, MPI_COMM_WORLD, &r);
                MPI_Wait(&r, MPI_STATUS_IGNORE);
                MT_CHECK(d[0] == 1.5 && d[2] == 2.5, "round %d: doubles %g %g", round, d[0], d[2]);
            }
            MPI_Type_free(&dbl);
            MPI_Type_dup(MPI_CHAR, &chr);
            if (mt_rank == 0) {
                char c[50];
                memset(c, 'x', sizeof c);
                MPI_Send(c, 50, MPI_CHAR, 1, tag + 1, MPI_COMM_WORLD);
            } else if (mt_rank == 1) {
                char c[10 + 64];
                memset(c, 0, sizeof c);
                MPI_Request r;
                MPI_Status st;
                MPI_Irecv(c, 10, chr, 0, tag + 1, MPI_COMM_WORLD, &r);
                int rc = MPI_Wait(&r, &st);
                int cls = MPI_SUCCESS;
                if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
                MT_CHECK(cls == MPI_ERR_TRUNCATE, "round %d: 50 bytes into 10 chars gave class %d", round, cls);
                for (size_t i = 10; i < sizeof c; ++i)
                    MT_CHECK(c[i] == 0, "round %d: byte %zu past the 10-char buffer was written", round, i);
            }
            MPI_Type_free(&chr);
        }
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }

    return mt_finalize();
}
