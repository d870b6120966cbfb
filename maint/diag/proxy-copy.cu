// Can a copy kernel that is already running on the receiver's GPU finish a small pull
// sooner than the copy engine? Issue 4's criterion 2 (D->D 8 B one way <= 8 us) is bound
// by the pull: cudaMemcpyAsync plus its wait cost 6.6-7.2 us of each 9 us one way
// (bench/results/explore-2026-11-26-h200x2-s32.txt), and the copy engine's part is mostly
// the time to get work onto the GPU and its end back to the host. A resident kernel
// takes both out: the host writes a command into pinned host memory the kernel polls, the
// kernel loads the bytes from the peer's memory, stores them and writes a done word back
// into pinned host memory.
//
// One process, no MPI. Device 0 holds the source, device 1 the destination and the
// stream; peer access from 1 to 0, as an IPC mapping opened with
// cudaIpcMemLazyEnablePeerAccess gives. Every iteration first writes a new pattern into
// the source (cudaMemcpy, not timed), then times from the issue to the host seeing the
// copy done, then checks the destination byte for byte (not timed): a kernel that kept
// the source in its cache would read the last pattern. Variants, in turn per iteration
// (each resident one launched anew, once per iteration):
//   ce           cudaMemcpyAsync (cudaMemcpyDefault) + cuStreamWriteValue64 of a done
//                word polled in host memory (the library's pull before the resident copier)
//   res-pN-X     the command ring above, the kernel kept running: one copier warp and N
//                polling warps STAGGER ns apart; X how the copier says done: sys
//                (__threadfence_system, then the word), gpu (__threadfence), rel
//                (st.release.sys of the word)
//   cold-p4-rel  a fresh kernel per copy: the command written, then the kernel launched
//                (what a copy costs when the resident kernel has left)
// Prints per variant the median, 10th and 90th percentile of issue -> seen done, the
// median CPU time of the issue, copies that arrived wrong, and what the kernel saw.
// Session 36 on two H200s (bench/results/explore-2026-11-26-h200x2-s36.txt): 8 B in
// 4.9 us with one poller against 7.9-8.7 for ce; more pollers made every read of host
// memory slower (1.3 us alone, 3.8 with four, 7.6 with eight), so the library's kernel
// (src/accel/cuda/copy_kernel.cu) is one warp that polls and copies.
//
//   nvcc -O2 -arch=sm_90 -o /tmp/proxy-copy maint/diag/proxy-copy.cu -lcuda
//   /tmp/proxy-copy [ITERS [SIZES [STAGGER]]]     (2000, 8,64,1024,4096,16384,65536, 250)
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "clock_us.h"
#include "cuda_check.h"
// The library's copy kernels, for their host-memory loads and stores and clock
// (resident_load, resident_store, resident_clock_ns).
#include "../../src/accel/cuda/copy_kernel.cu"

static double pct(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[(size_t)(p * (v.size() - 1))];
}

constexpr unsigned kSlots = 64;

// One command in one 64-byte line, each 8-byte word half data and half flag (the low
// 32 bits of the command's number plus one), as in NCCL's LL protocol: a word is written
// and read whole, so a reader that sees every word's flag current has the whole command,
// whatever order the words reached it in. Words: source low and high, destination low
// and high, length; three spare.
struct alignas(64) Command {
    unsigned long long word[8];
};

// What the kernel saw of one command, in SM clock cycles: polls of the ring before it,
// cycles per poll, seen -> copied (the block's stores done), and the previous
// command's __threadfence_system.
struct Stats {
    unsigned long long polls, poll_cycles, copy_cycles, prev_fence_cycles;
};

// In pinned host memory, mapped into device 1.
struct Ring {
    Command slot[kSlots];
    Stats stats[kSlots];
    unsigned long long done;     // written by the kernel: commands finished
    unsigned long long exit_at;  // written by the kernel as it leaves: (commands consumed) + 1
    unsigned long long stop;     // written by the host: leave now
};

// How the copier tells the host a command is done.
enum Signal { SIGNAL_FENCE_SYS, SIGNAL_FENCE_GPU, SIGNAL_RELEASE_SYS };

