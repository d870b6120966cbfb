/* Stream and event semantics (BRIEF S1-S3, DESIGN 2.1 and 2.6). A kernel compiled at
 * run time with NVRTC (no nvcc needed to build the test) spins for 200 ms and then writes
 * a pattern into the send buffer, on the user's stream; MPI-ACC must return from
 * MPI_Isend at once, order the transfer after the kernel, keep message order, honour a
 * datatype freed right after the call, and keep driving a pending device transfer while
 * the rank blocks in another MPI call.
 *
 * The kernels are loaded with cudaLibraryLoadData and launched with cudaLaunchKernel
 * (CUDA 12+): a cubin for the device's sm_XY, else PTX. cuda_stream_pipeline builds the
 * same cases with MPIACC_IPC=0 (the staged pipeline, where the sender itself waits for
 * the dependency).
 * MPIACC-TEST-RANKS: 2 */
#include <nvrtc.h>

#include "gpu_util.h"

#define W MPI_COMM_WORLD
#define SPIN_NS 200000000ull       /* 200 ms */
#define ISEND_LIMIT_S 50e-6        /* MPI_Isend with a pending dependency returns within this */
/* The kernel behind a timed MPI_Isend: 200 times the limit, so an MPI_Isend that waited for
 * it cannot pass, yet short enough that the send path is still in the CPU's caches when the
 * next trial begins. On the GPU machine (a KVM guest) a code path left alone for long runs
 * many times slower on its next call, busy-polling in between or not, so behind 200 ms
 * kernels the trials after the first measured that, not MPI_Isend (docs/performance.md,
 * 'Timing MPI_Isend behind a kernel'). */
#define TIMED_SPIN_NS 10000000ull  /* 10 ms */
/* Before each timed trial the receiver says it is ready (an empty host message) once it
 * has checked the previous message and set up the next buffer. Without this the timed
 * MPI_Isend ran while the other rank, on the same host, downloaded and checked the
 * previous 64 MiB twice and freed it, and every call inside MPI_Isend ran several times
 * slower. That check takes tens of ms at 64 MiB, and the send path goes cold while the
 * sender waits for it, so after "ready" comes an untimed MPI_Isend of this many bytes,
 * same buffer and type, as in an application that sends in a loop, and only then the
 * timed one: with the untimed send before the wait instead, the bound failed now and then
 * (same section of docs/performance.md). */
#define WARM_BYTES 4096
#define STALE 0xee                 /* what a send buffer holds before the kernel writes it */

/* ------------------------------------------------------------------ run-time kernels */

static const char *kernel_source =
    "extern \"C\" __global__ void mt_spin(unsigned long long ns, long long max_cycles) {\n"
    "    unsigned long long t0, t;\n"
    "    long long c0 = clock64();\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "    do {\n"
    "        asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
    "    } while (t - t0 < ns && clock64() - c0 < max_cycles);\n"
    "}\n"
    "/* mt_byte() of test/mpi/mpitest.h */\n"
    "extern \"C\" __global__ void mt_fill(unsigned char *p, unsigned long long n, unsigned long long seed) {\n"
    "    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;\n"
    "         i += (unsigned long long)gridDim.x * blockDim.x) {\n"
    "        unsigned long long x = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;\n"
    "        x ^= x >> 31;\n"
    "        x *= 0x94D049BB133111EBull;\n"
    "        x ^= x >> 29;\n"
    "        p[i] = (unsigned char)x;\n"
    "    }\n"
    "}\n";

static cudaLibrary_t k_lib;
static cudaKernel_t k_spin, k_fill;
static int kernels_ok; /* on every rank */
static char kernels_why[2048];
static char kernels_how[128];

/* Compiles with NVRTC for `arch`; returns the image (cubin or PTX) or NULL with *why. */
static char *nvrtc_build(const char *arch, int cubin, char *why, size_t whylen) {
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, kernel_source, "mpiacc_test_kernels.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        snprintf(why, whylen, "nvrtcCreateProgram: %s", nvrtcGetErrorString(r));
        return NULL;
    }
    char opt[64];
    snprintf(opt, sizeof opt, "--gpu-architecture=%s", arch);
    const char *opts[] = {opt};
    r = nvrtcCompileProgram(prog, 1, opts);
    char *image = NULL;
    if (r != NVRTC_SUCCESS) {
        size_t loglen = 0;
        char log[1024] = "";
        if (nvrtcGetProgramLogSize(prog, &loglen) == NVRTC_SUCCESS && loglen > 1 && loglen < sizeof log)
            nvrtcGetProgramLog(prog, log);
        snprintf(why, whylen, "nvrtcCompileProgram(%s): %s %s", opt, nvrtcGetErrorString(r), log);
    } else {
        size_t n = 0;
        r = cubin ? nvrtcGetCUBINSize(prog, &n) : nvrtcGetPTXSize(prog, &n);
        if (r == NVRTC_SUCCESS && n > 0 && (image = malloc(n)) != NULL) {
            r = cubin ? nvrtcGetCUBIN(prog, image) : nvrtcGetPTX(prog, image);
            if (r != NVRTC_SUCCESS) {
                free(image);
                image = NULL;
            }
        }
        if (!image)
            snprintf(why, whylen, "nvrtcGet%s(%s): %s", cubin ? "CUBIN" : "PTX", opt,
                     r == NVRTC_SUCCESS ? "empty" : nvrtcGetErrorString(r));
    }
    nvrtcDestroyProgram(&prog);
    return image;
}

