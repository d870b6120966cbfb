// Could a small IPC pull start sooner if the receiver queued it on the GPU before the
// sender's RTS arrives? Issue 4 asks 8 B D->D in <= 8 us one way; the pull that MPI-ACC
// issues on the RTS costs ~7.1 us from cudaMemcpyAsync to seen done on two H200s (session
// 22), so one host message and any bookkeeping on top already reach 8. Here the copy (or
// a kernel that does it) is queued ahead, behind a word in pinned host memory, and the
// host only writes that word when the "RTS" comes: how long from that write to the copy
// seen done?
//
// One process, device 1 pulling LEN bytes from device 0's memory over peer access (what
// an IPC mapping gives a receiver), on a non-blocking stream of the greatest priority.
// Variants, interleaved, ITERS each; us from the trigger to the done word seen set:
//   issue        the trigger is cudaMemcpyAsync itself, then cuStreamWriteValue64 of the
//                done word behind it (what the library does today, flag form)
//   ce-queued    cuStreamWaitValue64 on a go word, cudaMemcpyAsync, cuStreamWriteValue64
//                queued beforehand; the trigger writes the go word
//   kernel-spin  a one-block kernel launched beforehand spins on the go word, then copies
//                from the source the host wrote into a descriptor, fences system-wide and
//                sets the done word (an SM held while it waits)
//   kernel-queued the same kernel behind cuStreamWaitValue64 on the go word (no SM held:
//                the launch is what waits)
// Each queued variant is given QUEUE_US (default 50) to reach its wait before the trigger.
// The descriptor's source and length are what a pre-posted receive would not know until
// the RTS; the kernels read them after the trigger, so only they could serve a message
// whose source was not guessed.
//
//   nvcc -O2 -I maint/diag -o /tmp/preposted maint/diag/preposted-pull.cu -lcuda
//   /tmp/preposted [LEN [ITERS [QUEUE_US]]]    (8, 2000, 50)
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "clock_us.h"
#include "cuda_check.h"

// Written by the host before the go word; read by the kernels after it.
struct Descriptor {
    const unsigned char *src;
    unsigned char *dst;
    unsigned long long len;
};

// Words the host and the GPU share, in pinned mapped memory.
struct Shared {
    volatile unsigned long long go;
    volatile unsigned long long done;
    Descriptor desc;
};

// Byte by byte: the question is latency at a few bytes, not a kernel's bandwidth.
__device__ void copy_and_flag(Shared *sh, unsigned long long seq) {
    volatile Descriptor *vd = &sh->desc;
    const unsigned char *src = vd->src;
    unsigned char *dst = vd->dst;
    const unsigned long long len = vd->len;
    for (unsigned long long i = threadIdx.x; i < len; i += blockDim.x) dst[i] = src[i];
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) sh->done = seq;
}

__global__ void kernel_spin(Shared *sh, unsigned long long seq) {
    if (threadIdx.x == 0)
        while (sh->go < seq) {
        }
    __syncthreads();
    __threadfence_system();
    copy_and_flag(sh, seq);
}

__global__ void kernel_queued(Shared *sh, unsigned long long seq) { copy_and_flag(sh, seq); }

enum Variant { ISSUE, CE_QUEUED, KERNEL_SPIN, KERNEL_QUEUED, NVARIANTS };
static const char *kNames[] = {"issue", "ce-queued", "kernel-spin", "kernel-queued"};

static double pct(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[(size_t)(p * (v.size() - 1))];
}

static void spin_for(double us) {
    const double t = now_us();
    while (now_us() - t < us) {
    }
}

struct Run {
    cudaStream_t s;
    Shared *sh;      // host view
    Shared *sh_dev;  // device view
    CUdeviceptr go_dev, done_dev;
    unsigned long long seq = 0;
    unsigned char *src, *dst;
    size_t len;
    double queue_us;
};