// One block: warp 0 copies, warps 1.. poll the ring, each a word a lane, so that one read
// brings the whole command. A read of pinned host memory takes ~2 us to come back, so
// the pollers start STAGGER_NS apart: one of them reads again every STAGGER_NS. The
// poller that sees a command first claims it (a compare-and-swap in shared memory) and
// hands it to the copier through shared memory. The copier copies in 16-byte pieces where
// source, destination and length allow, else byte by byte, with loads that bypass the L1
// (__ldcv: the same source is read again after the peer rewrote it). Only the copier
// decides to leave, and it copies nothing after that: a command is either done or at or
// past exit_at.
__global__ void resident_copy(Ring *ring, unsigned long long next, unsigned long long idle_ns, unsigned stagger_ns,
                              int signal) {
    __shared__ unsigned long long cmd[8][3];        // src, dst, len of commands claimed, by number % 8
    __shared__ unsigned long long claimed;          // commands claimed by the pollers
    __shared__ volatile unsigned long long ready;   // commands handed to the copier
    __shared__ volatile unsigned long long copied;  // commands the copier finished
    __shared__ volatile int leave, stop_seen;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) {
        claimed = next;
        ready = next;
        copied = next;
        leave = 0;
        stop_seen = 0;
    }
    __syncthreads();
    if (warp > 0) {
        if (stagger_ns) __nanosleep(stagger_ns * (warp - 1));
        while (!leave) {
            const unsigned long long n = *(volatile unsigned long long *)&claimed;
            if (n - copied >= 8) continue;  // the copier is 8 behind
            const Command *s = &ring->slot[n % kSlots];
            const unsigned long long t0 = clock64();
            // Lane 5 reads the host's stop word in the same instruction.
            const unsigned long long w = lane < 5 ? resident_load(&s->word[lane]) : lane == 5 ? resident_load(&ring->stop) : 0;
            if (__shfl_sync(~0u, w, 5) && lane == 0) stop_seen = 1;
            const bool mine = lane >= 5 || static_cast<unsigned>(w >> 32) == static_cast<unsigned>(n + 1);
            const unsigned lo = static_cast<unsigned>(w);
            const unsigned long long src = __shfl_sync(~0u, lo, 0) | (unsigned long long)__shfl_sync(~0u, lo, 1) << 32;
            const unsigned long long dst = __shfl_sync(~0u, lo, 2) | (unsigned long long)__shfl_sync(~0u, lo, 3) << 32;
            const unsigned long long len = __shfl_sync(~0u, lo, 4);
            if (!__all_sync(~0u, mine)) continue;
            if (lane == 0 && atomicCAS(&claimed, n, n + 1) == n) {
                cmd[n % 8][0] = src;
                cmd[n % 8][1] = dst;
                cmd[n % 8][2] = len;
                ring->stats[n % kSlots].poll_cycles = clock64() - t0;
                __threadfence_block();
                while (ready != n) {
                }  // hand over in order
                ready = n + 1;
            }
            __syncwarp();
        }
        return;
    }
    unsigned long long last = resident_clock_ns(), fence_cycles = 0;
    for (;;) {
        unsigned long long polls = 0;
        while (ready == next) {
            ++polls;
            if ((polls & 63) == 0 && (stop_seen || resident_clock_ns() - last > idle_ns)) {
                if (lane == 0) leave = 1;
                break;
            }
        }
        if (__shfl_sync(~0u, leave, 0)) break;
        __threadfence_block();
        const unsigned long long t1 = clock64();
        const unsigned long long *c = cmd[next % 8];
        const char *src = reinterpret_cast<const char *>(c[0]);
        char *dst = reinterpret_cast<char *>(c[1]);
        const size_t len = c[2];
        if (((c[0] | c[1] | len) & 15) == 0) {
            const int4 *s4 = reinterpret_cast<const int4 *>(src);
            int4 *d4 = reinterpret_cast<int4 *>(dst);
            const size_t n = len / 16;
            size_t i = lane;
            for (; i + 96 < n; i += 128) {  // four loads in flight a lane
                const int4 a = __ldcv(s4 + i), b = __ldcv(s4 + i + 32), e = __ldcv(s4 + i + 64),
                           f = __ldcv(s4 + i + 96);
                d4[i] = a;
                d4[i + 32] = b;
                d4[i + 64] = e;
                d4[i + 96] = f;
            }
            for (; i < n; i += 32) d4[i] = __ldcv(s4 + i);
        } else {
            for (size_t i = lane; i < len; i += 32)
                dst[i] = static_cast<char>(__ldcv(reinterpret_cast<const signed char *>(src) + i));
        }
        __syncwarp();
        if (lane == 0) {
            const unsigned long long t2 = clock64();
            Stats *st = &ring->stats[next % kSlots];
            st->polls = polls;
            st->copy_cycles = t2 - t1;
            st->prev_fence_cycles = fence_cycles;
            if (signal == SIGNAL_RELEASE_SYS) {
                asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(&ring->done), "l"(next + 1) : "memory");
            } else {
                if (signal == SIGNAL_FENCE_SYS)
                    __threadfence_system();
                else
                    __threadfence();
                resident_store(&ring->done, next + 1);
            }
            fence_cycles = clock64() - t2;
            copied = next + 1;
        }
        __syncwarp();
        ++next;
        last = resident_clock_ns();
    }
    if (lane == 0) {
        __threadfence_system();
        resident_store(&ring->exit_at, next + 1);
    }
}

