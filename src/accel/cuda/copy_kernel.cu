// Small copies by kernel, for the latency of short messages (docs/performance.md,
// 'One-block copy kernel' and 'Resident copy kernel').
//
// A copy-engine copy of a few bytes and a wait for its event cost the same whatever the
// copy kind or the way of waiting. Between device buffers a one-block kernel that stores
// a sequence number into pinned host memory once its data is visible, with the host
// spinning on that word, ends sooner on one GPU. So small device-to-device copies within
// one GPU run here, IPC pulls from another process on that GPU included. Pulls from
// another GPU do not: across GPUs on NVLink the kernel lost to a copy engine. Nor do
// copies to or from host memory (a copy engine issues those faster than a kernel
// launches).
//
// A copy engine's small copy is bound by getting work onto the GPU and its end back to the
// host, not by the bytes: so an IPC pull of at most MPIACC_CUDA_KERNEL_COPY_MAX that goes
// alone, from another GPU or this one, goes to mpiacc_resident_copy below, one warp that
// stays on the GPU while pulls come and reads them from a ring in pinned host memory
// (resident_ring.h), and ends well before a copy engine's copy would. It takes the small
// copies of staged messages too, between the GPU's memory and pinned host memory that it
// reads and writes at the host's addresses, where a launched kernel had lost to a copy
// engine.
//
// Built by nvcc into a fatbin that kernels.cc embeds and loads with cudaLibraryLoadData
// on first use: nothing registers with the driver when the library loads, so a process
// without a driver still loads libmpiacc.

#include "resident_ring.h"

// Per-thread chunks in flight: each thread issues all its loads before any store, so a
// read across NVLink costs one round trip, not one per chunk.
#define MPIACC_COPY_UNROLL 8
#define MPIACC_COPY_THREADS 256

// Copies `len` bytes (at most MPIACC_COPY_THREADS * MPIACC_COPY_UNROLL * 16) in one block;
// `dst` and `src` are 16-byte aligned. Then makes the data visible to the whole system and
// writes `seq` into `*done` (pinned host memory), which only grows on one stream.
extern "C" __global__ void __launch_bounds__(MPIACC_COPY_THREADS)
    mpiacc_copy_small(uint4 *dst, const uint4 *src, unsigned long long len, unsigned long long *done,
                      unsigned long long seq) {
    const unsigned t = threadIdx.x;
    const unsigned long long vectors = len / sizeof(uint4);
    uint4 v[MPIACC_COPY_UNROLL];
#pragma unroll
    for (int k = 0; k < MPIACC_COPY_UNROLL; ++k) {
        const unsigned long long i = t + static_cast<unsigned long long>(k) * MPIACC_COPY_THREADS;
        if (i < vectors) v[k] = src[i];
    }
#pragma unroll
    for (int k = 0; k < MPIACC_COPY_UNROLL; ++k) {
        const unsigned long long i = t + static_cast<unsigned long long>(k) * MPIACC_COPY_THREADS;
        if (i < vectors) dst[i] = v[k];
    }
    const unsigned long long tail = len % sizeof(uint4);
    if (t < tail) {
        const unsigned long long at = vectors * sizeof(uint4) + t;
        reinterpret_cast<unsigned char *>(dst)[at] = reinterpret_cast<const unsigned char *>(src)[at];
    }
    // Every thread's stores reach the system before thread 0, after the barrier, says so.
    __threadfence_system();
    __syncthreads();
    if (t == 0) *reinterpret_cast<volatile unsigned long long *>(done) = seq;
}

// ---------------------------------------------------------------------- resident copier

