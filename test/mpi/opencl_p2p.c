/* OpenCL buffers through MPI-ACC, on whatever OpenCL platform is present:
 * PoCL on the CPU in CI, NVIDIA's on the GPU machine (MPIACC_OPENCL_PLATFORM=NVIDIA).
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

static size_t sizes[32];
static int nsizes;

static void init_sizes(void) {
    const size_t thr = p2p_host_threshold();
    const size_t kChunk = p2p_chunk_size();
    size_t list[] = {0, 1, 199, 200, 201, kChunk - 1, kChunk, kChunk + 1, 3 * kChunk - 1, 3 * kChunk + 1,
                     thr - 1, thr, thr + 1, (size_t)64 << 20};
    nsizes = (int)(sizeof list / sizeof list[0]);
    memcpy(sizes, list, sizeof list);
}

enum kind { HOST, CL };

/* One message of n bytes from rank 0 (kind `from`) to rank 1 (kind `to`), blocking or
 * not; the receiver checks every byte. */
static void transfer(ocl_env *e, enum kind from, enum kind to, size_t n, int tag, int nonblocking) {
    MPI_Datatype t = ocl_type(e);
    if (mt_rank == 0) {
        unsigned char *h = p2p_alloc(n);
        mt_fill(h, n, (uint64_t)tag * 7919 + n);
        cl_mem m = NULL;
        if (from == CL) {
            m = ocl_alloc(e, n);
            ocl_write(e, m, 0, h, n);
        }
        const void *buf = from == CL ? (const void *)m : (const void *)h;
        MPI_Datatype type = from == CL ? t : MPI_BYTE;
        int rc;
        if (nonblocking) {
            MPI_Request r;
            rc = MPI_Isend(buf, (int)n, type, 1, tag, MPI_COMM_WORLD, &r);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Send(buf, (int)n, type, 1, tag, MPI_COMM_WORLD);
        }
        MT_CHECK(rc == MPI_SUCCESS, "send of %zu bytes failed (%d)", n, rc);
        if (m) clReleaseMemObject(m);
        free(h);
    } else if (mt_rank == 1) {
        unsigned char *h = p2p_alloc(n);
        memset(h, 0xee, n);
        cl_mem m = NULL;
        if (to == CL) {
            m = ocl_alloc(e, n);
            ocl_fill(e, m, n, 0xee);
        }
        void *buf = to == CL ? (void *)m : (void *)h;
        MPI_Datatype type = to == CL ? t : MPI_BYTE;
        MPI_Status st;
        int rc;
        if (nonblocking) {
            MPI_Request r;
            rc = MPI_Irecv(buf, (int)n, type, 0, tag, MPI_COMM_WORLD, &r);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, &st);
        } else {
            rc = MPI_Recv(buf, (int)n, type, 0, tag, MPI_COMM_WORLD, &st);
        }
        MT_CHECK(rc == MPI_SUCCESS, "receive of %zu bytes failed (%d)", n, rc);
        if (rc == MPI_SUCCESS) {
            MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "%zu bytes: count %d", n, p2p_count(&st, MPI_BYTE));
            MT_CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == tag, "%zu bytes: status source %d tag %d", n,
                     st.MPI_SOURCE, st.MPI_TAG);
            if (m) ocl_read(e, m, 0, h, n);
            size_t bad = mt_verify(h, n, (uint64_t)tag * 7919 + n);
            MT_CHECK(bad == (size_t)-1, "%zu bytes: first wrong byte at %zu", n, bad);
        }
        if (m) clReleaseMemObject(m);
        free(h);
    }
    MPI_Type_free(&t);
}

