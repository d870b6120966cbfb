// How much slower is a host code path on its first call after it was left alone for a
// while? Times a fixed section (a register-only loop, pointer chases over 256 KiB and
// 32 MiB, ten getpid syscalls, cudaEventRecord, cudaStreamQuery) three times back to back,
// after busy and idle waits of 0, 1, 20 and 200 ms. On a machine whose caches nobody else
// touches, repeat 0 matches repeats 1-2; on the GPU machine (a KVM guest) it does not after
// 20 ms (bench/results/explore-2026-11-25-h100-s16.txt), which is why timed GPU tests keep
// their kernels short.
//
//   nvcc -O2 -o /tmp/cache-decay maint/diag/cache-decay.cu && /tmp/cache-decay
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <vector>

__global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
static double now() { timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3; }
struct Chase {
    std::vector<size_t> next; size_t p = 0;
    explicit Chase(size_t bytes) {
        size_t n = bytes / 64; next.assign(n * 8, 0);
        std::vector<size_t> perm(n); std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
        for (size_t i = 0; i < n; ++i) next[perm[i] * 8] = perm[(i + 1) % n] * 8;
    }
    size_t run(int steps) { size_t q = p; for (int i = 0; i < steps; ++i) q = next[q]; p = q; return q; }
};
volatile size_t sink;
int main() {
    cudaStream_t s, s2;  // s2 stays idle: the query asks about an empty stream
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    Chase small(256 << 10), big(32 << 20);
    spin<<<1, 1, 0, s>>>(1000); cudaStreamSynchronize(s);
    // Back-to-back repeats of the section after waits of different lengths (busy: polling
    // the clock; idle: usleep). Repeat 0 is the first section after the wait.
    const double waits_us[] = {0, 1000, 20000, 200000};
    for (int idle = 0; idle < 2; ++idle)
    for (double w : waits_us) {
        for (int tr = 0; tr < 4; ++tr) {
            if (idle) usleep((useconds_t)w); else { double end = now() + w; while (now() < end) {} }
            for (int rep = 0; rep < 3; ++rep) {
                double t0 = now();
                unsigned x = 1; for (int i = 0; i < 20000; ++i) x = x * 1664525u + 1013904223u; sink = x;
                double t1 = now(); sink = small.run(2000);
                double t2 = now(); sink = big.run(2000);
                double t3 = now(); for (int i = 0; i < 10; ++i) syscall(SYS_getpid);
                double t4 = now(); cudaEventRecord(ev, s);
                double t5 = now(); cudaStreamQuery(s2);
                double t6 = now();
                printf("%s wait %6.0f us trial %d rep %d: reg %.1f small %.1f big %.1f sys %.1f evrec %.1f query %.1f\n",
                       idle ? "idle" : "busy", w, tr, rep, t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5);
            }
        }
    }
    return 0;
}
