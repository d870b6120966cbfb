/* MPI_Pack and MPI_Unpack (and their external and large-count forms) with the typed buffer
 * on a device. Where the device kind is unusable (CUDA without a GPU) the call gets
 * MPI_ERR_UNSUPPORTED_OPERATION naming the call and the argument, and the position stays
 * where it was; host packing is unaffected, with tagged types about. On a cl_mem the
 * elements of a vector, a triangle and a resized struct are packed on the device: the
 * packed bytes and positions equal MPICH's for the same data in host memory, unpacking
 * writes exactly the bytes MPICH writes (gaps and guard bytes keep their pattern), in the
 * native and the external32 representation, and packed bytes that do not fit give
 * MPI_ERR_TRUNCATE with the position unchanged.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

#define W MPI_COMM_WORLD

/* Every pack and unpack call with the typed side `buf` described by `t`. */
static void refuse_all(void *buf, MPI_Datatype t, const char *cause) {
    char packed[256];
    int pos = 0;
    MPI_Aint xpos = 0;
    MPI_Count cpos = 0;
    P2P_CHECK_UNSUPPORTED(MPI_Pack(buf, 8, t, packed, sizeof packed, &pos, W), "MPI_Pack", "inbuf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_Unpack(packed, sizeof packed, &pos, buf, 8, t, W), "MPI_Unpack", "outbuf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_Pack_c(buf, 8, t, packed, sizeof packed, &cpos, W), "MPI_Pack_c", "inbuf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_Pack_external("external32", buf, 8, t, packed, sizeof packed, &xpos), "MPI_Pack_external",
                          "inbuf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_Unpack_external("external32", packed, sizeof packed, &xpos, buf, 8, t),
                          "MPI_Unpack_external", "outbuf", cause);
    MT_CHECK(pos == 0 && xpos == 0 && cpos == 0, "a refused call moved the position (%d %ld %lld)", pos, (long)xpos,
             (long long)cpos);
}

#define PATTERN 0x5a

/* Packs (m, n, t) from a cl_mem and (host, n, base) from host memory holding the same
 * bytes, by `form` (0 MPI_Pack, 1 MPI_Pack_c, 2 MPI_Pack_external), from position 3, and
 * unpacks the result back into a patterned cl_mem and host buffer: all must agree. */
static void cl_pack_round(ocl_env *e, MPI_Datatype base, int n, size_t span, int form, uint64_t seed) {
    MPI_Datatype t;
    MPI_Type_dup(base, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_OPENCL);
    MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)e->queue);
    MPI_Type_commit(&t);
    unsigned char *host = p2p_alloc(span), *back = p2p_alloc(span), *want = p2p_alloc(span);
    mt_fill(host, span, seed);
    cl_mem m = ocl_alloc(e, span);
    ocl_write(e, m, 0, host, span);
    MPI_Aint psize = 0;
    if (form == 2)
        MPI_Pack_external_size("external32", n, base, &psize);
    else {
        int ps = 0;
        MPI_Pack_size(n, base, W, &ps);
        psize = ps;
    }
    const size_t cap = (size_t)psize + 3;
    unsigned char *pd = p2p_alloc(cap), *ph = p2p_alloc(cap);
    memset(pd, 0, cap);
    memset(ph, 0, cap);
    MPI_Aint xd = 3, xh = 3;
    int rd, rh;
    if (form == 0) {
        int d = 3, h = 3;
        rd = MPI_Pack((void *)m, n, t, pd, (int)cap, &d, W);
        rh = MPI_Pack(host, n, base, ph, (int)cap, &h, W);
        xd = d, xh = h;
    } else if (form == 1) {
        MPI_Count d = 3, h = 3;
        rd = MPI_Pack_c((void *)m, n, t, pd, (MPI_Count)cap, &d, W);
        rh = MPI_Pack_c(host, n, base, ph, (MPI_Count)cap, &h, W);
        xd = (MPI_Aint)d, xh = (MPI_Aint)h;
    } else {
        rd = MPI_Pack_external("external32", (void *)m, n, t, pd, (MPI_Aint)cap, &xd);
        rh = MPI_Pack_external("external32", host, n, base, ph, (MPI_Aint)cap, &xh);
    }
    MT_CHECK(rd == MPI_SUCCESS && rh == MPI_SUCCESS, "form %d: pack returned classes %d and %d", form, p2p_class(rd),
             p2p_class(rh));
    MT_CHECK(xd == xh, "form %d: position %ld after the device pack, %ld after the host one", form, (long)xd, (long)xh);
    size_t i = 0;
    while (i < cap && pd[i] == ph[i]) ++i;
    MT_CHECK(i == cap, "form %d: packed byte %zu differs (0x%02x, MPICH 0x%02x)", form, i, i < cap ? pd[i] : 0,
             i < cap ? ph[i] : 0);
    ocl_fill(e, m, span, PATTERN);
    memset(want, PATTERN, span);
    xd = 3, xh = 3;
    if (form == 0) {
        int d = 3, h = 3;
        rd = MPI_Unpack(ph, (int)cap, &d, (void *)m, n, t, W);
        rh = MPI_Unpack(ph, (int)cap, &h, want, n, base, W);
        xd = d, xh = h;
    } else if (form == 1) {
        MPI_Count d = 3, h = 3;
        rd = MPI_Unpack_c(ph, (MPI_Count)cap, &d, (void *)m, n, t, W);
        rh = MPI_Unpack_c(ph, (MPI_Count)cap, &h, want, n, base, W);
        xd = (MPI_Aint)d, xh = (MPI_Aint)h;
    } else {
        rd = MPI_Unpack_external("external32", ph, (MPI_Aint)cap, &xd, (void *)m, n, t);
        rh = MPI_Unpack_external("external32", ph, (MPI_Aint)cap, &xh, want, n, base);
    }
    MT_CHECK(rd == MPI_SUCCESS && rh == MPI_SUCCESS, "form %d: unpack returned classes %d and %d", form, p2p_class(rd),
             p2p_class(rh));
    MT_CHECK(xd == xh, "form %d: unpack position %ld, MPICH's %ld", form, (long)xd, (long)xh);
    ocl_read(e, m, 0, back, span);
    i = 0;
    while (i < span && back[i] == want[i]) ++i;
    MT_CHECK(i == span, "form %d: unpacked byte %zu of %zu is 0x%02x, MPICH wrote 0x%02x", form, i, span,
             i < span ? back[i] : 0, i < span ? want[i] : 0);
    clReleaseMemObject(m);
    free(host), free(back), free(want), free(pd), free(ph);
    MPI_Type_free(&t);
}

