/* Whether wrapping live shared memory in a CL_MEM_USE_HOST_PTR buffer can write old bytes
 * back into it, for the GPU machine. A cl_mem receiver in SHARED mode wraps each segment
 * of a peer's staging pool the first time a notice names it, while the peer may still be
 * copying chunks into other slots of that segment. If the implementation takes a copy of
 * the host memory when the buffer is made and writes it back when the buffer is mapped
 * for reading (as a USE_HOST_PTR cache may), the peer's newer bytes are lost.
 *
 *   gcc -O2 -pthread -o /tmp/ocl-wrap-writeback maint/diag/ocl-wrap-writeback.c -lOpenCL
 *   /tmp/ocl-wrap-writeback [BYTES]          (default 64 MiB; NVIDIA's platform, else the first)
 *
 * Each case: fresh memfd shared memory filled with 0x11, the USE_HOST_PTR buffer made,
 * the memory rewritten with 0x22 (the peer's later copy), then the case's step; it counts
 * the bytes no longer 0x22. Then 2 MiB host-to-device writes out of the memory (0x33 by
 * now), best of 5, checked on the device: whether the range still goes at pinned speed.
 *
 * Then the race as it happens between ranks: a fresh 4 MiB segment (posix_fallocate'd,
 * never touched) mapped twice, as the sender and the receiver each map it; a thread
 * writes it once through the first mapping (the sender's copy of a chunk, first touch)
 * while the wrap is made over the second, started 0-1000 us apart; then every word is
 * checked. 200 trials per way of wrapping (the race itself: first_write_race.h, which
 * cuda-register-race.c shares). */
#include "first_write_race.h"
#include "ocl_check.h"

enum { CHUNK = 2 << 20 };
static cl_context ctx;
static cl_command_queue q;
static cl_mem dev;
static size_t total;

static char *shared_region(void) {
    int fd = fresh_memfd(total, "wrap-writeback");
    char *p = map_shared(fd, total);
    close(fd);
    return p;
}

static size_t count_not(const char *p, size_t n, char want) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += p[i] != want;
    return bad;
}

/* 2 MiB writes to the device out of `host` (0x33), best of 5, and whether they arrived. */
static void h2d_rate(const char *name, char *host) {
    memset(host, 0x33, total);
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_us();
        for (size_t o = 0; o + CHUNK <= total; o += CHUNK)
            CL_CHECK(clEnqueueWriteBuffer(q, dev, CL_FALSE, o, CHUNK, host + o, 0, NULL, NULL));
        CL_CHECK(clFinish(q));
        double t = (now_us() - t0) * 1e-6;
        if (t < best) best = t;
    }
    char *back = malloc(total);
    CL_CHECK(clEnqueueReadBuffer(q, dev, CL_TRUE, 0, total, back, 0, NULL, NULL));
    size_t wrong = count_not(back, total, 0x33);
    free(back);
    printf("%-34s H2D %6.2f GB/s, %zu bytes wrong on the device\n", name, total / best / 1e9, wrong);
}

enum Step { NONE, MAP_RW, MAP_READ, MAP_WRITE, MAP_INVALIDATE, RELEASE };
static const char *step_name[] = {
    "made, not mapped",   "mapped READ|WRITE", "mapped READ", "mapped WRITE", "mapped WRITE_INVALIDATE_REGION",
    "made, then released"};

