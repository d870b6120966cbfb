/* Host-memory load from a GPU's copy engines, for the GPU machine: does MPICH's own
 * host-to-host bandwidth fall when DMA runs beside it? A staged transfer between two
 * ranks of one host moves its bytes through host memory three or four times (device to
 * pinned, MPICH's two copies through shared memory, pinned to device) where MPICH alone
 * moves them twice, so a pipeline held to 90% of MPICH host-to-host bandwidth on one
 * host is held to MPICH's share of a memory system that the DMA also uses.
 *
 *   gcc -O2 -I/usr/local/cuda/include -o /tmp/dma-load maint/diag/dma-load.c \
 *       -L/usr/local/cuda/lib64 -lcudart
 *   /tmp/dma-load SECONDS GBPS [CHUNK_BYTES] [d2h|h2d|both]
 *
 * Copies CHUNK_BYTES (default 2 MiB, the pipeline's packet size) between a pinned host
 * buffer and device memory on device 0, paced to GBPS (1e9 B/s; 0 = as fast as the
 * copy engines go), for SECONDS, then prints the rate it reached. "both" alternates the
 * two directions, as a staged device-to-device transfer does. SIGTERM or SIGINT ends
 * it early, still printing the rate. */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop = 0;
static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

#define CHECK(call)                                                               \
    do {                                                                          \
        cudaError_t e_ = (call);                                                  \
        if (e_ != cudaSuccess) {                                                  \
            fprintf(stderr, "dma-load: %s: %s\n", #call, cudaGetErrorString(e_)); \
            return 1;                                                             \
        }                                                                         \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SECONDS GBPS [CHUNK_BYTES] [d2h|h2d|both]\n", argv[0]);
        return 2;
    }
    const double seconds = atof(argv[1]), gbps = atof(argv[2]);
    const size_t chunk = argc > 3 ? strtoull(argv[3], NULL, 0) : 2u << 20;
    const char *dir = argc > 4 ? argv[4] : "both";
    const int d2h = strcmp(dir, "h2d") != 0, h2d = strcmp(dir, "d2h") != 0;
    void *host, *dev;
    cudaStream_t s;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMallocHost(&host, chunk));
    CHECK(cudaMalloc(&dev, chunk));
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    memset(host, 1, chunk);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    const double t0 = now_s();
    double moved = 0;
    for (unsigned long i = 0;; ++i) {
        const double t = now_s() - t0;
        if (t >= seconds || stop) break;
        /* Paced: a copy starts only once the rate so far has fallen to the target. */
        if (gbps > 0 && moved > gbps * 1e9 * t) continue;
        const int up = (d2h && h2d) ? (int)(i & 1) : h2d;
        if (up)
            CHECK(cudaMemcpyAsync(dev, host, chunk, cudaMemcpyHostToDevice, s));
        else
            CHECK(cudaMemcpyAsync(host, dev, chunk, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        moved += chunk;
    }
    const double t = now_s() - t0;
    printf("dma-load: %s %zu B chunks, %.2f GB/s over %.1f s (target %s)\n", dir, chunk, moved / t / 1e9, t,
           gbps > 0 ? argv[2] : "none");
    return 0;
}
