/* Two ranks on two hosts with an RDMA device each (the soft-RoCE VM, maint/rxe-vm):
 * every pairing of host and cl_mem buffers, both directions, at the point-to-point
 * suite's protocol sizes, every byte checked. With the verbs netmod on (MPIACC_TEST_IB
 * unset, auto or on) the pipeline's chunks go as RDMA writes into the slots the CTS
 * named, and none as an MPI message; with it off (MPIACC_TEST_IB=off) all of them go as
 * MPI messages and none as a write. On one host, or with no RDMA device (maint/multihost),
 * every case skips, by name: test/user/rxe_vm.sh runs it in the VM.
 * MPIACC-TEST-RANKS: 2 */

#include "opencl_util.h"

static const char *cases[] = {
    "every_pairing_of_host_and_cl_mem_both_ways_arrives_intact_between_nodes",
    "pipeline_chunks_took_the_netmod_the_knob_chose",
};

enum kind { HOST, CL };

static long long count(const char *name) { return mpiacc_counter_value(name); }

/* n bytes of kind `from` on rank `src` to kind `to` on the other rank, checked there. */
static void transfer(ocl_env *e, int src, enum kind from, enum kind to, size_t n, int tag) {
    MPI_Datatype t = ocl_type(e);
    const int sending = mt_rank == src;
    const enum kind k = sending ? from : to;
    unsigned char *h = p2p_alloc(n);
    cl_mem m = NULL;
    if (sending) mt_fill(h, n, (uint64_t)tag * 7919 + n);
    if (k == CL) {
        m = ocl_alloc(e, n);
        if (sending)
            ocl_write(e, m, 0, h, n);
        else
            ocl_fill(e, m, n, 0xee);
    } else if (!sending) {
        memset(h, 0xee, n);
    }
    void *buf = k == CL ? (void *)m : (void *)h;
    MPI_Datatype type = k == CL ? t : MPI_BYTE;
    if (sending) {
        int rc = MPI_Send(buf, (int)n, type, 1 - src, tag, MPI_COMM_WORLD);
        MT_CHECK(rc == MPI_SUCCESS, "send of %zu bytes failed (%d)", n, rc);
    } else {
        MPI_Status st;
        int rc = MPI_Recv(buf, (int)n, type, src, tag, MPI_COMM_WORLD, &st);
        MT_CHECK(rc == MPI_SUCCESS, "receive of %zu bytes failed (%d)", n, rc);
        if (rc == MPI_SUCCESS) {
            MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "%zu bytes: count %d", n, p2p_count(&st, MPI_BYTE));
            if (m) ocl_read(e, m, 0, h, n);
            size_t bad = mt_verify(h, n, (uint64_t)tag * 7919 + n);
            MT_CHECK(bad == (size_t)-1, "%zu bytes %s to %s from rank %d: first wrong byte at %zu", n,
                     from == CL ? "cl_mem" : "host", to == CL ? "cl_mem" : "host", src, bad);
        }
    }
    if (m) clReleaseMemObject(m);
    free(h);
    MPI_Type_free(&t);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    char mine[MPI_MAX_PROCESSOR_NAME] = {0}, other[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(mine, &len);
    MPI_Sendrecv(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1 - mt_rank, 0, other, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                 1 - mt_rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ocl_env e = ocl_setup();
    const char *why = strcmp(mine, other) == 0  ? "both ranks on one host (run in the soft-RoCE VM)"
                      : !p2p_rdma_device_here() ? "no RDMA device on this host (run in the soft-RoCE VM)"
                      : !ocl_all_ok(&e)         ? "no usable OpenCL platform"
                                                : NULL;
    if (why) {
        for (int i = 0; i < ncases; ++i) mt_skip(cases[i], why);
        ocl_teardown(&e);
        return mt_finalize();
    }
    const char *knob = getenv("MPIACC_TEST_IB");
    const int verbs = !knob || strcmp(knob, "off") != 0;
    const size_t thr = p2p_host_threshold(), chunk = p2p_chunk_size();
    const size_t sizes[] = {0,
                            1,
                            199,
                            200,
                            201,
                            chunk - 1,
                            chunk,
                            chunk + 1,
                            3 * chunk - 1,
                            3 * chunk + 1,
                            thr - 1,
                            thr,
                            thr + 1,
                            (size_t)16 << 20};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    const long long writes0 = count("ib.rdma_writes"), landed0 = count("ib.writes_landed"),
                    sends0 = count("netmod.mpi.chunk_sends"), recvs0 = count("netmod.mpi.chunk_receives"),
                    piped0 = count("protocol.recv.pipeline") + count("protocol.send.pipeline");
    MT_CASE(cases[0]) {
        int tag = 100;
        for (int src = 0; src < 2; ++src)
            for (int from = HOST; from <= CL; ++from)
                for (int to = HOST; to <= CL; ++to)
                    for (int i = 0; i < nsizes; ++i) transfer(&e, src, (enum kind)from, (enum kind)to, sizes[i], tag++);
    }
    MT_CASE(cases[1]) {
        const long long writes = count("ib.rdma_writes") - writes0, landed = count("ib.writes_landed") - landed0,
                        messages =
                            count("netmod.mpi.chunk_sends") - sends0 + count("netmod.mpi.chunk_receives") - recvs0,
                        piped = count("protocol.recv.pipeline") + count("protocol.send.pipeline") - piped0;
        long long all[3] = {writes, landed, messages}, sum[3];
        MPI_Allreduce(all, sum, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        MT_CHECK(piped > 0, "rank %d: no pipeline transfer", mt_rank);
        if (verbs) {
            MT_CHECK(sum[0] > 0 && sum[0] == sum[1], "%lld chunks written as RDMA writes, %lld landed", sum[0], sum[1]);
            MT_CHECK(sum[2] == 0, "%lld chunks went as MPI messages", sum[2]);
            MT_CHECK(count("ib.peers") == 1, "rank %d: %lld peers connected by verbs", mt_rank, count("ib.peers"));
            MT_CHECK(count("protocol.recv.one_sided") > 0, "rank %d: no receive named its slots", mt_rank);
        } else {
            MT_CHECK(sum[0] == 0, "%lld chunks went as RDMA writes with the verbs netmod off", sum[0]);
            MT_CHECK(sum[2] > 0, "no chunk went as an MPI message");
        }
        if (mt_rank == 0)
            printf("# %s: %lld RDMA writes, %lld MPI chunk messages, %lld credits (rank 0)\n", verbs ? "verbs" : "mpi",
                   sum[0], sum[2], count("ib.credits"));
    }
    ocl_teardown(&e);
    return mt_finalize();
}