// One pull; returns us from the trigger to the done word seen set.
static double one(Run &r, Variant v) {
    const unsigned long long seq = ++r.seq;
    CUstream cs = reinterpret_cast<CUstream>(r.s);
    r.sh->desc.src = nullptr;
    r.sh->desc.dst = nullptr;
    r.sh->desc.len = 0;
    if (v == CE_QUEUED) {
        CKD(cuStreamWaitValue64(cs, r.go_dev, seq, CU_STREAM_WAIT_VALUE_GEQ));
        CK(cudaMemcpyAsync(r.dst, r.src, r.len, cudaMemcpyDefault, r.s));
        CKD(cuStreamWriteValue64(cs, r.done_dev, seq, CU_STREAM_WRITE_VALUE_DEFAULT));
    } else if (v == KERNEL_SPIN) {
        kernel_spin<<<1, 256, 0, r.s>>>(r.sh_dev, seq);
        CK(cudaGetLastError());
    } else if (v == KERNEL_QUEUED) {
        CKD(cuStreamWaitValue64(cs, r.go_dev, seq, CU_STREAM_WAIT_VALUE_GEQ));
        kernel_queued<<<1, 256, 0, r.s>>>(r.sh_dev, seq);
        CK(cudaGetLastError());
    }
    if (v != ISSUE) spin_for(r.queue_us);
    const double t0 = now_us();
    if (v == ISSUE) {
        CK(cudaMemcpyAsync(r.dst, r.src, r.len, cudaMemcpyDefault, r.s));
        CKD(cuStreamWriteValue64(cs, r.done_dev, seq, CU_STREAM_WRITE_VALUE_DEFAULT));
    } else {
        r.sh->desc.src = r.src;
        r.sh->desc.dst = r.dst;
        r.sh->desc.len = r.len;
        __sync_synchronize();
        r.sh->go = seq;
    }
    while (r.sh->done < seq) {
    }
    const double t = now_us() - t0;
    CK(cudaStreamSynchronize(r.s));
    return t;
}

int main(int argc, char **argv) {
    size_t len = argc > 1 ? strtoull(argv[1], nullptr, 0) : 8;
    int iters = argc > 2 ? atoi(argv[2]) : 2000;
    double queue_us = argc > 3 ? atof(argv[3]) : 50;
    int ndev = 0, can = 0;
    CK(cudaGetDeviceCount(&ndev));
    if (ndev < 2) {
        printf("# needs two devices\n");
        return 0;
    }
    CK(cudaDeviceCanAccessPeer(&can, 1, 0));
    if (!can) {
        printf("# device 1 cannot access device 0\n");
        return 0;
    }
    Run r;
    r.len = len;
    r.queue_us = queue_us;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&r.src, len));
    CK(cudaMemset(r.src, 0x5a, len));
    CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(1));
    CK(cudaDeviceEnablePeerAccess(0, 0));
    CK(cudaMalloc(&r.dst, len));
    int least, greatest;
    CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CK(cudaStreamCreateWithPriority(&r.s, cudaStreamNonBlocking, greatest));
    void *h;
    CK(cudaHostAlloc(&h, sizeof(Shared), cudaHostAllocMapped | cudaHostAllocPortable));
    memset(h, 0, sizeof(Shared));
    r.sh = static_cast<Shared *>(h);
    void *hd;
    CK(cudaHostGetDevicePointer(&hd, h, 0));
    r.sh_dev = static_cast<Shared *>(hd);
    r.go_dev = reinterpret_cast<CUdeviceptr>(&r.sh_dev->go);
    r.done_dev = reinterpret_cast<CUdeviceptr>(&r.sh_dev->done);

    std::vector<std::vector<double>> t(NVARIANTS);
    for (int w = 0; w < 100; ++w)
        for (int v = 0; v < NVARIANTS; ++v) one(r, (Variant)v);
    for (int i = 0; i < iters; ++i)
        for (int v = 0; v < NVARIANTS; ++v) t[v].push_back(one(r, (Variant)v));
    // Each variant's copy really happened: the destination cleared, one more pull, read back.
    std::vector<unsigned char> back(len);
    size_t bad = 0;
    for (int v = 0; v < NVARIANTS; ++v) {
        CK(cudaMemset(r.dst, 0, len));
        CK(cudaDeviceSynchronize());
        one(r, (Variant)v);
        CK(cudaMemcpy(back.data(), r.dst, len, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < len; ++i) bad += back[i] != 0x5a;
    }
    printf(
        "# %zu B pulled by device 1 from device 0, %d iterations a variant, queued %.0f us ahead;\n"
        "# us from the trigger to the done word seen: median (p10, p90); %zu wrong bytes\n",
        len, iters, queue_us, bad);
    for (int v = 0; v < NVARIANTS; ++v)
        printf("%-14s %6.2f (%5.2f, %5.2f)\n", kNames[v], pct(t[v], 0.5), pct(t[v], 0.1), pct(t[v], 0.9));
    return bad ? 1 : 0;
}
