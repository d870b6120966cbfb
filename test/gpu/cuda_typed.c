/* Derived datatypes on CUDA buffers, packed and unpacked on the GPU: host->CUDA,
 * CUDA->host and CUDA->CUDA (same node: a typed send offers no IPC pull, and a typed
 * receive declines one, so the sender stages; cuda_typed_pipeline runs it all with
 * MPIACC_IPC=0), at 1 KiB (eager) and 4 MiB (pipeline chunks), with types that differ but
 * share a signature (a vector received as contiguous doubles and back, a lower triangle
 * into dense ints, a transpose of blocklength 1), a resized struct with MPI_Probe and
 * MPI_Get_count, nonblocking calls, and truncation (MPI_ERR_TRUNCATE, count 0, nothing
 * written), and MPI_Pack and MPI_Unpack of CUDA types and into CUDA memory. The receive buffer's gaps and the guard
 * bytes past it keep their pattern; expected bytes come from MPI_Pack and MPI_Unpack of the same data in host memory.
 * MPIACC-TEST-RANKS: 2 */
#include "gpu_util.h"

#ifndef CUDA_TYPED_NO_IPC
#define CUDA_TYPED_NO_IPC 0
#endif

enum { HOST = 0, DEV = 1 };
#define W MPI_COMM_WORLD

typedef struct {
    MPI_Datatype type;
    int count;
} typed_side;

static MPI_Datatype col_small, col_big, half_big, contig_small, contig_big, tri, tri_dense, rows, transpose,
    strct_resized;

static size_t span_of(MPI_Datatype t, int count) {
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(t, &lb, &ext);
    MPI_Type_get_true_extent(t, &tlb, &text);
    return count == 0 ? 0 : (size_t)(tlb + (MPI_Aint)(count - 1) * ext + text);
}

static MPI_Datatype typed_for(int kind, MPI_Datatype t) {
    MPI_Datatype d;
    MCK(MPI_Type_dup(t, &d));
    if (kind == DEV) MCK(MPI_Type_set_attr(d, MPIX_ACC_BUF_TYPE, (void *)(intptr_t)MPIX_ACC_BUF_CUDA));
    MCK(MPI_Type_commit(&d));
    return d;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 9)) & 0xff);
}

static unsigned char *host_alloc(size_t n) {
    unsigned char *p = (unsigned char *)malloc(n ? n : 1);
    if (!p) gpu_die(__FILE__, __LINE__, "out of host memory");
    return p;
}

/* The receive buffer after (s) carried fill(seed) bytes into (r), by MPICH on the host. */
static unsigned char *expected(typed_side s, typed_side r, unsigned seed, size_t rspan, int truncated) {
    unsigned char *out = host_alloc(rspan);
    memset(out, GPU_SENTINEL, rspan);
    if (truncated) return out;
    const size_t sspan = span_of(s.type, s.count);
    unsigned char *src = host_alloc(sspan);
    fill(src, sspan, seed);
    int size = 0, pos = 0;
    MPI_Pack_size(s.count, s.type, W, &size);
    unsigned char *packed = host_alloc((size_t)size);
    MCK(MPI_Pack(src, s.count, s.type, packed, size, &pos, W));
    const int n = pos;
    pos = 0;
    MCK(MPI_Unpack(packed, n, &pos, out, r.count, r.type, W));
    free(packed);
    free(src);
    return out;
}

