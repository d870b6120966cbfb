// Task 1 of bench/contention (contention_kernels.h): the three kernels SHOC's
// contention-mt pairs with MPI (compute, global memory, shared memory) and the copy loops.
// Every unit is short (tens of microseconds on a current GPU), so that the number of units
// an iteration takes can size task 1's loop to about task 0's.
#include <stdlib.h>

#include "contention_kernels.h"

namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;
constexpr int kComputeSteps = 1024;  // per thread and launch, 4 multiply-adds each
constexpr int kSharedSteps = 1024;   // per thread and launch, a read and a write each
constexpr int kSharedSlots = 4;      // floats of shared memory per thread
constexpr double kTriadScale = 3.0;

// Four independent chains keep the multiply-add pipes full; the result is stored so that
// the compiler cannot drop the loop.
__global__ void compute_kernel(float *out, int steps) {
    const int id = blockIdx.x * blockDim.x + threadIdx.x;
    float x0 = 1e-3f * threadIdx.x, x1 = x0 + 0.25f, x2 = x0 + 0.5f, x3 = x0 + 0.75f;
    for (int s = 0; s < steps; ++s) {
        x0 = fmaf(x0, 0.999f, 0.001f);
        x1 = fmaf(x1, 0.999f, 0.001f);
        x2 = fmaf(x2, 0.999f, 0.001f);
        x3 = fmaf(x3, 0.999f, 0.001f);
    }
    out[id] = x0 + x1 + x2 + x3;
}

// The STREAM triad: one read of b and c and one write of a per element.
__global__ void triad_kernel(double *a, const double *b, const double *c, size_t n, double scale) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        a[i] = b[i] + scale * c[i];
}

// Each thread moves a value round its own slots of shared memory (slot j of thread t at
// j * blockDim + t: no bank conflicts, no races); volatile keeps every access a real one.
__global__ void shared_kernel(float *out, int steps) {
    __shared__ float tile[kSharedSlots * kThreads];
    volatile float *v = tile;
    const int t = threadIdx.x;
    for (int j = 0; j < kSharedSlots; ++j) v[j * kThreads + t] = static_cast<float>(t + j);
    for (int s = 0; s < steps; ++s) {
        const float x = v[(s % kSharedSlots) * kThreads + t];
        v[((s + 1) % kSharedSlots) * kThreads + t] = x * 0.999f + 1.0f;
    }
    out[blockIdx.x * blockDim.x + t] = v[t];
}

__global__ void fill_kernel(double *p, size_t n, double base) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = base + static_cast<double>(i % 1024);
}

}  // namespace

extern "C" {

const char *const local_kind_names[LOCAL_KINDS] = {"compute", "global", "shared", "d2h", "h2d", "compute-legacy"};

// The first failed call's error, the later ones skipped.
#define STEP(call)                        \
    do {                                  \
        if (e == cudaSuccess) e = (call); \
    } while (0)

cudaError_t local_work_create(LocalWork *w, size_t array_bytes, size_t copy_bytes) {
    cudaError_t e = cudaSuccess;
    int device = 0, sms = 1;
    *w = LocalWork{};
    w->array_bytes = array_bytes / sizeof(double) * sizeof(double);
    w->copy_bytes = copy_bytes;
    STEP(cudaGetDevice(&device));
    STEP(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    w->blocks = sms * kBlocksPerSm;
    STEP(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
    STEP(cudaMalloc(reinterpret_cast<void **>(&w->a), w->array_bytes));
    STEP(cudaMalloc(reinterpret_cast<void **>(&w->b), w->array_bytes));
    STEP(cudaMalloc(reinterpret_cast<void **>(&w->c), w->array_bytes));
    STEP(cudaMalloc(&w->dev_copy, copy_bytes));
    STEP(cudaMallocHost(&w->host_copy, copy_bytes));
    STEP(cudaMalloc(reinterpret_cast<void **>(&w->scratch), sizeof(float) * w->blocks * kThreads));
    const size_t n = w->array_bytes / sizeof(double);
    if (e == cudaSuccess && n > 0) {
        fill_kernel<<<w->blocks, kThreads, 0, w->stream>>>(w->b, n, 1.0);
        fill_kernel<<<w->blocks, kThreads, 0, w->stream>>>(w->c, n, 2.0);
        STEP(cudaGetLastError());
    }
    STEP(cudaMemsetAsync(w->a, 0, w->array_bytes, w->stream));
    STEP(cudaMemsetAsync(w->dev_copy, 0x5a, copy_bytes, w->stream));
    STEP(cudaStreamSynchronize(w->stream));
    return e;
}

cudaError_t local_work_destroy(LocalWork *w) {
    cudaError_t e = cudaSuccess;
    if (w->stream) STEP(cudaStreamSynchronize(w->stream));
    STEP(cudaFree(w->a));
    STEP(cudaFree(w->b));
    STEP(cudaFree(w->c));
    STEP(cudaFree(w->dev_copy));
    STEP(cudaFreeHost(w->host_copy));
    STEP(cudaFree(w->scratch));
    if (w->stream) STEP(cudaStreamDestroy(w->stream));
    *w = LocalWork{};
    return e;
}

cudaError_t local_work_iteration(LocalWork *w, LocalKind kind, long units) {
    // Stream 0 is the legacy default stream here: nvcc's default, not per-thread.
    cudaStream_t stream = kind == LOCAL_COMPUTE_LEGACY ? static_cast<cudaStream_t>(0) : w->stream;
    const size_t n = w->array_bytes / sizeof(double);
    for (long u = 0; u < units; ++u) {
        switch (kind) {
            case LOCAL_COMPUTE:
            case LOCAL_COMPUTE_LEGACY:
                compute_kernel<<<w->blocks, kThreads, 0, stream>>>(w->scratch, kComputeSteps);
                break;
            case LOCAL_GLOBAL:
                triad_kernel<<<w->blocks, kThreads, 0, stream>>>(w->a, w->b, w->c, n, kTriadScale);
                break;
            case LOCAL_SHARED: shared_kernel<<<w->blocks, kThreads, 0, stream>>>(w->scratch, kSharedSteps); break;
            case LOCAL_D2H: {
                cudaError_t e =
                    cudaMemcpyAsync(w->host_copy, w->dev_copy, w->copy_bytes, cudaMemcpyDeviceToHost, stream);
                if (e != cudaSuccess) return e;
                break;
            }
            case LOCAL_H2D: {
                cudaError_t e =
                    cudaMemcpyAsync(w->dev_copy, w->host_copy, w->copy_bytes, cudaMemcpyHostToDevice, stream);
                if (e != cudaSuccess) return e;
                break;
            }
            default: return cudaErrorInvalidValue;
        }
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaStreamSynchronize(stream);
}

long local_work_check_triad(LocalWork *w) {
    const size_t n = w->array_bytes / sizeof(double);
    double *host = static_cast<double *>(malloc(n * sizeof(double) + 1));
    if (!host) return -1;
    cudaError_t e = cudaMemcpyAsync(host, w->a, n * sizeof(double), cudaMemcpyDeviceToHost, w->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(w->stream);
    long bad = 0;
    // b and c hold small integers plus 1 and 2: the sum is exact in doubles.
    for (size_t i = 0; e == cudaSuccess && i < n; ++i) {
        const double k = static_cast<double>(i % 1024);
        if (host[i] != (1.0 + k) + kTriadScale * (2.0 + k)) ++bad;
    }
    free(host);
    return e == cudaSuccess ? bad : -1;
}

}  // extern "C"
