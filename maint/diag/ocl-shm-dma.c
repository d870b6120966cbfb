/* Whether NVIDIA's OpenCL moves data between a GPU and host memory shared between
 * processes (memfd, MAP_SHARED) as fast as into its own pinned buffers, for the GPU
 * machine. A pipeline between two ranks of one node could then skip the CPU copy that
 * MPICH's transport makes (the receiver's H2D reading the sender's staging slot), but
 * only if the driver DMAs to and from such memory: OpenCL has no call that pins it.
 *
 *   gcc -O2 -I/usr/local/cuda/include -o /tmp/ocl-shm-dma maint/diag/ocl-shm-dma.c \
 *       -lOpenCL -L/usr/local/cuda/lib64/stubs -lcuda
 *   /tmp/ocl-shm-dma [CHUNK_BYTES] [TOTAL_BYTES]
 *
 * Per host memory kind it enqueues TOTAL/CHUNK reads (D2H) then writes (H2D) of CHUNK
 * bytes, waits once, best of 5, and checks the bytes. Kinds: the pinned baseline (a
 * mapped CL_MEM_ALLOC_HOST_PTR buffer), malloc, shared memory as it is, shared memory
 * after cuMemHostRegister(PORTABLE) in this process (pinned for every CUDA context: does
 * NVIDIA's OpenCL, built on the same driver, see it?), and a CL_MEM_USE_HOST_PTR buffer
 * over shared memory reached by clEnqueueCopyBuffer plus a map. */
#define _GNU_SOURCE
#include "ocl_check.h"

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static cl_context ctx;
static cl_command_queue q;
static cl_mem dev;
static size_t chunk, total;

static void fill(char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (char)(seed + i * 131u + (i >> 12));
}

static int same(const char *a, const char *b, size_t n) { return memcmp(a, b, n) == 0; }

/* D2H then H2D through `host` by clEnqueueRead/WriteBuffer, in chunks. */
static void by_rw(const char *name, char *host) {
    char *ref = malloc(total), *back = malloc(total);
    fill(ref, total, 7);
    CL_CHECK(clEnqueueWriteBuffer(q, dev, CL_TRUE, 0, total, ref, 0, NULL, NULL));
    double best_r = 1e9, best_w = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        memset(host, 0, total);
        double t0 = now_s();
        for (size_t o = 0; o < total; o += chunk)
            CL_CHECK(clEnqueueReadBuffer(q, dev, CL_FALSE, o, chunk, host + o, 0, NULL, NULL));
        CL_CHECK(clFinish(q));
        double t1 = now_s();
        if (t1 - t0 < best_r) best_r = t1 - t0;
        int ok_r = same(host, ref, total);
        fill(host, total, 11 + rep);
        t0 = now_s();
        for (size_t o = 0; o < total; o += chunk)
            CL_CHECK(clEnqueueWriteBuffer(q, dev, CL_FALSE, o, chunk, host + o, 0, NULL, NULL));
        CL_CHECK(clFinish(q));
        t1 = now_s();
        if (t1 - t0 < best_w) best_w = t1 - t0;
        CL_CHECK(clEnqueueReadBuffer(q, dev, CL_TRUE, 0, total, back, 0, NULL, NULL));
        int ok_w = same(back, host, total);
        if (!ok_r || !ok_w) printf("%-28s rep %d: bytes WRONG (read %d write %d)\n", name, rep, ok_r, ok_w);
        CL_CHECK(clEnqueueWriteBuffer(q, dev, CL_TRUE, 0, total, ref, 0, NULL, NULL));
    }
    printf("%-28s D2H %6.2f GB/s  H2D %6.2f GB/s\n", name, total / best_r / 1e9, total / best_w / 1e9);
    free(ref);
    free(back);
}

/* D2H and H2D through a CL_MEM_USE_HOST_PTR buffer over `host`: copy, then map so the
 * bytes are in `host` (or were taken from it). */