static void transfer(int sk, typed_side s, int rk, typed_side r, int mode, int tag) {
    int ssize = 0, rsize = 0;
    MPI_Type_size(s.type, &ssize);
    MPI_Type_size(r.type, &rsize);
    const long long sent = (long long)ssize * s.count, room = (long long)rsize * r.count;
    const int truncated = sent > room;
    const unsigned seed = (unsigned)tag;
    if (mt_rank == 0) {
        const size_t span = span_of(s.type, s.count);
        unsigned char *h = host_alloc(span);
        fill(h, span, seed);
        void *b = h;
        if (sk == DEV) {
            b = gpu_malloc(span);
            gpu_upload(b, h, span);
        }
        MPI_Datatype t = typed_for(sk, s.type);
        MPI_Request q;
        int rc = mode == 1 ? MPI_Isend(b, s.count, t, 1, tag, W, &q) : MPI_Send(b, s.count, t, 1, tag, W);
        if (mode == 1 && rc == MPI_SUCCESS) rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
        MT_CHECK(rc == MPI_SUCCESS, "tag %d: the send returned %s", tag, gpu_class_name(gpu_err_class(rc)));
        MCK(MPI_Type_free(&t));
        if (sk == DEV) CK(cudaFree(b));
        free(h);
    } else {
        const size_t span = span_of(r.type, r.count) + GPU_GUARD;
        void *b;
        if (rk == DEV) {
            b = gpu_malloc(span);
            gpu_memset(b, GPU_SENTINEL, span);
        } else {
            b = host_alloc(span);
            memset(b, GPU_SENTINEL, span);
        }
        MPI_Datatype t = typed_for(rk, r.type);
        MPI_Status st;
        if (mode == 2) {
            MCK(MPI_Probe(0, tag, W, &st));
            int bytes = -1, elements = -1;
            MPI_Get_count(&st, MPI_BYTE, &bytes);
            MPI_Get_count(&st, r.type, &elements);
            MT_CHECK(bytes == (int)sent, "tag %d: MPI_Probe count %d bytes, expected %lld", tag, bytes, sent);
            const int want = rsize && sent % rsize == 0 ? (int)(sent / rsize) : MPI_UNDEFINED;
            MT_CHECK(elements == want, "tag %d: MPI_Get_count %d, expected %d", tag, elements, want);
        }
        MPI_Request q;
        int rc = mode == 1 ? MPI_Irecv(b, r.count, t, 0, tag, W, &q) : MPI_Recv(b, r.count, t, 0, tag, W, &st);
        if (mode == 1 && rc == MPI_SUCCESS) rc = MPI_Wait(&q, &st);
        if (truncated) {
            MT_CHECK(gpu_err_class(rc) == MPI_ERR_TRUNCATE, "tag %d: %lld into %lld bytes: %s", tag, sent, room,
                     gpu_class_name(gpu_err_class(rc)));
            GPU_CHECK_STATUS(st, 0, tag, 0, "tag %d truncated", tag);
        } else {
            MT_CHECK(rc == MPI_SUCCESS, "tag %d: the receive returned %s", tag, gpu_class_name(gpu_err_class(rc)));
            GPU_CHECK_STATUS(st, 0, tag, sent, "tag %d", tag);
        }
        const unsigned char *got = rk == DEV ? gpu_download(b, span) : (const unsigned char *)b;
        unsigned char *want = expected(s, r, seed, span, truncated);
        size_t i = 0;
        while (i < span && got[i] == want[i]) ++i;
        MT_CHECK(i == span, "tag %d: byte %zu of %zu is 0x%02x, expected 0x%02x", tag, i, span, i < span ? got[i] : 0,
                 i < span ? want[i] : 0);
        free(want);
        MCK(MPI_Type_free(&t));
        if (rk == DEV)
            CK(cudaFree(b));
        else
            free(b);
    }
}

