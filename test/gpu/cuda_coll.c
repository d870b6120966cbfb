/* Every MPI collective on CUDA memory (cudaMalloc pointers, found by MPI-ACC without an
 * attribute), compared byte for byte with the same collective on host buffers:
 * test/mpi/coll_device.c built with CUDA buffers (its cases, names and kinds mixed across
 * ranks, with CUDA for the device side). Also an Allreduce and an Ibcast on buffers tagged
 * MPIX_ACC_BUF_CUDA with MPIX_ACC_STREAM whose input is still being written on that stream
 * when the call is made. Ranks share GPUs round robin. Without a usable CUDA device every
 * case skips by name. The rank count comes from the program's name (cuda_coll_np3: 3).
 * MPIACC-TEST-RANKS: 2 */
#include <cuda_runtime_api.h>

#include "../mpi/coll_util.h"

#define CU(call)                                                                                \
    do {                                                                                        \
        cudaError_t cu_e_ = (call);                                                             \
        if (cu_e_ != cudaSuccess) {                                                             \
            char cu_m_[256];                                                                    \
            snprintf(cu_m_, sizeof cu_m_, "%s failed: %s (%s)", #call, cudaGetErrorName(cu_e_), \
                     cudaGetErrorString(cu_e_));                                                \
            coll_bail(cu_m_);                                                                   \
        }                                                                                       \
    } while (0)

static void *cu_alloc(size_t n) {
    void *p = NULL;
    CU(cudaMalloc(&p, n ? n : 1));
    return p;
}
/* The library copies on its own streams, which do not wait for the legacy default
 * stream: every set-up copy is finished before MPI sees the buffer. */
static void cu_put(void *dev, const void *src, size_t n) {
    CU(cudaMemcpy(dev, src, n, cudaMemcpyHostToDevice));
    CU(cudaDeviceSynchronize());
}
static void cu_get(const void *dev, void *dst, size_t n) { CU(cudaMemcpy(dst, dev, n, cudaMemcpyDeviceToHost)); }
static void cu_release(void *dev) { CU(cudaFree(dev)); }
static const coll_cuda_ops cu_ops = {cu_alloc, cu_put, cu_get, cu_release};

static char cuda_skip_why[200];

/* CUDA memory where every rank has a device; otherwise every case skips, saying why. */
static void cuda_coll_setup(int kind) {
    if (kind != CK_CUDA) return;
    int ndev = 0, ok = MPIX_Query_cuda_support();
    if (!ok) snprintf(cuda_skip_why, sizeof cuda_skip_why, "no CUDA device (MPIX_Query_cuda_support() = 0)");
    if (ok && (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev <= 0)) {
        (void)cudaGetLastError();
        ok = 0;
        snprintf(cuda_skip_why, sizeof cuda_skip_why, "no CUDA device (cudaGetDeviceCount)");
    }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, W);
    if (!all) {
        if (ok) snprintf(cuda_skip_why, sizeof cuda_skip_why, "no CUDA device at another rank");
        coll_skip_all = cuda_skip_why;
        return;
    }
    CU(cudaSetDevice(mt_rank % ndev));
    CU(cudaFree(0));
    coll_cuda = &cu_ops;
}
#define COLL_SETUP cuda_coll_setup

/* Inputs written by asynchronous copies on the user's stream just before each call: the
 * collective must see them (MPIX_ACC_STREAM orders it after them). Results are read after
 * the stream, so a collective that orders its outputs on it is fine too. */
