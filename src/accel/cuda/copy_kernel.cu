// Small device-to-device copies by kernel, for the latency of short messages.
//
// A copy-engine copy of 8 bytes between GPUs and a wait for its event took 7.2 us on the
// H200 machine whatever the copy kind or the way of waiting. Between device buffers a
// one-block kernel that stores a sequence number into pinned host memory once its data is
// visible, with the host spinning on that word, took 1.4-1.9 us less on one H200
// (.device/kcopy.cu, session 8). So small device-to-device copies within one GPU run
// here, IPC pulls from another process on that GPU included. Pulls from another GPU do
// not: across two H200s on NVLink the kernel took 14.5 us one way against 11.5 for a
// copy engine (session 10). Nor do copies to or from host memory (a copy engine issues
// those faster than a kernel launches).
//
// Built by nvcc into a fatbin that cuda_accel.cc embeds and loads with cudaLibraryLoadData
// on first use: nothing registers with the driver when the library loads, so a process
// without a driver still loads libmpiacc.

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
