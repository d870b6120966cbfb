/* MPI_Reduce_local on CUDA memory (test/mpi/reduce_local_cases.h): every (op, type) pair
 * MPI defines, against MPICH on host copies, byte for byte; pairs it does not define
 * refused. Also: the kernel runs after work already on the user's stream
 * (MPIX_ACC_STREAM: an asynchronous copy just before the call). Each rank reduces on its
 * own device; two ranks because gpu_setup wants them.
 * MPIACC-TEST-RANKS: 2 */
#include "gpu_util.h"
#include "../mpi/reduce_local_cases.h"

static void *cu_alloc(size_t bytes) {
    void *p = NULL;
    CK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
static void cu_put(void *dev, const void *host, size_t bytes) {
    CK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
}
static void cu_get(void *dev, void *host, size_t bytes) { CK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost)); }
static void cu_release(void *dev) { CK(cudaFree(dev)); }
static MPI_Datatype cu_tag(MPI_Datatype base) {
    MPI_Datatype t;
    MPI_Type_dup(base, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    return t;
}

/* Copies enqueued on the user's stream without waiting, then the call: the sum sees them. */
static void ordered_after_stream(void) {
    MT_CASE("MPI_Reduce_local on CUDA memory: runs after work already on the user's stream") {
        enum { N = 1 << 20 };
        int *a = NULL, *b = NULL, *got = (int *)malloc(N * sizeof(int));
        CK(cudaMallocHost((void **)&a, N * sizeof(int)));
        CK(cudaMallocHost((void **)&b, N * sizeof(int)));
        for (int i = 0; i < N; ++i) a[i] = i, b[i] = 3 * i;
        int *din = (int *)cu_alloc(N * sizeof(int)), *dio = (int *)cu_alloc(N * sizeof(int));
        CK(cudaMemset(din, 0, N * sizeof(int)));
        CK(cudaMemset(dio, 0, N * sizeof(int)));
        CK(cudaDeviceSynchronize());
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        MPI_Datatype t = cu_tag(MPI_INT);
        MPI_Type_set_attr(t, MPIX_ACC_STREAM, (void *)s);
        CK(cudaMemcpyAsync(din, a, N * sizeof(int), cudaMemcpyHostToDevice, s));
        CK(cudaMemcpyAsync(dio, b, N * sizeof(int), cudaMemcpyHostToDevice, s));
        int rc = MPI_Reduce_local(din, dio, N, t, MPI_SUM);
        MT_CHECK(rc == MPI_SUCCESS, "MPI_Reduce_local failed");
        cu_get(dio, got, N * sizeof(int));
        int bad = -1;
        for (int i = 0; i < N && bad < 0; ++i)
            if (got[i] != 4 * i) bad = i;
        MT_CHECK(bad < 0, "element %d is %d, not %d", bad, bad < 0 ? 0 : got[bad], 4 * bad);
        MPI_Type_free(&t);
        CK(cudaStreamDestroy(s));
        cu_release(din);
        cu_release(dio);
        CK(cudaFreeHost(a));
        CK(cudaFreeHost(b));
        free(got);
    }
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    gpu_setup(-1);
    if (gpu_skip_why) {
        rl_skip_all("CUDA memory", gpu_skip_why);
        mt_skip("MPI_Reduce_local on CUDA memory: runs after work already on the user's stream", gpu_skip_why);
    } else {
        rl_backend be = {"CUDA memory", cu_alloc, cu_put, cu_get, cu_release, cu_tag, 1};
        gpu_arm("MPI_Reduce_local on CUDA memory", GPU_CASE_LIMIT_S);
        rl_run_all(&be);
        ordered_after_stream();
        alarm(0);
    }
    gpu_teardown();
    return mt_finalize();
}
