/* Truncation with CUDA buffers, as with host and OpenCL ones (test/mpi/
 * p2p_truncate_pairings): a receive of half the message fails with MPI_ERR_TRUNCATE under
 * MPI_ERRORS_RETURN, with MPI-ACC's message naming the user's call; the status keeps
 * source and tag and has count 0 (MPICH 4.0.2 delivers nothing of a message that does
 * not fit), nothing is written into or past the buffer, the sender completes, and the
 * next message arrives whole. Pairings host->CUDA, CUDA->host and CUDA->CUDA (IPC pull
 * where the two ranks share a node), at 100 B, 1 MiB and 16 MiB, blocking and not.
 * MPIACC-TEST-RANKS: 2 */
#include "gpu_util.h"

enum { HOST = 0, DEV = 1 };

static void *alloc_kind(int kind, size_t n) {
    if (kind == DEV) return gpu_malloc(n);
    void *p = malloc(n);
    if (!p) gpu_die(__FILE__, __LINE__, "out of host memory");
    return p;
}
static void free_kind(int kind, void *p) {
    if (kind == DEV)
        CK(cudaFree(p));
    else
        free(p);
}
static void put(int kind, void *dst, const void *src, size_t n) {
    if (kind == DEV)
        gpu_upload(dst, src, n);
    else
        memcpy(dst, src, n);
}
static void set(int kind, void *dst, int v, size_t n) {
    if (kind == DEV)
        gpu_memset(dst, v, n);
    else
        memset(dst, v, n);
}
static const unsigned char *get(int kind, const void *src, size_t n) {
    return kind == DEV ? gpu_download(src, n) : (const unsigned char *)src;
}

static void truncate_pairing(int sk, int rk, int tag0) {
    static const size_t sizes[] = {100, 1 * MiB, 16 * MiB};
    MPI_Datatype cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    int tag = tag0;
    for (int s = 0; s < 3; ++s)
        for (int nb = 0; nb < 2; ++nb, tag += 2) {
            const size_t n = sizes[s], cap = n / 2;
            if (mt_rank == 0) {
                void *b = alloc_kind(sk, n);
                MPI_Datatype t = sk == DEV ? cuda_t : MPI_CHAR;
                put(sk, b, gpu_ref, n);
                int rc = MPI_Send(b, (int)n, t, 1, tag, MPI_COMM_WORLD);
                MT_CHECK(rc == MPI_SUCCESS, "%zu B: the sender of the truncated message got %s", n,
                         gpu_class_name(gpu_err_class(rc)));
                put(sk, b, gpu_ref + 8, n);
                MCK(MPI_Send(b, (int)n, t, 1, tag + 1, MPI_COMM_WORLD));
                free_kind(sk, b);
            } else {
                void *b = alloc_kind(rk, n + GPU_GUARD);
                MPI_Datatype t = rk == DEV ? cuda_t : MPI_CHAR;
                set(rk, b, GPU_SENTINEL, n + GPU_GUARD);
                MPI_Status st;
                int rc;
                const char *call = nb ? "MPI_Irecv" : "MPI_Recv";
                if (nb) {
                    MPI_Request r;
                    MCK(MPI_Irecv(b, (int)cap, t, 0, tag, MPI_COMM_WORLD, &r));
                    rc = MPI_Wait(&r, &st);
                } else {
                    rc = MPI_Recv(b, (int)cap, t, 0, tag, MPI_COMM_WORLD, &st);
                }
                MT_CHECK(gpu_err_class(rc) == MPI_ERR_TRUNCATE, "%s of %zu B into %zu: %s", call, n, cap,
                         gpu_class_name(gpu_err_class(rc)));
                if (rc != MPI_SUCCESS) {
                    char msg[MPI_MAX_ERROR_STRING];
                    gpu_err_string(rc, msg);
                    MT_CHECK(
                        strstr(msg, call) && strstr(msg, "longer than the receive buffer") && !strstr(msg, "internal_"),
                        "%s of %zu B: error string \"%.200s\"", call, n, msg);
                }
                GPU_CHECK_STATUS(st, 0, tag, 0, "%s of %zu B truncated", call, n);
                GPU_CHECK_UNTOUCHED(get(rk, b, n + GPU_GUARD), n + GPU_GUARD, GPU_SENTINEL,
                                    "%s of %zu B: the buffer of a message that did not fit", call, n);
                MCK(MPI_Recv(b, (int)n, t, 0, tag + 1, MPI_COMM_WORLD, &st));
                GPU_CHECK_STATUS(st, 0, tag + 1, n, "%zu B after the truncation", n);
                GPU_CHECK_SAME(get(rk, b, n), gpu_ref + 8, n, "%zu B after the truncation", n);
                free_kind(rk, b);
            }
        }
    MCK(MPI_Type_free(&cuda_t));
}

static void c_host_to_cuda(void) { truncate_pairing(HOST, DEV, 100); }
static void c_cuda_to_host(void) { truncate_pairing(DEV, HOST, 200); }
static void c_cuda_to_cuda(void) { truncate_pairing(DEV, DEV, 300); }

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    gpu_setup(-1);
    static const gpu_case_t cases[] = {
        {"truncated_host_to_cuda_is_mpi_err_truncate_count_0_nothing_written", c_host_to_cuda, 0},
        {"truncated_cuda_to_host_is_mpi_err_truncate_count_0_nothing_written", c_cuda_to_host, 0},
        {"truncated_cuda_to_cuda_is_mpi_err_truncate_count_0_nothing_written", c_cuda_to_cuda, 0},
    };
    gpu_run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    gpu_teardown();
    return mt_finalize();
}