/* Both kernels for this rank's device, or kernels_why. */
static int kernels_load(void) {
    int major = 0, minor = 0;
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, gpu_dev));
    CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, gpu_dev));
    char sm[32], compute[32], why1[900] = "", why2[900] = "";
    snprintf(sm, sizeof sm, "sm_%d%d", major, minor);
    snprintf(compute, sizeof compute, "compute_%d%d", major, minor);
    /* a cubin needs no JIT in the driver; PTX is the fallback for archs NVRTC cannot
     * emit machine code for */
    const char *how = sm;
    char *image = nvrtc_build(sm, 1, why1, sizeof why1);
    if (!image) {
        how = compute;
        image = nvrtc_build(compute, 0, why2, sizeof why2);
    }
    if (!image) {
        snprintf(kernels_why, sizeof kernels_why, "%s; %s", why1, why2);
        return 0;
    }
    cudaError_t e = cudaLibraryLoadData(&k_lib, image, NULL, NULL, 0, NULL, NULL, 0);
    free(image);
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&k_spin, k_lib, "mt_spin");
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&k_fill, k_lib, "mt_fill");
    if (e != cudaSuccess) {
        snprintf(kernels_why, sizeof kernels_why, "loading the %s image: %s (%s)", how, cudaGetErrorName(e),
                 cudaGetErrorString(e));
        (void)cudaGetLastError();
        return 0;
    }
    snprintf(kernels_how, sizeof kernels_how, "%s via NVRTC, %s", how, how == sm ? "cubin" : "PTX");
    return 1;
}

static void launch_spin(cudaStream_t s, unsigned long long ns) {
    long long max_cycles = 60000000000ll; /* ~30 s at 2 GHz: ends even if globaltimer stalls */
    void *args[] = {&ns, &max_cycles};
    dim3 grid = {1, 1, 1}, block = {1, 1, 1};
    CK(cudaLaunchKernel((const void *)k_spin, grid, block, args, 0, s));
}

static void launch_fill(cudaStream_t s, void *p, size_t n, uint64_t seed) {
    unsigned long long nn = n, sd = seed;
    void *args[] = {&p, &nn, &sd};
    size_t blocks = (n + 255) / 256;
    if (blocks < 1) blocks = 1;
    if (blocks > 4096) blocks = 4096;
    dim3 grid = {(unsigned)blocks, 1, 1}, block = {256, 1, 1};
    CK(cudaLaunchKernel((const void *)k_fill, grid, block, args, 0, s));
}

/* The stream or event is still busy (cudaErrorNotReady is no error: clear it). */
static int still_running(cudaError_t q, const char *what) {
    if (q != cudaSuccess && q != cudaErrorNotReady)
        gpu_die(__FILE__, __LINE__, "%s: %s (%s)", what, cudaGetErrorName(q), cudaGetErrorString(q));
    cudaError_t last = cudaGetLastError();
    if (last != cudaSuccess && last != cudaErrorNotReady)
        gpu_die(__FILE__, __LINE__, "%s: pending CUDA error %s", what, cudaGetErrorName(last));
    return q == cudaErrorNotReady;
}

