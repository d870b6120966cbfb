/* Helpers shared by the CUDA tests (test/gpu/cuda_*.c): device choice, skipping by name
 * where no GPU is usable, checked CUDA and MPI calls that take the job down with a
 * message instead of hanging, bounded waits, a per-case watchdog, and the reference
 * bytes every transfer is checked against.
 *
 * Every CUDA call is checked. A failing CUDA call, an unexpected MPI error, a wait that
 * runs past GPU_TIMEOUT_S, or a case that runs past GPU_CASE_LIMIT_S ends the whole job
 * with a line naming the case: a GPU test never hangs the suite. */
#ifndef GPU_UTIL_H_INCLUDED
#define GPU_UTIL_H_INCLUDED

#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../mpi/mpiacc_hooks.h"
#include "../mpi/mpitest.h"
#include "mpiacc.h"

/* GCC 11+ reads MPICH's MPI_STATUSES_IGNORE ((MPI_Status *)1) as a zero-size array. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

/* One wait for a request or a message: far above any real completion time. */
#ifndef GPU_TIMEOUT_S
#define GPU_TIMEOUT_S 60.0
#endif
/* One whole case, both ranks, the verdict's Allreduce included (SIGALRM). */
#ifndef GPU_CASE_LIMIT_S
#define GPU_CASE_LIMIT_S 120u
#endif
/* Bytes after every receive buffer that must stay untouched, and their value. */
#define GPU_GUARD 256
#define GPU_SENTINEL 0xa5

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static int gpu_dev = -1;     /* this rank's CUDA device */
static int gpu_ndev = 0;     /* devices this rank sees */
static int gpu_ndev_min = 0; /* fewest devices any rank sees */
static int gpu_peer = -1;    /* the other rank of the two */
static int gpu_same_device;  /* both ranks use one GPU (same PCI location), whatever its ordinals */

/* ------------------------------------------------------------------ failing loudly */

static inline void gpu_die(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "# [rank %d] %s:%d: %s: FATAL: ", mt_rank, file, line, mt_case_name ? mt_case_name : "setup");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    printf("Bail out! rank %d: %s: fatal error at %s:%d (details on stderr)\n", mt_rank,
           mt_case_name ? mt_case_name : "setup", file, line);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
    _exit(3);
}

/* A CUDA runtime call that must succeed. */
#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t ck_e_ = (call);                                                                \
        if (ck_e_ != cudaSuccess)                                                                  \
            gpu_die(__FILE__, __LINE__, "%s: %s (%s)", #call, cudaGetErrorName(ck_e_),            \
                    cudaGetErrorString(ck_e_));                                                    \
    } while (0)

static inline const char *gpu_class_name(int cls) {
    switch (cls) {
        case MPI_SUCCESS: return "MPI_SUCCESS";
        case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER";
        case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
        case MPI_ERR_TYPE: return "MPI_ERR_TYPE";
        case MPI_ERR_TAG: return "MPI_ERR_TAG";
        case MPI_ERR_COMM: return "MPI_ERR_COMM";
        case MPI_ERR_RANK: return "MPI_ERR_RANK";
        case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
        case MPI_ERR_ARG: return "MPI_ERR_ARG";
        case MPI_ERR_OTHER: return "MPI_ERR_OTHER";
        case MPI_ERR_INTERN: return "MPI_ERR_INTERN";
        case MPI_ERR_IN_STATUS: return "MPI_ERR_IN_STATUS";
        case MPI_ERR_UNSUPPORTED_OPERATION: return "MPI_ERR_UNSUPPORTED_OPERATION";
        default: return "another class";
    }
}

static inline int gpu_err_class(int rc) {
    int cls = -1;
    MPI_Error_class(rc, &cls);
    return cls;
}

static inline void gpu_err_string(int rc, char *out /* MPI_MAX_ERROR_STRING */) {
    int len = 0;
    out[0] = 0;
    if (MPI_Error_string(rc, out, &len) != MPI_SUCCESS) strcpy(out, "(MPI_Error_string failed)");
}

