/* Two ranks on two hosts (maint/multihost: network namespaces with their own hostnames):
 * MPI-ACC takes them for two nodes, so a cl_mem goes to a cl_mem through the pipeline
 * between nodes, never the SHARED mode or a pull of one node, and host data as the plain
 * payload or by RTS/CTS, every byte intact in both directions. On one host every case
 * skips, by name: test/user/multihost.sh runs it across two.
 * MPIACC-TEST-RANKS: 2 */
#include "opencl_util.h"

static const char *cases[] = {
    "ranks_on_two_hosts_are_two_nodes",
    "cl_mem_to_cl_mem_goes_by_the_pipeline_between_nodes_both_ways",
    "host_data_of_every_size_arrives_intact_between_nodes",
};

static long long count(const char *name) { return mpiacc_counter_value(name); }

/* An MPI call that must succeed. */
#define OK(call)                                                        \
    do {                                                                \
        int ok_rc_ = (call);                                            \
        MT_CHECK(ok_rc_ == MPI_SUCCESS, "%s: error %d", #call, ok_rc_); \
    } while (0)

int main(int argc, char **argv) {
    setenv("MPIACC_CHUNK_SIZE", "1M", 1);
    MT_INIT(&argc, &argv);
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    char mine[MPI_MAX_PROCESSOR_NAME] = {0}, other[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(mine, &len);
    MPI_Sendrecv(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1 - mt_rank, 0, other, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                 1 - mt_rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (strcmp(mine, other) == 0) {
        for (int i = 0; i < ncases; ++i) mt_skip(cases[i], "both ranks on one host (run through maint/multihost)");
        return mt_finalize();
    }
    int c = 0;
    MT_CASE(cases[c++]) { MT_CHECK(strcmp(mine, other) != 0, "hosts %s and %s", mine, other); }
    ocl_env e = ocl_setup();
    const size_t big = 5u << 20;
    unsigned char *h = p2p_alloc(big);
    if (!ocl_all_ok(&e)) {
        mt_skip(cases[c++], "no usable OpenCL platform");
    } else {
        MT_CASE(cases[c++]) {
            MPI_Datatype t = ocl_type(&e);
            cl_mem m = ocl_alloc(&e, big);
            const long long piped0 = count("protocol.recv.pipeline"), shared0 = count("protocol.recv.shared"),
                            pulled0 = count("protocol.recv.ipc");
            for (int dir = 0; dir < 2; ++dir) {
                const size_t n = dir ? big - 3 : big;
                if (mt_rank == dir) {
                    mt_fill(h, n, 7 + dir);
                    ocl_write(&e, m, 0, h, n);
                    OK(MPI_Send(m, (int)n, t, 1 - dir, dir, MPI_COMM_WORLD));
                } else {
                    ocl_fill(&e, m, big, 0);
                    OK(MPI_Recv(m, (int)n, t, dir, dir, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                    ocl_read(&e, m, 0, h, n);
                    P2P_CHECK_BYTES(h, n, 7 + dir, dir ? "1 to 0" : "0 to 1");
                    MT_CHECK(count("protocol.recv.pipeline") > piped0, "direction %d: no pipeline receive", dir);
                }
            }
            MT_CHECK(count("protocol.recv.shared") == shared0 && count("protocol.recv.ipc") == pulled0,
                     "a receive between nodes took a mode of one node");
            clReleaseMemObject(m);
            MPI_Type_free(&t);
        }
    }
    MT_CASE(cases[c++]) {
        const size_t sizes[] = {0, 1, 200, 4096, 65536, (2u << 20) + 1, big};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
            const size_t n = sizes[i];
            if (mt_rank == 0) {
                mt_fill(h, n, 30 + i);
                OK(MPI_Send(h, (int)n, MPI_BYTE, 1, 9, MPI_COMM_WORLD));
            } else {
                memset(h, 0, big);
                OK(MPI_Recv(h, (int)n, MPI_BYTE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                P2P_CHECK_BYTES(h, n, 30 + i, "host bytes");
            }
        }
    }
    free(h);
    ocl_teardown(&e);
    return mt_finalize();
}