static void by_use_host_ptr(const char *name, char *host) {
    cl_int err;
    cl_mem uhp = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, total, host, &err);
    CL_CHECK(err);
    char *ref = malloc(total), *back = malloc(total);
    fill(ref, total, 5);
    CL_CHECK(clEnqueueWriteBuffer(q, dev, CL_TRUE, 0, total, ref, 0, NULL, NULL));
    double best_r = 1e9, best_w = 1e9;
    int ok = 1;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (size_t o = 0; o < total; o += chunk) {
            CL_CHECK(clEnqueueCopyBuffer(q, dev, uhp, o, o, chunk, 0, NULL, NULL));
            void *m = clEnqueueMapBuffer(q, uhp, CL_FALSE, CL_MAP_READ, o, chunk, 0, NULL, NULL, &err);
            CL_CHECK(err);
            CL_CHECK(clEnqueueUnmapMemObject(q, uhp, m, 0, NULL, NULL));
        }
        CL_CHECK(clFinish(q));
        double t1 = now_s();
        if (t1 - t0 < best_r) best_r = t1 - t0;
        ok &= same(host, ref, total);
        fill(host, total, 13 + rep);
        t0 = now_s();
        for (size_t o = 0; o < total; o += chunk) {
            void *m = clEnqueueMapBuffer(q, uhp, CL_FALSE, CL_MAP_WRITE, o, chunk, 0, NULL, NULL, &err);
            CL_CHECK(err);
            CL_CHECK(clEnqueueUnmapMemObject(q, uhp, m, 0, NULL, NULL));
            CL_CHECK(clEnqueueCopyBuffer(q, uhp, dev, o, o, chunk, 0, NULL, NULL));
        }
        CL_CHECK(clFinish(q));
        t1 = now_s();
        if (t1 - t0 < best_w) best_w = t1 - t0;
        CL_CHECK(clEnqueueReadBuffer(q, dev, CL_TRUE, 0, total, back, 0, NULL, NULL));
        ok &= same(back, host, total);
        CL_CHECK(clEnqueueWriteBuffer(q, dev, CL_TRUE, 0, total, ref, 0, NULL, NULL));
    }
    printf("%-28s D2H %6.2f GB/s  H2D %6.2f GB/s  bytes %s\n", name, total / best_r / 1e9, total / best_w / 1e9,
           ok ? "ok" : "WRONG");
    clReleaseMemObject(uhp);
    free(ref);
    free(back);
}

static char *shared_region(const char *tag) {
    int fd = memfd_create(tag, 0);
    if (fd < 0 || ftruncate(fd, (off_t)total) != 0) {
        perror("memfd");
        exit(1);
    }
    char *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    memset(p, 0, total);  // fault the pages in
    close(fd);
    return p;
}

int main(int argc, char **argv) {
    chunk = argc > 1 ? strtoul(argv[1], NULL, 0) : (2u << 20);
    total = argc > 2 ? strtoul(argv[2], NULL, 0) : (64u << 20);
    char pname[256];
    cl_platform_id plat = ocl_platform_named("NVIDIA", pname, sizeof pname);
    if (!plat) {
        fprintf(stderr, "ocl-shm-dma: no NVIDIA OpenCL platform\n");
        return 1;
    }
    ocl_open(plat, CL_DEVICE_TYPE_GPU, total, &ctx, &q, &dev);
    cl_int err;
    printf("chunk %zu bytes, total %zu bytes, one queue, best of 5\n", chunk, total);

    cl_mem pinned = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, total, NULL, &err);
    CL_CHECK(err);
    char *pp = clEnqueueMapBuffer(q, pinned, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, total, 0, NULL, NULL, &err);
    CL_CHECK(err);
    by_rw("ALLOC_HOST_PTR (mapped)", pp);

    char *m = malloc(total);
    memset(m, 0, total);
    by_rw("malloc", m);

    char *s1 = shared_region("plain");
    by_rw("shared memory", s1);

    char *s2 = shared_region("registered");
    CUdevice cd;
    CUcontext cc;
    CUresult cr = cuInit(0);
    if (cr == CUDA_SUCCESS) cr = cuDeviceGet(&cd, 0);
    if (cr == CUDA_SUCCESS) cr = cuDevicePrimaryCtxRetain(&cc, cd);
    if (cr == CUDA_SUCCESS) cr = cuCtxSetCurrent(cc);
    if (cr == CUDA_SUCCESS) cr = cuMemHostRegister(s2, total, CU_MEMHOSTREGISTER_PORTABLE);
    if (cr != CUDA_SUCCESS)
        printf("shared memory, cuMemHostRegister: failed (%d)\n", (int)cr);
    else
        by_rw("shared memory, cuMemHostReg", s2);

    char *s3 = shared_region("usehostptr");
    by_use_host_ptr("shared memory, USE_HOST_PTR", s3);
    char *s4 = shared_region("usehostptr2");
    by_rw("shared memory (2nd, fresh)", s4);

    /* Read/WriteBuffer with the host pointer inside a USE_HOST_PTR buffer's region: does
     * the driver take the range as pinned while that buffer exists, and while it is
     * mapped (the spec lets a mapped pointer be the host pointer of a read or write)? */
    cl_mem over = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, total, s4, &err);
    CL_CHECK(err);
    by_rw("shm, USE_HOST_PTR over it", s4);
    char *mp = clEnqueueMapBuffer(q, over, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, total, 0, NULL, NULL, &err);
    CL_CHECK(err);
    printf("(mapped pointer %s the region)\n", mp == s4 ? "is" : "is NOT");
    by_rw("shm, USE_HOST_PTR mapped", mp);
    CL_CHECK(clEnqueueUnmapMemObject(q, over, mp, 0, NULL, NULL));
    CL_CHECK(clFinish(q));
    return 0;
}