/* The device bytes are mt_fill(seed). */
static void check_seed(const void *dev, size_t n, uint64_t seed, const char *what) {
    const unsigned char *got = gpu_download(dev, n);
    size_t bad = mt_verify(got, n, seed);
    MT_CHECK(bad == (size_t)-1, "%s: first wrong byte at %zu of %zu (0x%02x%s)", what, bad, n,
             bad == (size_t)-1 ? 0 : got[bad], bad != (size_t)-1 && got[bad] == STALE ? ", the stale value" : "");
}

/* A device buffer for one message of n bytes, guard included, all sentinel. */
static unsigned char *recv_buffer(size_t n) {
    unsigned char *d = gpu_malloc(n + GPU_GUARD);
    gpu_memset(d, GPU_SENTINEL, n + GPU_GUARD);
    return d;
}

/* The receiving side of one message into d from recv_buffer(n), checked against seed;
 * frees d. */
static void recv_seeded_into(unsigned char *d, size_t n, int src, int tag, uint64_t seed, const char *what) {
    MPI_Status st;
    MCK(MPI_Recv(d, (int)n, MPI_CHAR, src, tag, W, &st));
    GPU_CHECK_STATUS(st, src, tag, n, "%s", what);
    check_seed(d, n, seed, what);
    const unsigned char *got = gpu_download(d, n + GPU_GUARD);
    GPU_CHECK_UNTOUCHED(got + n, GPU_GUARD, GPU_SENTINEL, "%s: past the message", what);
    CK(cudaFree(d));
}

/* The receiving side of one message: a device buffer of n bytes, checked against seed. */
static void recv_seeded(size_t n, int src, int tag, uint64_t seed, const char *what) {
    recv_seeded_into(recv_buffer(n), n, src, tag, seed, what);
}

/* A message of n bytes that must hold STALE throughout (a send before the kernel wrote). */
static void recv_stale(size_t n, int src, int tag, const char *what) {
    unsigned char *d = gpu_malloc(n);
    gpu_memset(d, 0, n);
    MPI_Status st;
    MCK(MPI_Recv(d, (int)n, MPI_CHAR, src, tag, W, &st));
    GPU_CHECK_STATUS(st, src, tag, n, "%s", what);
    GPU_CHECK_UNTOUCHED(gpu_download(d, n), n, STALE, "%s", what);
    CK(cudaFree(d));
}

static cudaStream_t ustream; /* the user's stream (non-blocking) on gpu_dev */

/* A CUDA-tagged datatype; with the stream and/or event as dependency. */
static MPI_Datatype dep_type(cudaStream_t s, cudaEvent_t ev) {
    MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    if (s) MCK(MPI_Type_set_attr(t, MPIX_ACC_STREAM, (void *)s));
    if (ev) MCK(MPI_Type_set_attr(t, MPIX_ACC_EVENT, (void *)ev));
    return t;
}

static int require_kernels(void) {
    MT_CHECK(kernels_ok, "the test kernels could not be built or loaded (see the first case)");
    return kernels_ok;
}

/* ------------------------------------------------------------------ cases */

static void c_kernels_spin_and_fill(void) {
    if (!kernels_ok) {
        MT_CHECK(0, "NVRTC kernels unavailable: %s", kernels_why[0] ? kernels_why : "on the other rank");
        return;
    }
    const size_t n = MiB + 3;
    unsigned char *d = gpu_malloc(n);
    gpu_memset(d, STALE, n);
    double t0 = MPI_Wtime();
    launch_spin(ustream, SPIN_NS);
    launch_fill(ustream, d, n, 77);
    int busy = still_running(cudaStreamQuery(ustream), "cudaStreamQuery");
    CK(cudaStreamSynchronize(ustream));
    double dt = MPI_Wtime() - t0;
    MT_CHECK(busy, "the spin kernel was done right after its launch");
    MT_CHECK(dt >= 0.15 && dt < 5.0, "spin(200 ms) + fill took %.3f s", dt);
    check_seed(d, n, 77, "fill kernel");
    CK(cudaFree(d));
    if (mt_rank == 0) printf("# kernels: %s; spin(200 ms) + fill(1 MiB) took %.1f ms\n", kernels_how, dt * 1e3);
}