/* An MPI call that must succeed (MPI_COMM_WORLD returns errors: see gpu_setup). */
#define MCK(call)                                                                                  \
    do {                                                                                           \
        int mck_rc_ = (call);                                                                      \
        if (mck_rc_ != MPI_SUCCESS) {                                                              \
            char mck_s_[MPI_MAX_ERROR_STRING];                                                     \
            gpu_err_string(mck_rc_, mck_s_);                                                       \
            gpu_die(__FILE__, __LINE__, "%s returned %s: %s", #call,                               \
                    gpu_class_name(gpu_err_class(mck_rc_)), mck_s_);                              \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------------ watchdog */

static char gpu_watch_msg[512];
static size_t gpu_watch_len;

static inline void gpu_watchdog(int sig) {
    (void)sig;
    /* async-signal-safe: the message was formatted when the case began */
    ssize_t w = write(STDOUT_FILENO, gpu_watch_msg, gpu_watch_len);
    w = write(STDERR_FILENO, gpu_watch_msg, gpu_watch_len);
    (void)w;
    _exit(124);
}

static inline void gpu_arm(const char *name, unsigned seconds) {
    gpu_watch_len = (size_t)snprintf(gpu_watch_msg, sizeof gpu_watch_msg,
                                     "Bail out! rank %d: case %s did not finish within %u s (hang?)\n", mt_rank,
                                     name, seconds);
    if (gpu_watch_len >= sizeof gpu_watch_msg) gpu_watch_len = sizeof gpu_watch_msg - 1;
    signal(SIGALRM, gpu_watchdog);
    alarm(seconds);
}

/* ------------------------------------------------------------------ bounded waits */

/* Polls MPI_Testall until every request completes; a request still pending after
 * GPU_TIMEOUT_S ends the job (the buffers it uses cannot be released). */
static inline void gpu_wait_all_at(const char *file, int line, int n, MPI_Request *reqs, MPI_Status *sts,
                            const char *what) {
    double end = MPI_Wtime() + GPU_TIMEOUT_S;
    for (;;) {
        int flag = 0;
        int rc = MPI_Testall(n, reqs, &flag, sts);
        if (rc != MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING];
            int first = -1;
            if (rc == MPI_ERR_IN_STATUS && sts != MPI_STATUSES_IGNORE)
                for (int i = 0; i < n && first < 0; ++i)
                    if (sts[i].MPI_ERROR != MPI_SUCCESS && sts[i].MPI_ERROR != MPI_ERR_PENDING) first = i;
            gpu_err_string(first >= 0 ? sts[first].MPI_ERROR : rc, s);
            gpu_die(file, line, "%s: MPI_Testall returned %s (request %d): %s", what,
                    gpu_class_name(gpu_err_class(rc)), first, s);
        }
        if (flag) return;
        if (MPI_Wtime() > end) {
            int pending = 0;
            for (int i = 0; i < n; ++i) pending += reqs[i] != MPI_REQUEST_NULL;
            gpu_die(file, line, "%s: %d of %d requests still pending after %.0f s", what, pending, n,
                    GPU_TIMEOUT_S);
        }
    }
}
#define gpu_wait_all(n, reqs, sts, what) gpu_wait_all_at(__FILE__, __LINE__, (n), (reqs), (sts), (what))

static inline void gpu_wait_one_at(const char *file, int line, MPI_Request *req, MPI_Status *st, const char *what) {
    MPI_Status tmp;
    gpu_wait_all_at(file, line, 1, req, st == MPI_STATUS_IGNORE ? &tmp : st, what);
}
#define gpu_wait(req, st, what) gpu_wait_one_at(__FILE__, __LINE__, (req), (st), (what))

/* ------------------------------------------------------------------ reference bytes */

/* Message k of a case carries gpu_ref + gpu_offset(k): bytes differ from message to
 * message, so a message delivered to the wrong buffer does not verify. */
#define GPU_REF_MAX (64 * MiB + 4 * MiB)
#define GPU_REF_SLACK 4096
static unsigned char *gpu_ref;
static unsigned char *gpu_readback; /* pinned, GPU_REF_MAX + GPU_GUARD + GPU_REF_SLACK */

static inline size_t gpu_offset(int k) { return (size_t)(((unsigned)k * 2654435761u) >> 8) % 509 * 8; }

static inline void gpu_ref_init(void) {
    gpu_ref = (unsigned char *)malloc(GPU_REF_MAX + GPU_REF_SLACK);
    if (!gpu_ref) gpu_die(__FILE__, __LINE__, "out of host memory");
    mt_fill(gpu_ref, GPU_REF_MAX + GPU_REF_SLACK, 0x6a09e667f3bcc908ull);
    CK(cudaMallocHost((void **)&gpu_readback, GPU_REF_MAX + GPU_GUARD + GPU_REF_SLACK));
}

/* Compares n bytes with the expected ones; names the first difference. */
#define GPU_CHECK_SAME(got, want, n, ...)                                                          \
    do {                                                                                           \
        const unsigned char *g_ = (const unsigned char *)(got), *w_ = (const unsigned char *)(want); \
        size_t n_ = (n);                                                                           \
        if (n_ && memcmp(g_, w_, n_) != 0) {                                                       \
            size_t i_ = 0;                                                                         \
            while (g_[i_] == w_[i_]) ++i_;                                                         \
            char what_[256];                                                                       \
            snprintf(what_, sizeof what_, __VA_ARGS__);                                            \
            MT_CHECK(0, "%s: first wrong byte at %zu of %zu (got 0x%02x, expected 0x%02x)", what_, i_, \
                     n_, g_[i_], w_[i_]);                                                          \
        }                                                                                          \
    } while (0)

/* The n bytes are all `v` (memory nothing may write). */
#define GPU_CHECK_UNTOUCHED(buf, n, v, ...)                                                        \
    do {                                                                                           \
        const unsigned char *b_ = (const unsigned char *)(buf);                                    \
        for (size_t i_ = 0; i_ < (size_t)(n); ++i_)                                                \
            if (b_[i_] != (unsigned char)(v)) {                                                    \
                char what_[256];                                                                   \
                snprintf(what_, sizeof what_, __VA_ARGS__);                                        \
                MT_CHECK(0, "%s: byte %zu of %zu was written (0x%02x)", what_, i_, (size_t)(n), b_[i_]); \
                break;                                                                             \
            }                                                                                      \
    } while (0)

/* A BOOL knob as the library reads it at MPI_Init, for one that defaults to on: on
 * unless 0, off or no. */
static inline int gpu_knob_on(const char *name) {
    const char *v = getenv(name);
    return !(v && (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "no")));
}
static inline int gpu_ipc_knob_on(void) { return gpu_knob_on("MPIACC_IPC"); }