static __device__ unsigned long long resident_load(const unsigned long long *p) {
    unsigned long long v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

static __device__ void resident_store(unsigned long long *p, unsigned long long v) {
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

static __device__ unsigned long long resident_clock_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// U vectors in flight a lane: the warp reads U * 512 bytes per round trip to the source
// (across NVLink, or to host memory over PCIe). Indices are 32-bit: the kernel takes a
// command's length from 32 bits of its word.
template <int U>
static __device__ void resident_copy_vectors(int4 *dst_vectors, const int4 *src_vectors, unsigned vectors,
                                             unsigned lane) {
    for (unsigned i = lane; i < vectors; i += 32 * U) {
        // One base address and one count a step: vector k is at a constant offset.
        const unsigned left = vectors - i;
        const int4 *s = src_vectors + i;
        int4 *d = dst_vectors + i;
        int4 v[U];
#pragma unroll
        for (unsigned k = 0; k < U; ++k)
            if (32 * k < left) v[k] = __ldcv(s + 32 * k);
#pragma unroll
        for (unsigned k = 0; k < U; ++k)
            if (32 * k < left) d[32 * k] = v[k];
    }
}

// One command's bytes by the warp. Loads bypass the L1 (__ldcv): a source is often read
// again after its owner rewrote it, and this kernel outlives any one copy. 16-byte
// aligned ends go in vectors, otherwise byte by byte, which the host allows only for
// short copies. The vectors a lane keeps in flight grow with the copy: a round trip to the
// source costs less than the unrolled, predicated code of a wider step does when most of
// it is off (one width at every size was slower: docs/performance.md, 'Resident copy
// kernel').
static __device__ void resident_copy_bytes(unsigned char *dst, const unsigned char *src, unsigned len, unsigned lane) {
    if (((reinterpret_cast<unsigned long long>(dst) | reinterpret_cast<unsigned long long>(src)) & 15) == 0) {
        const unsigned vectors = len / 16;
        int4 *dst_vectors = reinterpret_cast<int4 *>(dst);
        const int4 *src_vectors = reinterpret_cast<const int4 *>(src);
        if (vectors <= 32 * 4)
            resident_copy_vectors<4>(dst_vectors, src_vectors, vectors, lane);
        else if (vectors <= 32 * 16)
            resident_copy_vectors<16>(dst_vectors, src_vectors, vectors, lane);
        else
            resident_copy_vectors<32>(dst_vectors, src_vectors, vectors, lane);
        const unsigned at = vectors * 16 + lane;
        if (at < len) dst[at] = __ldcv(src + at);
        return;
    }
    for (unsigned i = lane; i < len; i += 32) dst[i] = __ldcv(src + i);
}

// One warp, launched by ResidentCopier on its own stream. It takes commands from `next`
// on, in order, until none has come for `idle_ns` or it has run `life_ns` (so that a
// cudaDeviceSynchronize of the application's waits at most that long for it), or the
// host sets `stop`. Lane i < 5 reads word i of the next slot and lane 5 the stop word,
// all in one instruction: one round trip to host memory per poll.
extern "C" __global__ void __launch_bounds__(32)
    mpiacc_resident_copy(mpiacc_resident_ring *ring, unsigned long long next, unsigned long long idle_ns,
                         unsigned long long life_ns, unsigned long long gen) {
    const unsigned lane = threadIdx.x;
    if (lane == 0) resident_store(&ring->started.word[0], gen);
    const unsigned long long born = resident_clock_ns();
    unsigned long long last = born;
    for (;;) {
        const mpiacc_resident_line *slot = &ring->slot[next % MPIACC_RESIDENT_SLOTS];
        const unsigned long long w = lane < MPIACC_RESIDENT_WORDS    ? resident_load(&slot->word[lane])
                                     : lane == MPIACC_RESIDENT_WORDS ? resident_load(&ring->stop.word[0])
                                                                     : 0;
        const unsigned flag = static_cast<unsigned>(next + 1);
        const bool current = lane >= MPIACC_RESIDENT_WORDS || static_cast<unsigned>(w >> 32) == flag;
        if (__all_sync(0xffffffffu, current)) {
            const unsigned lo = static_cast<unsigned>(w);
            const unsigned long long src = __shfl_sync(0xffffffffu, lo, 0) |
                                           static_cast<unsigned long long>(__shfl_sync(0xffffffffu, lo, 1)) << 32;
            const unsigned long long dst = __shfl_sync(0xffffffffu, lo, 2) |
                                           static_cast<unsigned long long>(__shfl_sync(0xffffffffu, lo, 3)) << 32;
            const unsigned len = __shfl_sync(0xffffffffu, lo, 4);
            resident_copy_bytes(reinterpret_cast<unsigned char *>(dst), reinterpret_cast<const unsigned char *>(src),
                                len, lane);
            // Every lane's stores, then (cumulative) the system-wide fence, then the word.
            __syncwarp();
            if (lane == 0) {
                __threadfence_system();
                resident_store(&ring->done[next % MPIACC_RESIDENT_SLOTS].word[0], next + 1);
            }
            ++next;
            last = resident_clock_ns();
            continue;
        }
        const bool stop = __shfl_sync(0xffffffffu, w, MPIACC_RESIDENT_WORDS) != 0;
        const unsigned long long now = resident_clock_ns();
        if (stop || now - last > idle_ns || now - born > life_ns) break;
    }
    if (lane == 0) {
        __threadfence_system();
        resident_store(&ring->exited.word[0],
                       gen << MPIACC_RESIDENT_GEN_SHIFT | (next & ((1ull << MPIACC_RESIDENT_GEN_SHIFT) - 1)));
    }
}