static void pairing(int sk, int rk, int tag0) {
    const struct {
        typed_side s, r;
        int mode;
    } cases[] = {
        {{col_small, 1}, {col_small, 1}, 0},
        {{col_big, 1}, {col_big, 1}, 0},
        {{col_big, 1}, {col_big, 1}, 1},
        {{col_small, 1}, {contig_small, 1}, 0},
        {{contig_big, 1}, {col_big, 1}, 1},
        {{col_big, 1}, {contig_big, 1}, 0},
        {{tri, 3}, {tri_dense, 3}, 0},
        {{rows, 2}, {transpose, 2}, 0},
        {{strct_resized, 500}, {strct_resized, 500}, 2},
        {{col_big, 1}, {half_big, 1}, 0},
        {{col_small, 2}, {col_small, 1}, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
        transfer(sk, cases[c].s, rk, cases[c].r, cases[c].mode, tag0 + (int)c);
}

/* MPI_Pack, MPI_Unpack and the external32 forms of a CUDA vector and triangle: the
 * packed bytes and positions are MPICH's for the same data in host memory, and unpacking
 * writes what MPICH writes (gaps keep their pattern). Each rank on its own. */
static void c_pack_unpack(void) {
    const struct {
        MPI_Datatype type;
        int count;
    } cases[] = {{col_small, 3}, {tri, 2}, {strct_resized, 40}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
        for (int external = 0; external < 2; ++external) {
            if (external && cases[c].type == strct_resized) continue; /* MPICH 4.0.2 traps on it */
            MPI_Datatype base = cases[c].type, t = typed_for(DEV, base);
            const int n = cases[c].count;
            const size_t span = span_of(base, n);
            unsigned char *h = host_alloc(span), *want = host_alloc(span);
            fill(h, span, 50 + (unsigned)c);
            void *d = gpu_malloc(span);
            gpu_upload(d, h, span);
            MPI_Aint size = 0;
            int isize = 0;
            if (external) {
                MCK(MPI_Pack_external_size("external32", n, base, &size));
            } else {
                MCK(MPI_Pack_size(n, base, W, &isize));
                size = isize;
            }
            const size_t cap = (size_t)size + 5;
            unsigned char *pd = host_alloc(cap), *ph = host_alloc(cap);
            memset(pd, 0, cap);
            memset(ph, 0, cap);
            MPI_Aint xd = 5, xh = 5;
            int id = 5, ih = 5;
            if (external) {
                MCK(MPI_Pack_external("external32", d, n, t, pd, (MPI_Aint)cap, &xd));
                MCK(MPI_Pack_external("external32", h, n, base, ph, (MPI_Aint)cap, &xh));
            } else {
                MCK(MPI_Pack(d, n, t, pd, (int)cap, &id, W));
                MCK(MPI_Pack(h, n, base, ph, (int)cap, &ih, W));
                xd = id, xh = ih;
            }
            MT_CHECK(xd == xh && memcmp(pd, ph, cap) == 0,
                     "type %zu external %d: the device pack differs (position %ld "
                     "against %ld)",
                     c, external, (long)xd, (long)xh);
            gpu_memset(d, GPU_SENTINEL, span);
            memset(want, GPU_SENTINEL, span);
            xd = xh = 5, id = ih = 5;
            if (external) {
                MCK(MPI_Unpack_external("external32", ph, (MPI_Aint)cap, &xd, d, n, t));
                MCK(MPI_Unpack_external("external32", ph, (MPI_Aint)cap, &xh, want, n, base));
            } else {
                MCK(MPI_Unpack(ph, (int)cap, &id, d, n, t, W));
                MCK(MPI_Unpack(ph, (int)cap, &ih, want, n, base, W));
                xd = id, xh = ih;
            }
            MT_CHECK(xd == xh && memcmp(gpu_download(d, span), want, span) == 0,
                     "type %zu external %d: the device unpack differs (position %ld against %ld)", c, external,
                     (long)xd, (long)xh);
            free(h), free(want), free(pd), free(ph);
            CK(cudaFree(d));
            MCK(MPI_Type_free(&t));
        }
}

/* Packed bytes in CUDA memory (found by pointer query), from and into typed data on the
 * host and on the device: the same bytes and positions as MPICH's in host memory. */
static void c_packed_on_device(void) {
    if (!gpu_knob_on("MPIACC_CUDA_AUTODETECT")) return; /* the packed bytes are found by pointer query */
    const int n = 3;
    const size_t span = span_of(col_small, n);
    int psize = 0;
    MCK(MPI_Pack_size(n, col_small, W, &psize));
    const size_t cap = (size_t)psize + 7;
    unsigned char *h = host_alloc(span), *ph = host_alloc(cap), *want = host_alloc(span);
    fill(h, span, 77);
    void *d = gpu_malloc(span), *pd = gpu_malloc(cap);
    gpu_upload(d, h, span);
    MPI_Datatype t = typed_for(DEV, col_small);
    for (int typed_dev = 0; typed_dev < 2; ++typed_dev) {
        memset(ph, 0, cap);
        gpu_memset(pd, 0, cap);
        int pos_d = 7, pos_h = 7;
        MCK(MPI_Pack(typed_dev ? d : (void *)h, n, typed_dev ? t : col_small, pd, (int)cap, &pos_d, W));
        MCK(MPI_Pack(h, n, col_small, ph, (int)cap, &pos_h, W));
        MT_CHECK(pos_d == pos_h && memcmp(gpu_download(pd, cap), ph, cap) == 0,
                 "typed on %s: the pack into CUDA memory differs (position %d against %d)", typed_dev ? "CUDA" : "host",
                 pos_d, pos_h);
        gpu_memset(d, GPU_SENTINEL, span);
        unsigned char *back = host_alloc(span);
        memset(back, GPU_SENTINEL, span);
        memset(want, GPU_SENTINEL, span);
        pos_d = pos_h = 7;
        MCK(MPI_Unpack(pd, (int)cap, &pos_d, typed_dev ? d : (void *)back, n, typed_dev ? t : col_small, W));
        MCK(MPI_Unpack(ph, (int)cap, &pos_h, want, n, col_small, W));
        const unsigned char *got = typed_dev ? gpu_download(d, span) : back;
        MT_CHECK(pos_d == pos_h && memcmp(got, want, span) == 0,
                 "typed on %s: the unpack from CUDA memory differs (position %d against %d)",
                 typed_dev ? "CUDA" : "host", pos_d, pos_h);
        free(back);
        gpu_upload(d, h, span);
    }
    MCK(MPI_Type_free(&t));
    CK(cudaFree(d));
    CK(cudaFree(pd));
    free(h), free(ph), free(want);
}

static void c_host_to_cuda(void) { pairing(HOST, DEV, 100); }
static void c_cuda_to_host(void) { pairing(DEV, HOST, 200); }
static void c_cuda_to_cuda(void) { pairing(DEV, DEV, 300); }

static void make_types(void) {
    MPI_Type_vector(64, 2, 64, MPI_DOUBLE, &col_small);
    MPI_Type_vector(16384, 32, 64, MPI_DOUBLE, &col_big);
    MPI_Type_vector(8192, 32, 64, MPI_DOUBLE, &half_big);
    MPI_Type_contiguous(2 * 64, MPI_DOUBLE, &contig_small);
    MPI_Type_contiguous(16384 * 32, MPI_DOUBLE, &contig_big);
    int bl[96], dp[96], total = 0;
    for (int i = 0; i < 96; ++i) {
        bl[i] = i + 1;
        dp[i] = i * 96;
        total += i + 1;
    }
    MPI_Type_indexed(96, bl, dp, MPI_INT, &tri);
    MPI_Type_contiguous(total, MPI_INT, &tri_dense);
    MPI_Type_contiguous(48 * 48, MPI_FLOAT, &rows);
    MPI_Datatype column, one, columns, strct;
    MPI_Type_vector(48, 1, 48, MPI_FLOAT, &column);
    MPI_Type_create_resized(column, 0, sizeof(float), &one);
    MPI_Type_contiguous(48, one, &columns);
    MPI_Type_create_resized(columns, 0, 48 * 48 * sizeof(float), &transpose);
    int sl[2] = {1, 2};
    MPI_Aint sd[2] = {4, 24};
    MPI_Datatype st_types[2] = {MPI_INT, MPI_DOUBLE};
    MPI_Type_create_struct(2, sl, sd, st_types, &strct);
    MPI_Type_create_resized(strct, 0, 64, &strct_resized);
    MPI_Type_free(&column);
    MPI_Type_free(&one);
    MPI_Type_free(&columns);
    MPI_Type_free(&strct);
    MPI_Datatype *all[] = {&col_small, &col_big,   &half_big, &contig_small, &contig_big,
                           &tri,       &tri_dense, &rows,     &transpose,    &strct_resized};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) MPI_Type_commit(all[i]);
}

int main(int argc, char **argv) {
#if CUDA_TYPED_NO_IPC
    setenv("MPIACC_IPC", "0", 1);
#endif
    MT_INIT(&argc, &argv);
    gpu_setup(-1);
    make_types();
    static const gpu_case_t cases[] = {
        {"typed_host_to_cuda_vectors_transpose_triangle_struct_truncation", c_host_to_cuda, 0},
        {"typed_cuda_to_host_vectors_transpose_triangle_struct_truncation", c_cuda_to_host, 0},
        {"typed_cuda_to_cuda_vectors_transpose_triangle_struct_truncation", c_cuda_to_cuda, 0},
        {"pack_unpack_and_external32_of_cuda_types_match_mpich_on_the_host", c_pack_unpack, 0},
        {"pack_into_and_unpack_from_cuda_memory_match_mpich_on_the_host", c_packed_on_device, 0},
    };
    gpu_run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    gpu_teardown();
    return mt_finalize();
}