// The variants: CE, the resident kernel in several shapes, and COLD.
struct Variant {
    const char *name;
    int pollers;  // 0: the copy engine
    int signal;
    bool cold;
};
static const Variant kVariants[] = {
    {"ce", 0, 0, false},
    {"res-p1-sys", 1, SIGNAL_FENCE_SYS, false},
    {"res-p4-sys", 4, SIGNAL_FENCE_SYS, false},
    {"res-p8-sys", 8, SIGNAL_FENCE_SYS, false},
    {"res-p8-gpu", 8, SIGNAL_FENCE_GPU, false},
    {"res-p8-rel", 8, SIGNAL_RELEASE_SYS, false},
    {"cold-p4-rel", 4, SIGNAL_RELEASE_SYS, true},
};
constexpr int NVARIANTS = sizeof kVariants / sizeof kVariants[0];

struct Resident {
    Ring *ring;
    Ring *ring_dev;
    cudaStream_t stream;
    unsigned long long posted = 0;
    int running = -1;  // the variant whose kernel runs
};

static void post(Resident &r, const void *src, void *dst, size_t len) {
    volatile unsigned long long *w = r.ring->slot[r.posted % kSlots].word;
    const unsigned long long flag = static_cast<unsigned long long>(static_cast<unsigned>(r.posted + 1)) << 32;
    const unsigned long long s = reinterpret_cast<unsigned long long>(src),
                             d = reinterpret_cast<unsigned long long>(dst);
    w[0] = flag | (s & 0xffffffffu);
    w[1] = flag | (s >> 32);
    w[2] = flag | (d & 0xffffffffu);
    w[3] = flag | (d >> 32);
    w[4] = flag | len;
    ++r.posted;
}

static void wait_done(Resident &r) {
    volatile unsigned long long *done = &r.ring->done;
    while (*done < r.posted) {
    }
}

// The kernel starts at command NEXT.
static void launch(Resident &r, int v, unsigned long long next, unsigned long long idle_ns, unsigned stagger_ns) {
    r.ring->exit_at = 0;
    r.ring->stop = 0;
    int signal = kVariants[v].signal;
    void *args[] = {&r.ring_dev, &next, &idle_ns, &stagger_ns, &signal};
    CK(cudaLaunchKernel((const void *)resident_copy, dim3(1), dim3(32 * (1 + kVariants[v].pollers)), args, 0,
                        r.stream));
    r.running = v;
}

static void stop(Resident &r) {
    if (r.running < 0) return;
    reinterpret_cast<volatile unsigned long long &>(r.ring->stop) = 1;
    CK(cudaStreamSynchronize(r.stream));
    r.running = -1;
}