/* MPI_Isend with a dependency (stream, or event recorded after the kernel) returns at
 * once while the kernel runs; the receiver gets the kernel's bytes. One warm-up message
 * per size first (device state, IPC export), then five timed trials behind a 10 ms kernel
 * (TIMED_SPIN_NS), each right after the receiver's empty "ready" message and then an
 * untimed 4 KiB send (WARM_BYTES); the fastest must be under 50 us and every trial must return while
 * the kernel still runs. Tags: tagbase + 10k (+1..5) data, +50.. untimed, +80.. ready. */
static void isend_with_dependency(int use_event, int tagbase) {
    static const size_t sz[] = {4 * KiB, MiB + 3, 64 * MiB};
    const int ns = 3, trials = 5;
    for (int k = 0; k < ns; ++k) {
        size_t n = sz[k];
        if (mt_rank == 0) {
            cudaEvent_t ev = NULL;
            if (use_event) CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
            MPI_Datatype t = dep_type(use_event ? NULL : ustream, ev);
            unsigned char *d = gpu_malloc(n);
            MPI_Request r;
            /* warm-up */
            launch_fill(ustream, d, n, 1000 + k);
            if (use_event) CK(cudaEventRecord(ev, ustream));
            MCK(MPI_Isend(d, (int)n, t, 1, tagbase + 10 * k, W, &r));
            gpu_wait(&r, MPI_STATUS_IGNORE, "warm-up Isend");
            double best = 1e9, all[5];
            for (int tr = 0; tr < trials; ++tr) {
                CK(cudaStreamSynchronize(ustream));
                gpu_memset(d, STALE, n);
                MCK(MPI_Recv(NULL, 0, MPI_BYTE, 1, tagbase + 80 + 5 * k + tr, W, MPI_STATUS_IGNORE));
                MCK(MPI_Isend(d, WARM_BYTES, t, 1, tagbase + 50 + 10 * k + tr, W, &r));
                gpu_wait(&r, MPI_STATUS_IGNORE, "untimed Isend before a timed one");
                launch_spin(ustream, TIMED_SPIN_NS);
                launch_fill(ustream, d, n, 2000 + 10 * k + tr);
                if (use_event) CK(cudaEventRecord(ev, ustream));
                double t0 = MPI_Wtime();
                MCK(MPI_Isend(d, (int)n, t, 1, tagbase + 10 * k + 1 + tr, W, &r));
                double dt = MPI_Wtime() - t0;
                int busy = still_running(use_event ? cudaEventQuery(ev) : cudaStreamQuery(ustream),
                                         use_event ? "cudaEventQuery" : "cudaStreamQuery");
                MT_CHECK(busy, "%zu bytes, trial %d: the kernel had finished when MPI_Isend returned (%.1f us): "
                         "MPI_Isend waited for the %s", n, tr, dt * 1e6, use_event ? "event" : "stream");
                all[tr] = dt;
                if (dt < best) best = dt;
                gpu_wait(&r, MPI_STATUS_IGNORE, "dependent Isend");
            }
            MT_CHECK(best < ISEND_LIMIT_S, "%zu bytes: fastest MPI_Isend with a pending %s took %.1f us (limit %.0f us; "
                     "trials %.1f %.1f %.1f %.1f %.1f us)", n, use_event ? "event" : "stream", best * 1e6,
                     ISEND_LIMIT_S * 1e6, all[0] * 1e6, all[1] * 1e6, all[2] * 1e6, all[3] * 1e6, all[4] * 1e6);
            printf("# rank 0: MPI_Isend with pending %s, %zu bytes: %.1f / %.1f / %.1f / %.1f / %.1f us\n",
                   use_event ? "event" : "stream", n, all[0] * 1e6, all[1] * 1e6, all[2] * 1e6, all[3] * 1e6,
                   all[4] * 1e6);
            MCK(MPI_Type_free(&t));
            CK(cudaStreamSynchronize(ustream));
            CK(cudaFree(d));
            if (ev) CK(cudaEventDestroy(ev));
        } else {
            recv_seeded(n, 0, tagbase + 10 * k, 1000 + k, "warm-up message");
            for (int tr = 0; tr < trials; ++tr) {
                unsigned char *d = recv_buffer(n);
                MCK(MPI_Send(NULL, 0, MPI_BYTE, 0, tagbase + 80 + 5 * k + tr, W));
                recv_stale(WARM_BYTES, 0, tagbase + 50 + 10 * k + tr, "untimed message before a timed one");
                recv_seeded_into(d, n, 0, tagbase + 10 * k + 1 + tr, 2000 + 10 * k + tr,
                                 "message written by the kernel");
            }
        }
    }
}