static void pairing_case(ocl_env *e, const char *name, enum kind from, enum kind to, int nonblocking, int base) {
    MT_CASE(name) {
        for (int i = 0; i < nsizes; ++i) transfer(e, from, to, sizes[i], base + i, nonblocking);
    }
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    init_sizes();
    const char *cases[] = {"host_to_opencl_every_protocol_size_arrives_intact",
                           "opencl_to_host_every_protocol_size_arrives_intact",
                           "opencl_to_opencl_every_protocol_size_arrives_intact",
                           "opencl_to_opencl_nonblocking_every_protocol_size_arrives_intact",
                           "opencl_offset_attribute_sends_and_receives_a_subrange",
                           "opencl_sendrecv_between_cl_mem_buffers",
                           "opencl_persistent_receive_into_cl_mem_reused_20_times"};
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    ocl_env e = ocl_setup_or_skip(cases, ncases);
    pairing_case(&e, cases[0], HOST, CL, 0, 1000);
    pairing_case(&e, cases[1], CL, HOST, 0, 1100);
    pairing_case(&e, cases[2], CL, CL, 0, 1200);
    pairing_case(&e, cases[3], CL, CL, 1, 1300);

    MT_CASE(cases[4]) {
        /* 1000 bytes at offset 333 of a 4096-byte cl_mem, into offset 17 of another. */
        const size_t n = 1000, total = 4096;
        const int tag = 1400;
        MPI_Datatype t = ocl_type(&e);
        MPI_Type_set_attr(t, MPIX_ACC_OFFSET, (void *)(long)(mt_rank == 0 ? 333 : 17));
        cl_mem m = ocl_alloc(&e, total);
        unsigned char *h = p2p_alloc(total);
        if (mt_rank == 0) {
            mt_fill(h, total, 5);
            ocl_write(&e, m, 0, h, total);
            MT_CHECK(MPI_Send(m, (int)n, t, 1, tag, MPI_COMM_WORLD) == MPI_SUCCESS, "send failed");
        } else if (mt_rank == 1) {
            ocl_fill(&e, m, total, 0x33);
            MT_CHECK(MPI_Recv(m, (int)n, t, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS, "recv failed");
            ocl_read(&e, m, 0, h, total);
            unsigned char *want = p2p_alloc(total);
            mt_fill(want, total, 5);
            MT_CHECK(memcmp(h + 17, want + 333, n) == 0, "subrange contents differ");
            P2P_CHECK_UNTOUCHED(h, 17, 0x33, "bytes before the offset");
            P2P_CHECK_UNTOUCHED(h + 17 + n, total - 17 - n, 0x33, "bytes after the range");
            free(want);
        }
        free(h);
        clReleaseMemObject(m);
        MPI_Type_free(&t);
    }

    MT_CASE(cases[5]) {
        const size_t n = (1 << 20) + 7;
        const int tag = 1500;
        MPI_Datatype t = ocl_type(&e);
        cl_mem out = ocl_alloc(&e, n), in = ocl_alloc(&e, n);
        unsigned char *h = p2p_alloc(n);
        mt_fill(h, n, 600 + mt_rank);
        ocl_write(&e, out, 0, h, n);
        MPI_Status st;
        int peer = 1 - mt_rank;
        int rc = MPI_Sendrecv(out, (int)n, t, peer, tag, in, (int)n, t, peer, tag, MPI_COMM_WORLD, &st);
        MT_CHECK(rc == MPI_SUCCESS, "sendrecv failed (%d)", rc);
        ocl_read(&e, in, 0, h, n);
        P2P_CHECK_BYTES(h, n, 600 + peer, "received");
        MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n && st.MPI_SOURCE == peer, "status count %d source %d",
                 p2p_count(&st, MPI_BYTE), st.MPI_SOURCE);
        free(h);
        clReleaseMemObject(out);
        clReleaseMemObject(in);
        MPI_Type_free(&t);
    }

    MT_CASE(cases[6]) {
        /* The EpiSimdemics pattern: fixed-size persistent receive fragments on the device. */
        const size_t n = 300 << 10;
        const int tag = 1600;
        MPI_Datatype t = ocl_type(&e);
        cl_mem m = ocl_alloc(&e, n);
        unsigned char *h = p2p_alloc(n);
        MPI_Request r;
        if (mt_rank == 1) MPI_Recv_init(m, (int)n, t, 0, tag, MPI_COMM_WORLD, &r);
        for (int it = 0; it < 20; ++it) {
            if (mt_rank == 0) {
                mt_fill(h, n, 7000 + it);
                MPI_Send(h, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
            } else if (mt_rank == 1) {
                MPI_Status st;
                MPI_Startall(1, &r);
                MPI_Wait(&r, &st);
                MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "iteration %d: count %d", it, p2p_count(&st, MPI_BYTE));
                ocl_read(&e, m, 0, h, n);
                P2P_CHECK_BYTES(h, n, 7000 + it, "fragment");
            }
        }
        if (mt_rank == 1) MPI_Request_free(&r);
        free(h);
        clReleaseMemObject(m);
        MPI_Type_free(&t);
    }
    ocl_teardown(&e);
    return mt_finalize();
}