static void cl_pack_cases(ocl_env *e) {
    MPI_Datatype vec, tri, st, st_resized;
    MPI_Type_vector(300, 3, 7, MPI_INT, &vec);
    int bl[40], dp[40];
    for (int i = 0; i < 40; ++i) bl[i] = i + 1, dp[i] = i * 40;
    MPI_Type_indexed(40, bl, dp, MPI_DOUBLE, &tri);
    int sl[2] = {1, 3};
    MPI_Aint sd[2] = {0, 8};
    MPI_Datatype types[2] = {MPI_INT, MPI_SHORT};
    MPI_Type_create_struct(2, sl, sd, types, &st);
    MPI_Type_create_resized(st, 0, 20, &st_resized);
    MPI_Type_commit(&vec);
    MPI_Type_commit(&tri);
    MPI_Type_commit(&st_resized);
    for (int form = 0; form < 3; ++form) {
        cl_pack_round(e, vec, 2, (size_t)(299 * 7 + 3) * 4 + 300 * 7 * 4, form, 10 + form);
        cl_pack_round(e, tri, 1, (size_t)(39 * 40 + 40) * 8, form, 20 + form);
        /* MPICH 4.0.2's MPI_Pack_external_size traps on this struct on the host too. */
        if (form < 2) cl_pack_round(e, st_resized, 50, 50 * 20, form, 30 + form);
        cl_pack_round(e, MPI_INT, 100, 400, form, 40 + form);
    }
    MPI_Type_free(&vec);
    MPI_Type_free(&tri);
    MPI_Type_free(&st);
    MPI_Type_free(&st_resized);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(W, MPI_ERRORS_RETURN);
    MPI_Datatype cuda_t;
    MPI_Type_dup(MPI_BYTE, &cuda_t);
    MPI_Type_set_attr(cuda_t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    unsigned char host[64];
    mt_fill(host, sizeof host, 9100);

    /* Without a usable CUDA device the refusal is "no usable CUDA device": the same class.
     * With one, host memory tagged as CUDA is a wrong buffer, not an unsupported one, and
     * test/gpu/cuda_typed packs real CUDA types. */
    if (MPIX_Query_cuda_support())
        mt_skip("pack_and_unpack_refuse_cuda_tagged_buffers", "CUDA is usable here (test/gpu/cuda_typed packs on it)");
    else
        MT_CASE("pack_and_unpack_refuse_cuda_tagged_buffers") { refuse_all(host, cuda_t, NULL); }

    MT_CASE("host_pack_and_unpack_work_with_tagged_types_about") {
        char packed[256];
        int pos = 0, ints[4] = {1, 2, 3, 4}, back[4] = {0, 0, 0, 0};
        MT_CHECK(MPI_Pack(ints, 4, MPI_INT, packed, sizeof packed, &pos, W) == MPI_SUCCESS && pos == 16,
                 "MPI_Pack of 4 ints: position %d", pos);
        pos = 0;
        MT_CHECK(MPI_Unpack(packed, sizeof packed, &pos, back, 4, MPI_INT, W) == MPI_SUCCESS && back[3] == 4,
                 "MPI_Unpack of 4 ints gave %d at the end", back[3]);
    }

    static const char *cl_cases[] = {"pack_and_unpack_of_cl_mem_types_match_mpich_on_the_host",
                                     "pack_of_a_cl_mem_into_too_few_bytes_is_mpi_err_truncate_position_unchanged"};
    ocl_env e;
    if (ocl_setup_for_case(&e, cl_cases[0])) {
        MT_CASE(cl_cases[0]) { cl_pack_cases(&e); }
        MT_CASE(cl_cases[1]) {
            cl_mem m = ocl_alloc(&e, 64);
            MPI_Datatype t = ocl_type(&e);
            char packed[64];
            int pos = 40, rc = MPI_Pack((void *)m, 32, t, packed, sizeof packed, &pos, W);
            MT_CHECK(p2p_class(rc) == MPI_ERR_TRUNCATE && pos == 40,
                     "MPI_Pack of 32 bytes at 40 of 64: class %d, position %d", p2p_class(rc), pos);
            MPI_Aint xpos = 40;
            rc = MPI_Unpack_external("external32", packed, sizeof packed, &xpos, (void *)m, 32, t);
            MT_CHECK(p2p_class(rc) == MPI_ERR_TRUNCATE && xpos == 40,
                     "MPI_Unpack_external of 32 bytes at 40 of 64: class %d, position %ld", p2p_class(rc), (long)xpos);
            MPI_Type_free(&t);
            clReleaseMemObject(m);
        }
    } else {
        mt_skip(cl_cases[1], "no usable OpenCL platform");
    }
    ocl_teardown(&e);
    MPI_Type_free(&cuda_t);
    return mt_finalize();
}