static void c_isend_with_stream_returns_before_kernel(void) {
    if (require_kernels()) isend_with_dependency(0, 100);
}
static void c_isend_with_event_returns_before_kernel(void) {
    if (require_kernels()) isend_with_dependency(1, 200);
}

/* A blocking MPI_Send with a stream dependency sends the kernel's bytes (device eager
 * size and rendezvous size) and returns only after the kernel. */
static void c_blocking_send_with_stream(void) {
    if (!require_kernels()) return;
    static const size_t sz[] = {4 * KiB, MiB + 3};
    for (int k = 0; k < 2; ++k) {
        size_t n = sz[k];
        int tag = 300 + k;
        if (mt_rank == 0) {
            MPI_Datatype t = dep_type(ustream, NULL);
            unsigned char *d = gpu_malloc(n);
            gpu_memset(d, STALE, n);
            launch_spin(ustream, SPIN_NS);
            launch_fill(ustream, d, n, 3000 + k);
            MCK(MPI_Send(d, (int)n, t, 1, tag, W));
            int busy = still_running(cudaStreamQuery(ustream), "cudaStreamQuery");
            MT_CHECK(!busy, "%zu bytes: MPI_Send returned while the kernel it depends on still ran", n);
            MCK(MPI_Type_free(&t));
            CK(cudaStreamSynchronize(ustream));
            CK(cudaFree(d));
        } else {
            recv_seeded(n, 0, tag, 3000 + k, "blocking send ordered after the kernel");
        }
    }
}

/* Isend(device, stream-dependent), then Send(host), then Isend(device, small), all with
 * one tag: the receiver gets them in that order, with the kernel's bytes in the first. */
static void c_order_kept_behind_pending_stream(void) {
    if (!require_kernels()) return;
    const size_t n1 = MiB + 3, n2 = 64, n3 = 100;
    const int tag = 400;
    if (mt_rank == 0) {
        MPI_Datatype t = dep_type(ustream, NULL);
        unsigned char *d1 = gpu_malloc(n1), *d3 = gpu_malloc(n3);
        unsigned char h[64];
        mt_fill(h, n2, 4002);
        gpu_memset(d1, STALE, n1);
        launch_spin(ustream, SPIN_NS);
        launch_fill(ustream, d1, n1, 4001);
        launch_fill(ustream, d3, n3, 4003);
        MPI_Request r[2];
        MPI_Status sts[2];
        MCK(MPI_Isend(d1, (int)n1, t, 1, tag, W, &r[0]));
        MCK(MPI_Send(h, (int)n2, MPI_CHAR, 1, tag, W));
        MCK(MPI_Isend(d3, (int)n3, t, 1, tag, W, &r[1]));
        gpu_wait_all(2, r, sts, "ordered sends");
        MCK(MPI_Type_free(&t));
        CK(cudaStreamSynchronize(ustream));
        CK(cudaFree(d1));
        CK(cudaFree(d3));
    } else {
        MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
        unsigned char *d1 = gpu_malloc(n1), *d3 = gpu_malloc(n3);
        unsigned char h[64];
        memset(h, 0, sizeof h);
        MPI_Request r[3];
        MPI_Status sts[3];
        MCK(MPI_Irecv(d1, (int)n1, t, 0, tag, W, &r[0]));
        MCK(MPI_Irecv(h, (int)n2, MPI_CHAR, 0, tag, W, &r[1]));
        MCK(MPI_Irecv(d3, (int)n3, t, 0, tag, W, &r[2]));
        gpu_wait_all(3, r, sts, "ordered receives");
        GPU_CHECK_STATUS(sts[0], 0, tag, n1, "first message (device, after the kernel)");
        GPU_CHECK_STATUS(sts[1], 0, tag, n2, "second message (host)");
        GPU_CHECK_STATUS(sts[2], 0, tag, n3, "third message (device)");
        check_seed(d1, n1, 4001, "first message");
        size_t bad = mt_verify(h, n2, 4002);
        MT_CHECK(bad == (size_t)-1, "second message (host): first wrong byte at %zu", bad);
        check_seed(d3, n3, 4003, "third message");
        MCK(MPI_Type_free(&t));
        CK(cudaFree(d1));
        CK(cudaFree(d3));
    }
}

