/* How fast a host-to-device copy reads pinned memory that the CPU has just written, for
 * the GPU machine. A pipeline receiver's staging slot is written by MPICH's copy out of
 * shared memory and then read by a host-to-device DMA; chunk traces (MPIACC_VERBOSE=3)
 * showed those 2 MiB copies taking about 400 us on the H200 machine, where a pinned
 * host-to-device copy runs at 55 GB/s (38 us).
 *
 *   gcc -O2 -I/usr/local/cuda/include -o /tmp/h2d-after-write maint/diag/h2d-after-write.c \
 *       -L/usr/local/cuda/lib64 -lcudart
 *   /tmp/h2d-after-write [CHUNK_BYTES] [ITERS]
 *
 * For cached and write-combined pinned memory (cudaHostAllocWriteCombined) it times, per
 * chunk: the CPU's memcpy into the buffer; the host-to-device copy alone (buffer not
 * written since the last copy); the copy right after a memcpy into the buffer; and the
 * two overlapped, a memcpy into one buffer while another goes to the device, with 2, 4, 8
 * and 16 buffers taken in turn (a pipeline's staging slots: with more of them, a slot's
 * lines have left the writer's own caches by the time its copy reads them). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * t.tv_sec + 1e-3 * t.tv_nsec;
}

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "h2d-after-write: %s: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static void run(const char *name, unsigned flags, size_t chunk, int iters, const char *src, void *dev, cudaStream_t s) {
    enum { MAX_RING = 16 };
    char *buf[MAX_RING];
    for (int b = 0; b < MAX_RING; ++b) {
        CHECK(cudaHostAlloc((void **)&buf[b], chunk, flags));
        memset(buf[b], 0, chunk);
    }
    double t_write = 0, t_copy_clean = 0, t_copy_dirty = 0, t0;
    for (int i = 0; i < iters; ++i) {
        t0 = now_us();
        CHECK(cudaMemcpyAsync(dev, buf[0], chunk, cudaMemcpyHostToDevice, s));
        CHECK(cudaStreamSynchronize(s));
        t_copy_clean += now_us() - t0;
        t0 = now_us();
        memcpy(buf[0], src, chunk);
        t_write += now_us() - t0;
        t0 = now_us();
        CHECK(cudaMemcpyAsync(dev, buf[0], chunk, cudaMemcpyHostToDevice, s));
        CHECK(cudaStreamSynchronize(s));
        t_copy_dirty += now_us() - t0;
    }
    const double gb = chunk / 1e3; /* bytes per us = GB/s * 1e3 */
    printf(
        "%-15s memcpy in %7.1f us (%5.1f GB/s)  h2d clean %7.1f us (%5.1f GB/s)  h2d after memcpy %7.1f us "
        "(%5.1f GB/s)\n",
        name, t_write / iters, gb / (t_write / iters), t_copy_clean / iters, gb / (t_copy_clean / iters),
        t_copy_dirty / iters, gb / (t_copy_dirty / iters));
    /* Overlapped: write the next buffer of the ring while the current one goes to the
     * device. */
    for (int ring = 2; ring <= MAX_RING; ring *= 2) {
        memcpy(buf[0], src, chunk);
        t0 = now_us();
        for (int i = 0; i < iters; ++i) {
            CHECK(cudaMemcpyAsync(dev, buf[i % ring], chunk, cudaMemcpyHostToDevice, s));
            memcpy(buf[(i + 1) % ring], src, chunk);
            CHECK(cudaStreamSynchronize(s));
        }
        const double t = (now_us() - t0) / iters;
        t0 = now_us();
        for (int i = 0; i < iters; ++i) memcpy(buf[(i + 1) % ring], src, chunk);
        const double w = (now_us() - t0) / iters;
        printf("%-15s   ring of %2d: memcpy alone %7.1f us, overlapped with h2d %7.1f us per chunk (%5.1f GB/s)\n",
               name, ring, w, t, gb / t);
    }
    for (int b = 0; b < MAX_RING; ++b) CHECK(cudaFreeHost(buf[b]));
}

int main(int argc, char **argv) {
    const size_t chunk = argc > 1 ? strtoull(argv[1], NULL, 0) : 2u << 20;
    const int iters = argc > 2 ? atoi(argv[2]) : 200;
    char *src = malloc(chunk);
    void *dev;
    cudaStream_t s;
    memset(src, 7, chunk);
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&dev, chunk));
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int rep = 0; rep < 2; ++rep) {
        run("cached", cudaHostAllocDefault, chunk, iters, src, dev, s);
        run("write-combined", cudaHostAllocWriteCombined, chunk, iters, src, dev, s);
    }
    return 0;
}