/* ------------------------------------------------------------------ device memory */

/* The library copies on its own non-blocking streams, which do not wait for the legacy
 * default stream: every set-up copy or memset is therefore finished before MPI sees the
 * buffer. */
static inline void *gpu_malloc(size_t n) {
    void *p = NULL;
    CK(cudaMalloc(&p, n ? n : 1));
    return p;
}
static inline void gpu_upload(void *dst, const void *src, size_t n) {
    if (n) CK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
}
static inline void gpu_memset(void *dst, int v, size_t n) {
    if (n) CK(cudaMemset(dst, v, n));
    CK(cudaDeviceSynchronize());
}
/* Copies n device bytes into gpu_readback and returns it. */
static inline const unsigned char *gpu_download(const void *src, size_t n) {
    if (n > GPU_REF_MAX + GPU_GUARD + GPU_REF_SLACK) gpu_die(__FILE__, __LINE__, "readback of %zu bytes too large", n);
    if (n) CK(cudaMemcpy(gpu_readback, src, n, cudaMemcpyDeviceToHost));
    return gpu_readback;
}

/* A tagged copy of `base`: MPIX_ACC_BUF_TYPE = kind. */
static inline MPI_Datatype gpu_tagged(MPI_Datatype base, int kind) {
    MPI_Datatype t;
    MCK(MPI_Type_dup(base, &t));
    MCK(MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(intptr_t)kind));
    return t;
}

static inline int gpu_count_bytes(const MPI_Status *st) {
    int n = -12345;
    MPI_Get_count(st, MPI_BYTE, &n);
    return n;
}

#define GPU_CHECK_STATUS(st, src, tag, nbytes, ...)                                                \
    do {                                                                                           \
        char what_[200];                                                                           \
        snprintf(what_, sizeof what_, __VA_ARGS__);                                                \
        MT_CHECK((st).MPI_SOURCE == (src), "%s: status source %d, expected %d", what_, (st).MPI_SOURCE, (int)(src)); \
        MT_CHECK((st).MPI_TAG == (tag), "%s: status tag %d, expected %d", what_, (st).MPI_TAG, (int)(tag)); \
        MT_CHECK(gpu_count_bytes(&(st)) == (int)(nbytes), "%s: status count %d bytes, expected %zu", what_, \
                 gpu_count_bytes(&(st)), (size_t)(nbytes));                                        \
    } while (0)

/* ------------------------------------------------------------------ setup and cases */

/* Why every case skips, or NULL when the GPU cases run. */
static char gpu_skip_buf[300];
static const char *gpu_skip_why;