/* The datatype (with the stream attribute) is freed right after MPI_Isend, and the
 * receive's datatype right after MPI_Irecv: the attributes were captured at the call. */
static void c_type_freed_after_isend(void) {
    if (!require_kernels()) return;
    static const size_t sz[] = {100, MiB + 3};
    for (int k = 0; k < 2; ++k) {
        size_t n = sz[k];
        int tag = 500 + k;
        MPI_Request r;
        if (mt_rank == 0) {
            MPI_Datatype t = dep_type(ustream, NULL);
            unsigned char *d = gpu_malloc(n);
            gpu_memset(d, STALE, n);
            launch_spin(ustream, SPIN_NS);
            launch_fill(ustream, d, n, 5000 + k);
            MCK(MPI_Isend(d, (int)n, t, 1, tag, W, &r));
            MCK(MPI_Type_free(&t));
            MT_CHECK(t == MPI_DATATYPE_NULL, "MPI_Type_free left the handle set");
            int busy = still_running(cudaStreamQuery(ustream), "cudaStreamQuery");
            MT_CHECK(busy, "%zu bytes: the kernel had finished when MPI_Isend returned", n);
            gpu_wait(&r, MPI_STATUS_IGNORE, "Isend whose datatype was freed");
            CK(cudaStreamSynchronize(ustream));
            CK(cudaFree(d));
        } else {
            MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
            unsigned char *d = gpu_malloc(n);
            gpu_memset(d, 0, n);
            MPI_Status st;
            MCK(MPI_Irecv(d, (int)n, t, 0, tag, W, &r));
            MCK(MPI_Type_free(&t));
            gpu_wait(&r, &st, "Irecv whose datatype was freed");
            GPU_CHECK_STATUS(st, 0, tag, n, "receive with a freed datatype");
            check_seed(d, n, 5000 + k, "message sent with a freed datatype");
            CK(cudaFree(d));
        }
    }
}

/* Work enqueued on the stream after MPI_Isend does not delay the transfer: the
 * dependency is the stream as it was at the call. */
static void c_later_stream_work_does_not_delay_isend(void) {
    if (!require_kernels()) return;
    const size_t n = MiB + 3;
    const int tag = 600;
    if (mt_rank == 0) {
        MPI_Datatype t = dep_type(ustream, NULL);
        unsigned char *d = gpu_malloc(n);
        MPI_Request r;
        launch_fill(ustream, d, n, 6000);
        MCK(MPI_Isend(d, (int)n, t, 1, tag, W, &r));
        launch_spin(ustream, 2000000000ull); /* 2 s, enqueued after the call */
        int flag = 0, busy = 1;
        while (!flag && busy) {
            MCK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
            busy = still_running(cudaStreamQuery(ustream), "cudaStreamQuery");
        }
        MT_CHECK(flag, "MPI_Isend completed only after the 2 s kernel enqueued after it: it waited for later work");
        if (!flag) gpu_wait(&r, MPI_STATUS_IGNORE, "Isend");
        MCK(MPI_Type_free(&t));
        CK(cudaStreamSynchronize(ustream));
        CK(cudaFree(d));
    } else {
        recv_seeded(n, 0, tag, 6000, "message sent before later stream work");
    }
}

/* MPI_Irecv into device memory with MPIX_ACC_STREAM writes only after the work already
 * on that stream: a kernel that spins and then writes the receive buffer must not
 * overwrite the message. Host (8 B, 4 KiB) and device (1 MiB + 3) senders. */
