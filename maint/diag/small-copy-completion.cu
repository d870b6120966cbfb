// How soon can the host know that a small copy is done, and what does issuing it cost?
// Issue 4's 8 B D->H and H->D messages trail staging by hand (cudaMemcpy + MPI_Send) by
// 0.3-1 us, and the library's copies pay cudaMemcpyAsync with cudaMemcpyDefault, a
// cuStreamWriteValue64 of a done word and a cudaEventRecord before they are polled. One
// process, no MPI: for each copy (device 0 to pinned host, pinned host to device 0, and a
// pull by device 1 from device 0's memory over peer access) and LEN bytes, every variant
//   sync         cudaMemcpy: what staging by hand does (for the pull, cudaMemcpyPeer, which
//                returns before a device-to-device copy ends: the call alone)
//   streamsync   cudaMemcpyAsync (explicit kind) + cudaStreamSynchronize
//   streamquery  cudaMemcpyAsync (explicit kind), then cudaStreamQuery until done
//   event        cudaMemcpyAsync (cudaMemcpyDefault) + cudaEventRecord, cudaEventQuery until done
//   flag+event   cudaMemcpyAsync (cudaMemcpyDefault) + cuStreamWriteValue64 + cudaEventRecord,
//                the word polled in host memory (the library's default)
//   flag         the same without the event
//   flag-kind    flag, with the explicit kind
//   memop        host to device only, LEN a multiple of 8 up to 64: no copy at all, the
//                payload's 8-byte words written into device memory by cuStreamWriteValue64
//                (values taken at the call), then the done word as in flag
//   memop-batch  the same writes and the done word in one cuStreamBatchMemOp call
//   memop-sync   the payload's writes, then cudaStreamSynchronize (no done word)
//   memop-v1     memop-batch through the v1 API, the payload's writes unfenced
//                (CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER), the done word fenced
// (the memop variants take LEN up to 256.)
// runs in turn, ITERS times each, on a non-blocking stream of the greatest priority (the
// library's; PRIO 0 gives the default priority instead). Prints per variant the median and
// 10th percentile of the time from issue to seen done, and the median CPU time of the
// cudaMemcpyAsync call alone. Session 22's runs: bench/results/explore-2026-11-25-h200x2-s22.txt.
//
//   nvcc -O2 -o /tmp/small-copy maint/diag/small-copy-completion.cu -lcuda
//   /tmp/small-copy [LEN [ITERS [PRIO [EVICT]]]]    (8 B, 2000, 1, 0)
// EVICT > 0: before each copy, write EVICT bytes of other memory, as an MPI process's
// progress loop does between copies, so the driver's call runs with cold caches.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <string>
#include <vector>

#include "clock_us.h"
#include "cuda_check.h"

static double pct(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[(size_t)(p * (v.size() - 1))];
}

enum Variant {
    SYNC,
    STREAMSYNC,
    STREAMQUERY,
    EVENT,
    FLAG_EVENT,
    FLAG,
    FLAG_KIND,
    MEMOP,
    MEMOP_BATCH,
    MEMOP_SYNC,
    MEMOP_V1,
    NVARIANTS
};
static const char *kNames[] = {"sync",      "streamsync", "streamquery", "event",      "flag+event", "flag",
                               "flag-kind", "memop",      "memop-batch", "memop-sync", "memop-v1"};

// The v1 cuStreamBatchMemOp (deprecated; the v2 that cuda.h names refuses
// CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER): null where the driver does not give it.
typedef CUresult (*BatchV1)(CUstream, unsigned int, CUstreamBatchMemOpParams *, unsigned int);
static BatchV1 batch_v1;

// The memop variants write the payload itself: only into device memory, from host
// memory the CPU can read at the call, in whole 8-byte words.
static bool memop_applies(cudaMemcpyKind kind, size_t len, int v = MEMOP) {
    if (v == MEMOP_V1 && !batch_v1) return false;
    return kind == cudaMemcpyHostToDevice && len % 8 == 0 && len >= 8 && len <= 256;
}

struct Copy {
    const char *name;
    int device;  // the device whose stream runs it
    void *dst;
    const void *src;
    cudaMemcpyKind kind;
    int peer_src;  // for the pull: the source device (cudaMemcpyPeer); -1 otherwise
};

struct Stream {
    cudaStream_t s;
    cudaEvent_t ev;
    volatile unsigned long long *word;  // pinned, mapped
    CUdeviceptr word_dev;
    unsigned long long seq = 0;
};

