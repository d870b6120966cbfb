/* A CUDA sender and a peer that never uses CUDA itself. Rank 1 receives device messages
 * into host memory at sizes from 1 byte to past the 2 MiB at which a pull into host
 * memory would go straight in; it must not gain a CUDA context from them (hundreds of
 * MiB on the GPU), so it declines every pull and the sender stages. Every byte is
 * checked; rank 1 opened no IPC mapping and built no device state, and rank 0 saw the
 * declines (with MPIACC_IPC=0 nothing is offered, so nothing is declined). Then small
 * nonblocking sends go staged after those refusals.
 * MPIACC-TEST-RANKS: 2 */
#include "gpu_util.h"

static void c_host_only_peer_receives_without_a_context(void) {
    static const size_t sz[] = {1, 200, 16 * KiB, 64 * KiB, 1 * MiB, 3 * MiB};
    enum { NS = sizeof sz / sizeof sz[0] };
    const size_t most = 3 * MiB;
    const long long declined0 = mpiacc_counter_value("protocol.send.ipc_declined");
    unsigned char *host = malloc(most);
    if (!host) gpu_die(__FILE__, __LINE__, "out of host memory");
    if (mt_rank == 0) {
        void *d = NULL;
        CK(cudaSetDevice(0));
        CK(cudaMalloc(&d, most));
        MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
        for (int i = 0; i < NS; ++i) {
            mt_fill(host, sz[i], 0x9e3779b97f4a7c15ull + (uint64_t)i);
            gpu_upload(d, host, sz[i]); /* synchronised: see gpu_upload */
            MCK(MPI_Send(d, (int)sz[i], t, 1, 100 + i, MPI_COMM_WORLD));
        }
        MCK(MPI_Type_free(&t));
        CK(cudaFree(d));
    } else {
        for (int i = 0; i < NS; ++i) {
            MPI_Status st;
            memset(host, 0, most);
            MCK(MPI_Recv(host, (int)sz[i], MPI_CHAR, 0, 100 + i, MPI_COMM_WORLD, &st));
            GPU_CHECK_STATUS(st, 0, 100 + i, sz[i], "%zu bytes into host memory", sz[i]);
            size_t bad = mt_verify(host, sz[i], 0x9e3779b97f4a7c15ull + (uint64_t)i);
            MT_CHECK(bad == (size_t)-1, "%zu bytes: first wrong byte at %zu", sz[i], bad);
        }
        MT_CHECK(mpiacc_counter_value("cuda.ipc.open") == 0, "the host-only rank opened %lld IPC mappings",
                 mpiacc_counter_value("cuda.ipc.open"));
        MT_CHECK(mpiacc_counter_value("cuda.stream.created") == 0,
                 "the host-only rank created %lld CUDA streams (a device state, so a context)",
                 mpiacc_counter_value("cuda.stream.created"));
    }
    if (mt_rank == 0) {
        const long long declined = mpiacc_counter_value("protocol.send.ipc_declined") - declined0;
        if (gpu_ipc_knob_on())
            MT_CHECK(declined > 0, "no pull offer was declined by a peer without a CUDA context");
        else
            MT_CHECK(declined == 0, "MPIACC_IPC=0, yet %lld pull offers were declined", declined);
    }
    free(host);
}

/* Then small nonblocking sends (no stream: they may stage at the call) into the same
 * rank's blocking receives: its refusals give no reason (it never pulls), so the run of
 * staged sends they started holds for nonblocking sends too: at most one more offer is
 * declined, the rest go staged. (A rank that pulls refuses a blocking receive's small
 * pull with a reason, and its run holds for blocking sends only: cuda_p2p.) */
static void c_host_only_peer_small_isends_go_staged(void) {
    enum { N = 20 };
    const size_t n = 64;
    unsigned char host[64];
    const long long declined0 = mpiacc_counter_value("protocol.send.ipc_declined");
    const long long eager0 = mpiacc_counter_value("protocol.send.eager_device");
    if (mt_rank == 0) {
        void *d = NULL;
        CK(cudaSetDevice(0));
        CK(cudaMalloc(&d, n));
        MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
        for (int i = 0; i < N; ++i) {
            mt_fill(host, n, 0x51ed270b27e1d31bull + (uint64_t)i);
            gpu_upload(d, host, n);
            MPI_Request r;
            MCK(MPI_Isend(d, (int)n, t, 1, 200 + i, MPI_COMM_WORLD, &r));
            MCK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
        MCK(MPI_Type_free(&t));
        CK(cudaFree(d));
        const long long declined = mpiacc_counter_value("protocol.send.ipc_declined") - declined0;
        const long long staged = mpiacc_counter_value("protocol.send.eager_device") - eager0;
        if (gpu_ipc_knob_on())
            MT_CHECK(declined + staged == N && staged >= N - 1,
                     "%d small Isends to a host-only rank: %lld declined, %lld staged", N, declined, staged);
        else
            MT_CHECK(staged == N && declined == 0, "MPIACC_IPC=0: %d small Isends, %lld staged, %lld declined", N,
                     staged, declined);
    } else {
        for (int i = 0; i < N; ++i) {
            MPI_Status st;
            memset(host, 0, n);
            MCK(MPI_Recv(host, (int)n, MPI_CHAR, 0, 200 + i, MPI_COMM_WORLD, &st));
            GPU_CHECK_STATUS(st, 0, 200 + i, n, "small Isend %d into host memory", i);
            size_t bad = mt_verify(host, n, 0x51ed270b27e1d31bull + (uint64_t)i);
            MT_CHECK(bad == (size_t)-1, "small Isend %d: first wrong byte at %zu", i, bad);
        }
        MT_CHECK(mpiacc_counter_value("protocol.recv.ipc_declined_small") == 0,
                 "the host-only rank gave %lld refusals a blocking receive's reason",
                 mpiacc_counter_value("protocol.recv.ipc_declined_small"));
        MT_CHECK(mpiacc_counter_value("cuda.stream.created") == 0, "the host-only rank created %lld CUDA streams",
                 mpiacc_counter_value("cuda.stream.created"));
    }
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* Not gpu_setup: that makes a context on every rank. MPIX_Query_cuda_support only
     * counts devices. */
    int ok = mt_size == 2 && MPIX_Query_cuda_support(), all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    const char *why = mt_size != 2 ? "needs exactly 2 ranks" : "no usable CUDA device (MPIX_Query_cuda_support() = 0)";
    if (!all) {
        mt_skip("host_only_peer_receives_device_messages_without_a_cuda_context", why);
        mt_skip("host_only_peer_small_isends_go_staged_after_its_refusals", why);
    } else {
        MT_CASE("host_only_peer_receives_device_messages_without_a_cuda_context") {
            gpu_arm("host_only_peer_receives_device_messages_without_a_cuda_context", GPU_CASE_LIMIT_S);
            c_host_only_peer_receives_without_a_context();
            alarm(0);
        }
        MT_CASE("host_only_peer_small_isends_go_staged_after_its_refusals") {
            gpu_arm("host_only_peer_small_isends_go_staged_after_its_refusals", GPU_CASE_LIMIT_S);
            c_host_only_peer_small_isends_go_staged();
            alarm(0);
        }
    }
    return mt_finalize();
}