static void one_case(enum Step step) {
    char *host = shared_region();
    memset(host, 0x11, total);
    cl_int err;
    cl_mem wrap = clCreateBuffer(ctx, CL_MEM_USE_HOST_PTR | CL_MEM_READ_WRITE, total, host, &err);
    CL_CHECK(err);
    memset(host, 0x22, total); /* the peer's copy into its slots, after the wrap was made */
    void *mapped = NULL;
    cl_map_flags flags = step == MAP_RW           ? CL_MAP_READ | CL_MAP_WRITE
                         : step == MAP_READ       ? CL_MAP_READ
                         : step == MAP_WRITE      ? CL_MAP_WRITE
                         : step == MAP_INVALIDATE ? CL_MAP_WRITE_INVALIDATE_REGION
                                                  : 0;
    if (flags) {
        mapped = clEnqueueMapBuffer(q, wrap, CL_TRUE, flags, 0, total, 0, NULL, NULL, &err);
        CL_CHECK(err);
    }
    if (step == RELEASE) {
        CL_CHECK(clReleaseMemObject(wrap));
        CL_CHECK(clFinish(q));
        wrap = NULL;
    }
    size_t lost = count_not(host, total, 0x22);
    printf("%-34s %zu of %zu later bytes lost%s\n", step_name[step], lost, total,
           mapped && mapped != host ? " (mapped away from the memory)" : "");
    char label[64];
    snprintf(label, sizeof label, "  then, %s", step == RELEASE ? "no wrap" : "wrap kept");
    h2d_rate(label, host);
    if (wrap) {
        if (mapped) CL_CHECK(clEnqueueUnmapMemObject(q, wrap, mapped, 0, NULL, NULL));
        CL_CHECK(clFinish(q));
        size_t after = count_not(host, total, 0x33);
        CL_CHECK(clReleaseMemObject(wrap));
        CL_CHECK(clFinish(q));
        printf("  unmapped and released: %zu bytes changed, %zu after the release\n", after,
               count_not(host, total, 0x33));
    }
    munmap(host, total);
}

/* ------------------------------------------------------------------ the race */

enum { RACE_BYTES = 4 << 20, TRIALS = 200 };

static void race(enum Step step) {
    long lost_trials = 0, lost_bytes = 0;
    size_t first_lost = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        RaceSegment segment;
        RaceWriter writer;
        race_begin(&segment, &writer, RACE_BYTES, trial);
        cl_int err;
        cl_mem wrap = clCreateBuffer(ctx, CL_MEM_USE_HOST_PTR | CL_MEM_READ_WRITE, RACE_BYTES, segment.receiver, &err);
        CL_CHECK(err);
        void *mapped = NULL;
        if (step == MAP_RW || step == MAP_INVALIDATE) {
            mapped = clEnqueueMapBuffer(q, wrap, CL_TRUE,
                                        step == MAP_RW ? CL_MAP_READ | CL_MAP_WRITE : CL_MAP_WRITE_INVALIDATE_REGION, 0,
                                        RACE_BYTES, 0, NULL, NULL, &err);
            CL_CHECK(err);
        }
        size_t first = 0;
        const size_t lost = race_writer_join(&writer, &first);
        if (lost && !lost_bytes) first_lost = first * 8;
        lost_trials += lost != 0;
        lost_bytes += (long)lost * 8;
        if (mapped) CL_CHECK(clEnqueueUnmapMemObject(q, wrap, mapped, 0, NULL, NULL));
        CL_CHECK(clFinish(q));
        CL_CHECK(clReleaseMemObject(wrap));
        race_segment_free(&segment);
    }
    printf("race, wrap %-30s %ld of %d trials lost bytes (%ld in all", step_name[step], lost_trials, TRIALS,
           lost_bytes);
    if (lost_bytes) printf("; the first trial's first at byte %zu", first_lost);
    printf(")\n");
}

int main(int argc, char **argv) {
    total = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)64 << 20;
    char pname[256];
    cl_platform_id plat = ocl_platform_named("NVIDIA", pname, sizeof pname);
    if (!plat) {  // the first platform, named in pname
        cl_uint np = 0;
        CL_CHECK(clGetPlatformIDs(1, &plat, &np));
    }
    ocl_open(plat, CL_DEVICE_TYPE_ALL, total, &ctx, &q, &dev);
    printf("platform \"%s\", %zu bytes of memfd shared memory per case\n", pname, total);
    char *plain = shared_region();
    h2d_rate("no wrap (pageable rate)", plain);
    munmap(plain, total);
    for (int s = NONE; s <= RELEASE; s++) one_case((enum Step)s);
    race(MAP_RW);
    race(NONE);
    race(MAP_INVALIDATE);
    return 0;
}