static void on_alarm(int) {
    static const char m[] = "proxy-copy: watchdog: no progress in 60 s\n";
    (void)!write(2, m, sizeof m - 1);
    _exit(3);
}

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(60);
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    std::string sizes_arg = argc > 2 ? argv[2] : "8,64,1024,4096,16384,65536";
    unsigned stagger_ns = argc > 3 ? (unsigned)atoi(argv[3]) : 250;
    std::vector<size_t> sizes;
    for (size_t p = 0; p < sizes_arg.size();) {
        size_t q = sizes_arg.find(',', p);
        if (q == std::string::npos) q = sizes_arg.size();
        sizes.push_back(strtoull(sizes_arg.substr(p, q - p).c_str(), nullptr, 0));
        p = q + 1;
    }
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    if (ndev < 2) {
        fprintf(stderr, "proxy-copy: needs two devices, found %d\n", ndev);
        return 2;
    }
    int can = 0;
    CK(cudaDeviceCanAccessPeer(&can, 1, 0));
    if (!can) {
        fprintf(stderr, "proxy-copy: device 1 cannot access device 0\n");
        return 2;
    }
    const size_t maxlen = *std::max_element(sizes.begin(), sizes.end());
    void *src, *dst;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&src, maxlen));
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&dst, maxlen));
    CK(cudaDeviceEnablePeerAccess(0, 0));
    int least, greatest;
    CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    Resident r;
    CK(cudaStreamCreateWithPriority(&r.stream, cudaStreamNonBlocking, greatest));
    CK(cudaHostAlloc(reinterpret_cast<void **>(&r.ring), sizeof(Ring), cudaHostAllocMapped | cudaHostAllocPortable));
    memset(r.ring, 0, sizeof(Ring));
    CK(cudaHostGetDevicePointer(reinterpret_cast<void **>(&r.ring_dev), r.ring, 0));
    // The copy engine's done word.
    unsigned long long *word;
    CK(cudaHostAlloc(reinterpret_cast<void **>(&word), 64, cudaHostAllocMapped | cudaHostAllocPortable));
    *word = 0;
    CUdeviceptr word_dev;
    CK(cudaHostGetDevicePointer(reinterpret_cast<void **>(&word_dev), word, 0));
    cudaStream_t ce;
    CK(cudaStreamCreateWithPriority(&ce, cudaStreamNonBlocking, greatest));
    unsigned long long ce_seq = 0;

    // Pinned, so that cudaMemcpy returns with the copy done (from pageable memory it may
    // return with the DMA still in flight, and the timed copy would read the old source).
    unsigned char *pattern, *back;
    CK(cudaHostAlloc(reinterpret_cast<void **>(&pattern), maxlen, cudaHostAllocPortable));
    CK(cudaHostAlloc(reinterpret_cast<void **>(&back), maxlen, cudaHostAllocPortable));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 1));
    printf("# proxy-copy: %s, %d iterations a variant, pollers %u ns apart; us from issue to seen done\n", prop.name,
           iters, stagger_ns);
    int khz = 0;
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 1));
    const double mhz = khz / 1000.0;
    printf("%-8s %-12s %9s %9s %9s %9s %6s   %s\n", "bytes", "variant", "median", "p10", "p90", "issue", "bad",
           "kernel medians: copier spins, us of the claiming read, copy us, signal us");
    unsigned long long bad = 0;
    for (size_t len : sizes) {
        std::vector<double> t[NVARIANTS], issue[NVARIANTS], k[NVARIANTS][4];
        unsigned long long wrong[NVARIANTS] = {};
        for (int it = -50; it < iters; ++it) {
            for (int v = 0; v < NVARIANTS; ++v) {
                const Variant &var = kVariants[v];
                // A resident variant keeps its kernel; the others must not have one running.
                const bool resident = var.pollers && !var.cold;
                if (r.running >= 0 && r.running != v) stop(r);
                if (resident && r.running < 0) launch(r, v, r.posted, 100ull * 1000 * 1000, stagger_ns);
                for (size_t i = 0; i < len; ++i) pattern[i] = (unsigned char)(i * 31 + it * 7 + v * 3 + len);
                CK(cudaSetDevice(0));
                CK(cudaMemcpy(src, pattern, len, cudaMemcpyHostToDevice));
                CK(cudaDeviceSynchronize());
                CK(cudaSetDevice(1));
                double t0 = now_us(), t1;
                if (!var.pollers) {
                    CK(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, ce));
                    CKD(cuStreamWriteValue64(reinterpret_cast<CUstream>(ce), word_dev, ++ce_seq,
                                             CU_STREAM_WRITE_VALUE_DEFAULT));
                    t1 = now_us();
                    volatile unsigned long long *w = word;
                    while (*w < ce_seq) {
                    }
                } else if (var.cold) {
                    post(r, src, dst, len);
                    launch(r, v, r.posted - 1, 20000, stagger_ns);
                    t1 = now_us();
                    wait_done(r);
                } else {
                    post(r, src, dst, len);
                    t1 = now_us();
                    wait_done(r);
                }
                const double t2 = now_us();
                if (var.cold) {
                    CK(cudaStreamSynchronize(r.stream));
                    r.running = -1;
                }
                if (it >= 0) {
                    t[v].push_back(t2 - t0);
                    issue[v].push_back(t1 - t0);
                    if (var.pollers) {
                        const Stats &st = r.ring->stats[(r.posted - 1) % kSlots];
                        k[v][0].push_back(st.polls);
                        k[v][1].push_back(st.poll_cycles / mhz);
                        k[v][2].push_back(st.copy_cycles / mhz);
                        k[v][3].push_back(st.prev_fence_cycles / mhz);
                    }
                }
                CK(cudaMemcpy(back, dst, len, cudaMemcpyDeviceToHost));
                if (memcmp(back, pattern, len)) ++wrong[v];
            }
        }
        for (int v = 0; v < NVARIANTS; ++v) {
            printf("%-8zu %-12s %9.2f %9.2f %9.2f %9.2f %6llu", len, kVariants[v].name, pct(t[v], 0.5), pct(t[v], 0.1),
                   pct(t[v], 0.9), pct(issue[v], 0.5), wrong[v]);
            if (kVariants[v].pollers)
                printf("   %.0f %.2f %.2f %.2f", pct(k[v][0], 0.5), pct(k[v][1], 0.5), pct(k[v][2], 0.5),
                       pct(k[v][3], 0.5));
            printf("\n");
            bad += wrong[v];
        }
        alarm(60);
    }
    stop(r);
    printf("# verify: %llu mismatched copies\n", bad);
    return bad ? 1 : 0;
}