static void c_irecv_with_stream_writes_after_prior_work(void) {
    if (!require_kernels()) return;
    /* 8 B goes in by stream memory writes (up to 16 bytes) behind the stream's
     * work, 4 KiB by a copy of the host payload, MiB + 3 pulled or piped. */
    static const size_t sz[] = {8, 4 * KiB, MiB + 3};
    for (int k = 0; k < 3; ++k) {
        size_t n = sz[k];
        int tag = 700 + k;
        if (mt_rank == 0) {
            unsigned char *d = gpu_malloc(n);
            launch_fill(ustream, d, n, 7000 + k);
            CK(cudaStreamSynchronize(ustream));
            MCK(MPI_Barrier(W)); /* the receive, and the kernel before it, are under way */
            if (k < 2) {
                unsigned char *h = malloc(n);
                if (!h) gpu_die(__FILE__, __LINE__, "out of memory");
                mt_fill(h, n, 7000 + k);
                MCK(MPI_Send(h, (int)n, MPI_CHAR, 1, tag, W));
                free(h);
            } else {
                MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
                MCK(MPI_Send(d, (int)n, t, 1, tag, W));
                MCK(MPI_Type_free(&t));
            }
            CK(cudaFree(d));
        } else {
            MPI_Datatype t = dep_type(ustream, NULL);
            unsigned char *d = gpu_malloc(n);
            gpu_memset(d, 0, n);
            MPI_Request r;
            MPI_Status st;
            launch_spin(ustream, SPIN_NS);
            launch_fill(ustream, d, n, 7100 + k); /* the prior work: overwrites d, then done */
            MCK(MPI_Irecv(d, (int)n, t, 0, tag, W, &r));
            MCK(MPI_Barrier(W));
            gpu_wait(&r, &st, "Irecv ordered after stream work");
            int busy = still_running(cudaStreamQuery(ustream), "cudaStreamQuery");
            MT_CHECK(!busy, "%zu bytes: MPI_Irecv completed while the stream's prior kernel still ran", n);
            CK(cudaStreamSynchronize(ustream));
            GPU_CHECK_STATUS(st, 0, tag, n, "receive after stream work");
            check_seed(d, n, 7000 + k, "received bytes (the kernel's own would mean the receive came first)");
            MCK(MPI_Type_free(&t));
            CK(cudaFree(d));
        }
    }
}

/* DESIGN 2.6: rank 0 posts a 64 MiB device Isend and blocks in MPI_Barrier while rank 1
 * blocks in MPI_Recv (into device, then host memory). Must finish (watchdog otherwise). */
static void progress_isend_then_barrier(int with_kernel, int tagbase) {
    const size_t n = 64 * MiB;
    for (int k = 0; k < 2; ++k) {
        int tag = tagbase + k;
        uint64_t seed = 8000 + tagbase + k;
        if (mt_rank == 0) {
            MPI_Datatype t = dep_type(with_kernel ? ustream : NULL, NULL);
            unsigned char *d = gpu_malloc(n);
            MPI_Request r;
            if (with_kernel) {
                gpu_memset(d, STALE, n);
                launch_spin(ustream, SPIN_NS);
            }
            launch_fill(ustream, d, n, seed);
            if (!with_kernel) CK(cudaStreamSynchronize(ustream));
            MCK(MPI_Isend(d, (int)n, t, 1, tag, W, &r));
            MCK(MPI_Barrier(W));
            gpu_wait(&r, MPI_STATUS_IGNORE, "64 MiB Isend after the barrier");
            MCK(MPI_Type_free(&t));
            CK(cudaStreamSynchronize(ustream));
            CK(cudaFree(d));
        } else if (k == 0) {
            recv_seeded(n, 0, tag, seed, "64 MiB into device memory while the sender sits in MPI_Barrier");
            MCK(MPI_Barrier(W));
        } else {
            unsigned char *h = malloc(n);
            if (!h) gpu_die(__FILE__, __LINE__, "out of memory");
            MPI_Status st;
            MCK(MPI_Recv(h, (int)n, MPI_CHAR, 0, tag, W, &st));
            MCK(MPI_Barrier(W));
            GPU_CHECK_STATUS(st, 0, tag, n, "64 MiB into host memory");
            size_t bad = mt_verify(h, n, seed);
            MT_CHECK(bad == (size_t)-1, "64 MiB into host memory: first wrong byte at %zu", bad);
            free(h);
        }
    }
}