static Stream make_stream(int dev, bool greatest_priority) {
    Stream st;
    CK(cudaSetDevice(dev));
    int least, greatest;
    CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CK(cudaStreamCreateWithPriority(&st.s, cudaStreamNonBlocking, greatest_priority ? greatest : least));
    CK(cudaEventCreateWithFlags(&st.ev, cudaEventDisableTiming));
    void *w;
    CK(cudaHostAlloc(&w, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    st.word = static_cast<volatile unsigned long long *>(w);
    *st.word = 0;
    void *wd;
    CK(cudaHostGetDevicePointer(&wd, w, 0));
    st.word_dev = reinterpret_cast<CUdeviceptr>(wd);
    return st;
}

// One copy in one variant; returns the time from issue to seen done, and the CPU time of
// the cudaMemcpyAsync call in *call_us.
static double one(const Copy &c, Stream &st, Variant v, size_t len, double *call_us) {
    CK(cudaSetDevice(c.device));
    const double t0 = now_us();
    *call_us = 0;
    if (v == SYNC) {
        if (c.peer_src >= 0)
            CK(cudaMemcpyPeer(c.dst, c.device, c.src, c.peer_src, len));
        else
            CK(cudaMemcpy(c.dst, c.src, len, c.kind));
        return now_us() - t0;
    }
    if (v == MEMOP || v == MEMOP_BATCH || v == MEMOP_SYNC || v == MEMOP_V1) {
        const unsigned long long *words = static_cast<const unsigned long long *>(c.src);
        const size_t n = len / 8;
        const CUdeviceptr dst = reinterpret_cast<CUdeviceptr>(c.dst);
        if (v == MEMOP_SYNC) {
            for (size_t i = 0; i < n; ++i)
                CKD(cuStreamWriteValue64(reinterpret_cast<CUstream>(st.s), dst + 8 * i, words[i],
                                         CU_STREAM_WRITE_VALUE_DEFAULT));
            *call_us = now_us() - t0;
            CK(cudaStreamSynchronize(st.s));
            return now_us() - t0;
        }
        if (v == MEMOP) {
            for (size_t i = 0; i < n; ++i)
                CKD(cuStreamWriteValue64(reinterpret_cast<CUstream>(st.s), dst + 8 * i, words[i],
                                         CU_STREAM_WRITE_VALUE_DEFAULT));
            CKD(cuStreamWriteValue64(reinterpret_cast<CUstream>(st.s), st.word_dev, ++st.seq,
                                     CU_STREAM_WRITE_VALUE_DEFAULT));
        } else {
            CUstreamBatchMemOpParams ops[33];
            memset(ops, 0, sizeof ops);
            for (size_t i = 0; i <= n; ++i) {
                ops[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
                ops[i].writeValue.address = i < n ? dst + 8 * i : st.word_dev;
                ops[i].writeValue.value64 = i < n ? words[i] : ++st.seq;
                ops[i].writeValue.flags =
                    v == MEMOP_V1 && i < n ? CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER : CU_STREAM_WRITE_VALUE_DEFAULT;
            }
            if (v == MEMOP_V1)
                CKD(batch_v1(reinterpret_cast<CUstream>(st.s), static_cast<unsigned>(n + 1), ops, 0));
            else
                CKD(cuStreamBatchMemOp(reinterpret_cast<CUstream>(st.s), static_cast<unsigned>(n + 1), ops, 0));
        }
        *call_us = now_us() - t0;
        while (*st.word < st.seq) {
        }
        return now_us() - t0;
    }
    const bool explicit_kind = v == STREAMSYNC || v == STREAMQUERY || v == FLAG_KIND;
    CK(cudaMemcpyAsync(c.dst, c.src, len, explicit_kind ? c.kind : cudaMemcpyDefault, st.s));
    *call_us = now_us() - t0;
    const bool flagged = v == FLAG_EVENT || v == FLAG || v == FLAG_KIND;
    if (flagged)
        CKD(cuStreamWriteValue64(reinterpret_cast<CUstream>(st.s), st.word_dev, ++st.seq,
                                 CU_STREAM_WRITE_VALUE_DEFAULT));
    if (v == EVENT || v == FLAG_EVENT) CK(cudaEventRecord(st.ev, st.s));
    switch (v) {
        case STREAMSYNC: CK(cudaStreamSynchronize(st.s)); break;
        case STREAMQUERY:
            while (cudaStreamQuery(st.s) == cudaErrorNotReady) {
            }
            break;
        case EVENT:
            while (cudaEventQuery(st.ev) == cudaErrorNotReady) {
            }
            break;
        default:
            while (*st.word < st.seq) {
            }
            break;
    }
    const double t = now_us() - t0;
    if (v == FLAG_EVENT) CK(cudaEventSynchronize(st.ev));  // the event back idle, as the pool's would be
    return t;
}

int main(int argc, char **argv) {
    size_t len = argc > 1 ? strtoull(argv[1], nullptr, 0) : 8;
    int iters = argc > 2 ? atoi(argv[2]) : 2000;
    bool prio = argc > 3 ? atoi(argv[3]) != 0 : true;
    size_t evict = argc > 4 ? strtoull(argv[4], nullptr, 0) : 0;
    std::vector<char> other(evict ? evict : 1);
    unsigned char stir = 0;
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    {
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuStreamBatchMemOp", &fn, 8000, cudaEnableDefault, &found) ==
                cudaSuccess &&
            found == cudaDriverEntryPointSuccess)
            batch_v1 = reinterpret_cast<BatchV1>(fn);
        int v1 = 0, v1_64 = 0;
        CK(cudaSetDevice(0));
        cuDeviceGetAttribute(&v1, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0);
        cuDeviceGetAttribute(&v1_64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1, 0);
        printf("# v1 cuStreamBatchMemOp %s; device 0: v1 memory operations %d, 64-bit %d\n",
               batch_v1 ? "found" : "not found", v1, v1_64);
        if (!v1 || !v1_64) batch_v1 = nullptr;
    }
    void *d0, *d1 = nullptr, *h;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&d0, len));
    CK(cudaMemset(d0, 1, len));
    CK(cudaMallocHost(&h, len));
    std::vector<Copy> copies = {{"D2H dev0", 0, h, d0, cudaMemcpyDeviceToHost, -1},
                                {"H2D dev0", 0, d0, h, cudaMemcpyHostToDevice, -1}};
    std::vector<Stream> streams = {make_stream(0, prio), make_stream(0, prio)};
    if (ndev > 1) {
        CK(cudaSetDevice(1));
        CK(cudaMalloc(&d1, len));
        int can = 0;
        CK(cudaDeviceCanAccessPeer(&can, 1, 0));
        if (can) {
            CK(cudaDeviceEnablePeerAccess(0, 0));
            copies.push_back({"pull dev1<-dev0", 1, d1, d0, cudaMemcpyDeviceToDevice, 0});
            streams.push_back(make_stream(1, prio));
        }
    }
    printf(
        "# %zu B, %d iterations a variant, interleaved, streams of %s priority, %zu bytes\n"
        "# written before each copy; us from issue to seen done (median, p10), and the\n"
        "# cudaMemcpyAsync call's CPU time (median)\n",
        len, iters, prio ? "the greatest" : "the default", evict);
    for (size_t ci = 0; ci < copies.size(); ++ci) {
        std::vector<std::vector<double>> t(NVARIANTS), call(NVARIANTS);
        if (copies[ci].kind == cudaMemcpyHostToDevice)  // a payload the read-back can tell apart
            for (size_t i = 0; i < len; ++i)
                static_cast<unsigned char *>(h)[i] = static_cast<unsigned char>(37 * i + 11);
        for (int w = 0; w < 200; ++w) {
            double cu;
            for (int v = 0; v < NVARIANTS; ++v)
                if (v < MEMOP || memop_applies(copies[ci].kind, len, v))
                    one(copies[ci], streams[ci], (Variant)v, len, &cu);
        }
        for (int i = 0; i < iters; ++i)
            for (int v = 0; v < NVARIANTS; ++v) {
                if (v >= MEMOP && !memop_applies(copies[ci].kind, len, v)) continue;
                double cu;
                if (evict) memset(other.data(), ++stir, evict);
                t[v].push_back(one(copies[ci], streams[ci], (Variant)v, len, &cu));
                call[v].push_back(cu);
            }
        printf("%-16s", copies[ci].name);
        for (int v = 0; v < NVARIANTS; ++v)
            if (!t[v].empty())
                printf(" | %s %.2f (%.2f) [%.2f]", kNames[v], pct(t[v], 0.5), pct(t[v], 0.1), pct(call[v], 0.5));
        printf("\n");
        if (memop_applies(copies[ci].kind, len)) {
            // The written words must be the payload's: read them back.
            std::vector<unsigned char> back(len);
            CK(cudaMemcpy(back.data(), copies[ci].dst, len, cudaMemcpyDeviceToHost));
            printf("%-16s memop payload read back %s\n", "", memcmp(back.data(), copies[ci].src, len) ? "WRONG" : "ok");
        }
    }
    return 0;
}