/* Picks the device (rank % devices, or `fixed` when >= 0) and decides whether the cases
 * can run: MPIX_Query_cuda_support() and cudaGetDeviceCount() on every rank, and exactly
 * two ranks. Rank 0 prints each rank's device as a TAP comment. */
static inline void gpu_setup(int fixed) {
    char why[200] = "";
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int ok = 1;
    if (mt_size != 2) {
        ok = 0;
        snprintf(why, sizeof why, "needs exactly 2 ranks (run with mpiexec -n 2), has %d", mt_size);
    }
    int q = MPIX_Query_cuda_support();
    if (ok && !q) {
        ok = 0;
        snprintf(why, sizeof why, "no usable CUDA device (MPIX_Query_cuda_support() = 0)");
    }
    if (ok) {
        cudaError_t e = cudaGetDeviceCount(&gpu_ndev);
        if (e != cudaSuccess || gpu_ndev <= 0) {
            ok = 0;
            snprintf(why, sizeof why, "no usable CUDA device (cudaGetDeviceCount: %s, %d devices)",
                     e == cudaSuccess ? "cudaSuccess" : cudaGetErrorName(e), gpu_ndev);
            (void)cudaGetLastError();
            gpu_ndev = 0;
        }
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        /* rank 0 prints: give it the reason of the first rank that has one */
        char first[200];
        int src = ok ? mt_size : mt_rank, who = 0;
        MPI_Allreduce(&src, &who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (who < mt_size) {
            if (mt_rank == who) memcpy(first, why, sizeof first);
            MPI_Bcast(first, sizeof first, MPI_CHAR, who, MPI_COMM_WORLD);
        } else {
            snprintf(first, sizeof first, "GPU unavailable");
        }
        snprintf(gpu_skip_buf, sizeof gpu_skip_buf, "%s%s", who > 0 && who < mt_size ? "another rank: " : "",
                 first);
        gpu_skip_why = gpu_skip_buf;
        return;
    }
    gpu_peer = 1 - mt_rank;
    gpu_dev = fixed >= 0 ? fixed : mt_rank % gpu_ndev;
    CK(cudaSetDevice(gpu_dev));
    CK(cudaFree(0)); /* make the context now, not inside the first timed call */
    MPI_Allreduce(&gpu_ndev, &gpu_ndev_min, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

    struct cudaDeviceProp prop;
    char info[240], all[2][240];
    char bus[32] = "?";
    CK(cudaGetDeviceProperties(&prop, gpu_dev));
    CK(cudaDeviceGetPCIBusId(bus, sizeof bus, gpu_dev));
    char peer_bus[32] = "";
    MPI_Sendrecv(bus, sizeof bus, MPI_CHAR, gpu_peer, 0, peer_bus, sizeof peer_bus, MPI_CHAR, gpu_peer, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    gpu_same_device = strcmp(bus, peer_bus) == 0;
    snprintf(info, sizeof info, "rank %d: CUDA device %d of %d, %.120s (sm_%d%d), PCI %.31s", mt_rank, gpu_dev, gpu_ndev,
             prop.name, prop.major, prop.minor, bus);
    MPI_Gather(info, sizeof info, MPI_CHAR, all, sizeof info, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (mt_rank == 0)
        for (int r = 0; r < 2; ++r) printf("# %s\n", all[r]);
    gpu_ref_init();
}

typedef struct {
    const char *name;
    void (*run)(void);
    int need_two_devices; /* skipped (named) where any rank sees fewer */
} gpu_case_t;

/* Runs every case, each as one TAP line, or skips each by name. */
static inline void gpu_run_cases(const gpu_case_t *cases, int n) {
    for (int i = 0; i < n; ++i) {
        if (gpu_skip_why) {
            mt_skip(cases[i].name, gpu_skip_why);
            continue;
        }
        if (cases[i].need_two_devices && gpu_ndev_min < 2) {
            mt_skip(cases[i].name, "needs 2 CUDA devices per node");
            continue;
        }
        MT_CASE(cases[i].name) {
            gpu_arm(cases[i].name, GPU_CASE_LIMIT_S);
            cases[i].run();
        }
        alarm(0);
    }
}

static inline void gpu_teardown(void) {
    if (gpu_readback) CK(cudaFreeHost(gpu_readback));
    free(gpu_ref);
    gpu_readback = NULL;
    gpu_ref = NULL;
}

#endif