static void c_progress_isend_then_barrier(void) {
    if (require_kernels()) progress_isend_then_barrier(0, 900);
}
static void c_progress_stream_isend_then_barrier(void) {
    if (require_kernels()) progress_isend_then_barrier(1, 910);
}

/* The mirror: rank 0 posts a 64 MiB device Irecv and blocks in MPI_Barrier while rank 1
 * blocks in MPI_Send of device memory. */
static void c_progress_irecv_then_barrier(void) {
    if (!require_kernels()) return;
    const size_t n = 64 * MiB;
    const int tag = 920;
    if (mt_rank == 0) {
        unsigned char *d = gpu_malloc(n);
        gpu_memset(d, 0, n);
        MPI_Request r;
        MPI_Status st;
        MCK(MPI_Irecv(d, (int)n, MPI_CHAR, 1, tag, W, &r));
        MCK(MPI_Barrier(W));
        gpu_wait(&r, &st, "64 MiB Irecv after the barrier");
        GPU_CHECK_STATUS(st, 1, tag, n, "64 MiB Irecv");
        check_seed(d, n, 9200, "64 MiB received while in MPI_Barrier");
        CK(cudaFree(d));
    } else {
        unsigned char *d = gpu_malloc(n);
        launch_fill(ustream, d, n, 9200);
        CK(cudaStreamSynchronize(ustream));
        MCK(MPI_Send(d, (int)n, MPI_CHAR, 0, tag, W));
        MCK(MPI_Barrier(W));
        CK(cudaFree(d));
    }
}

static const gpu_case_t cases[] = {
    {"runtime_compiled_kernels_spin_200ms_then_write_pattern", c_kernels_spin_and_fill, 0},
    {"isend_with_stream_returns_before_kernel_finishes_and_sends_kernel_output",
     c_isend_with_stream_returns_before_kernel, 0},
    {"isend_with_event_returns_before_kernel_finishes_and_sends_kernel_output",
     c_isend_with_event_returns_before_kernel, 0},
    {"blocking_send_with_stream_sends_kernel_output_after_kernel", c_blocking_send_with_stream, 0},
    {"stream_dependent_isend_then_host_send_same_tag_arrive_in_order", c_order_kept_behind_pending_stream, 0},
    {"datatype_freed_right_after_isend_and_irecv_keeps_captured_attributes", c_type_freed_after_isend, 0},
    {"stream_work_enqueued_after_isend_does_not_delay_it", c_later_stream_work_does_not_delay_isend, 0},
    {"irecv_with_stream_writes_after_prior_work_on_that_stream", c_irecv_with_stream_writes_after_prior_work, 0},
    {"progress_isend_64mib_then_barrier_while_peer_blocks_in_recv", c_progress_isend_then_barrier, 0},
    {"progress_stream_dependent_isend_64mib_then_barrier_while_peer_blocks_in_recv",
     c_progress_stream_isend_then_barrier, 0},
    {"progress_irecv_64mib_then_barrier_while_peer_blocks_in_send", c_progress_irecv_then_barrier, 0},
};

#ifndef CUDA_STREAM_NO_IPC
#define CUDA_STREAM_NO_IPC 0
#endif

int main(int argc, char **argv) {
#if CUDA_STREAM_NO_IPC
    /* read by MPI-ACC at MPI_Init: the sender waits for the dependency and stages */
    setenv("MPIACC_IPC", "0", 1);
#endif
    MT_INIT(&argc, &argv);
    gpu_setup(-1);
    if (!gpu_skip_why) {
        CK(cudaStreamCreateWithFlags(&ustream, cudaStreamNonBlocking));
        int ok = kernels_load(), all = 0;
        if (!ok) fprintf(stderr, "# [rank %d] NVRTC kernels: %s\n", mt_rank, kernels_why);
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        kernels_ok = all;
    }
    gpu_run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    if (!gpu_skip_why) {
        CK(cudaStreamSynchronize(ustream));
        CK(cudaStreamDestroy(ustream));
        if (k_lib) CK(cudaLibraryUnload(k_lib));
    }
    gpu_teardown();
    return mt_finalize();
}