static void cuda_stream_case(const void *p) {
    (void)p;
    const int n = 1 << 16;
    const size_t bytes = (size_t)n * sizeof(int);
    int *h = NULL, *got = (int *)p2p_alloc(bytes);
    CU(cudaMallocHost((void **)&h, bytes));
    for (int i = 0; i < n; ++i) h[i] = i % 13 + mt_rank;
    int *d = (int *)cu_alloc(bytes), *r = (int *)cu_alloc(bytes);
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    MPI_Datatype t;
    MPI_Type_dup(MPI_INT, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    MPI_Type_set_attr(t, MPIX_ACC_STREAM, (void *)s);

    CU(cudaMemsetAsync(r, 0xff, bytes, s));
    CU(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
    if (coll_ok(MPI_Allreduce(d, r, n, t, MPI_SUM, W), "MPI_Allreduce on the user's stream")) {
        CU(cudaStreamSynchronize(s));
        cu_get(r, got, bytes);
        int bad = -1;
        for (int i = 0; i < n && bad < 0; ++i)
            if (got[i] != mt_size * (i % 13) + mt_size * (mt_size - 1) / 2) bad = i;
        MT_CHECK(bad < 0, "MPI_Allreduce on the user's stream: element %d is %d, expected %d", bad,
                 bad < 0 ? 0 : got[bad], bad < 0 ? 0 : mt_size * (bad % 13) + mt_size * (mt_size - 1) / 2);
    }

    const int root = mt_size - 1;
    for (int i = 0; i < n; ++i) h[i] = 3 * i + 1;
    if (mt_rank == root)
        CU(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
    else
        CU(cudaMemsetAsync(d, 0, bytes, s));
    MPI_Request q = MPI_REQUEST_NULL;
    if (coll_ok(MPI_Ibcast(d, n, t, root, W, &q), "MPI_Ibcast on the user's stream") &&
        coll_wait(&q, 0, "MPI_Ibcast on the user's stream")) {
        CU(cudaStreamSynchronize(s));
        cu_get(d, got, bytes);
        int bad = -1;
        for (int i = 0; i < n && bad < 0; ++i)
            if (got[i] != 3 * i + 1) bad = i;
        MT_CHECK(bad < 0, "MPI_Ibcast on the user's stream: element %d is %d", bad, bad < 0 ? 0 : got[bad]);
    }
    MPI_Type_free(&t);
    CU(cudaStreamDestroy(s));
    cu_release(d);
    cu_release(r);
    CU(cudaFreeHost(h));
    free(got);
}

#ifdef CUDA_COLL_ALGORITHMS
long long mpiacc_counter_value(const char *name);

/* The cases above went through MPI-ACC's device algorithms, not only through staging. */
static void device_algorithms_ran_case(const void *p) {
    (void)p;
    static const char *const counters[] = {"coll.device_allreduce", "coll.device_bcast", "coll.device_allgather",
                                           "coll.device_reduce_scatter"};
    /* With IPC off, ranks that share a GPU stage rather than take turns on it. */
    const char *ipc = getenv("MPIACC_IPC");
    const int staged = ipc && !strcmp(ipc, "0") && !getenv("MPIACC_TEST_COLL_SPREAD");
    for (int i = 0; i < 4 && !staged; ++i)
        MT_CHECK(mpiacc_counter_value(counters[i]) > 0, "%s is %lld: the device algorithm never ran", counters[i],
                 mpiacc_counter_value(counters[i]));
    if (staged)
        MT_CHECK(mpiacc_counter_value("coll.device_declined") > 0 || mpiacc_counter_value("coll.device_allreduce") > 0,
                 "with MPIACC_IPC=0 the large collectives neither ran the device algorithms nor declined them");
    MT_CHECK(mpiacc_counter_value("coll.device_failed") == 0, "coll.device_failed is %lld",
             mpiacc_counter_value("coll.device_failed"));
}
#endif

static void cuda_coll_extra(int kind) {
    coll_case("allreduce_and_ibcast_tagged_with_the_users_stream_see_its_pending_copies",
              kind == CK_CUDA ? NULL : "needs CUDA buffers", cuda_stream_case, NULL);
#ifdef CUDA_COLL_ALGORITHMS
    coll_case("the_device_algorithms_ran", kind == CK_CUDA ? NULL : "needs CUDA buffers", device_algorithms_ran_case,
              NULL);
#endif
}
#define COLL_EXTRA_CASES cuda_coll_extra

#include "../mpi/coll_device.c"
