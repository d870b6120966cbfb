/* Helpers for the collective tests on device buffers (coll_device.c, test/gpu/cuda_coll.c).
 * A buffer of one kind (host memory, an OpenCL cl_mem, CUDA memory) sits behind one set
 * of helpers, with guard bytes on both sides of the region that MPI sees, and a datatype
 * that describes it to MPI-ACC. Only MPI semantics are used: the library's internals are
 * not looked at. */
#ifndef COLL_UTIL_H_INCLUDED
#define COLL_UTIL_H_INCLUDED

#include <signal.h>
#include <unistd.h>

#include "opencl_util.h"

#define W MPI_COMM_WORLD

enum { CK_HOST = 0, CK_OPENCL = 1, CK_CUDA = 2 };
static const char *const coll_kind_names[] = {"host", "opencl", "cuda"};

/* Bytes before and after every region, and their value: they must survive every call. */
#define COLL_GUARD 64
#define COLL_SENTINEL 0xa5
/* One wait, and one whole case: far above any real time, below run-test's limit. */
#define COLL_WAIT_S 60.0
#define COLL_CASE_LIMIT_S 120u

/* CUDA memory, given by test/gpu/cuda_coll.c; null in a program without CUDA. */
typedef struct {
    void *(*alloc)(size_t n);
    void (*put)(void *dev, const void *src, size_t n); /* finished when it returns */
    void (*get)(const void *dev, void *dst, size_t n);
    void (*release)(void *dev);
} coll_cuda_ops;
static const coll_cuda_ops *coll_cuda;

static ocl_env coll_ocl;
/* Why every case of the program is skipped (no device of its kind), or null. */
static const char *coll_skip_all;

/* ------------------------------------------------------------------ buffers */

typedef struct {
    int kind;
    size_t n;         /* bytes of the region MPI sees */
    unsigned char *p; /* host or CUDA allocation: guard, region, guard */
    cl_mem mem;       /* OpenCL: the same layout; the region is at MPIX_ACC_OFFSET COLL_GUARD */
} cbuf;

static inline cbuf cbuf_new(int kind, size_t n) {
    cbuf b;
    memset(&b, 0, sizeof b);
    b.kind = kind;
    b.n = n;
    size_t total = n + 2 * COLL_GUARD;
    unsigned char *init = (unsigned char *)p2p_alloc(total);
    memset(init, COLL_SENTINEL, total);
    if (kind == CK_OPENCL) {
        b.mem = ocl_alloc(&coll_ocl, total);
        ocl_write(&coll_ocl, b.mem, 0, init, total);
    } else if (kind == CK_CUDA) {
        b.p = (unsigned char *)coll_cuda->alloc(total);
        coll_cuda->put(b.p, init, total);
    } else {
        b.p = init;
        return b;
    }
    free(init);
    return b;
}

/* What the MPI call is given: a pointer to the region, or the cl_mem handle itself. */
static inline void *cbuf_arg(const cbuf *b) { return b->kind == CK_OPENCL ? (void *)b->mem : b->p + COLL_GUARD; }

static inline void cbuf_put(cbuf *b, const void *src, size_t n) {
    if (!n) return;
    if (b->kind == CK_OPENCL)
        ocl_write(&coll_ocl, b->mem, COLL_GUARD, src, n);
    else if (b->kind == CK_CUDA)
        coll_cuda->put(b->p + COLL_GUARD, src, n);
    else
        memcpy(b->p + COLL_GUARD, src, n);
}

/* A host copy of the region (the caller frees it), after checking both guards. */
static inline unsigned char *cbuf_get(const cbuf *b, const char *what) {
    size_t total = b->n + 2 * COLL_GUARD;
    unsigned char *all = (unsigned char *)p2p_alloc(total);
    if (b->kind == CK_OPENCL)
        ocl_read(&coll_ocl, b->mem, 0, all, total);
    else if (b->kind == CK_CUDA)
        coll_cuda->get(b->p, all, total);
    else
        memcpy(all, b->p, total);
    size_t lo = p2p_first_not(all, COLL_GUARD, COLL_SENTINEL);
    size_t hi = p2p_first_not(all + COLL_GUARD + b->n, COLL_GUARD, COLL_SENTINEL);
    MT_CHECK(lo == (size_t)-1, "%s: guard byte %zu before the region was written", what, COLL_GUARD - lo);
    MT_CHECK(hi == (size_t)-1, "%s: guard byte %zu after the region was written", what, hi);
    memmove(all, all + COLL_GUARD, b->n);
    return all;
}

static inline void cbuf_free(cbuf *b) {
    if (b->kind == CK_OPENCL)
        clReleaseMemObject(b->mem);
    else if (b->kind == CK_CUDA)
        coll_cuda->release(b->p);
    else
        free(b->p);
    memset(b, 0, sizeof *b);
}

/* The datatype for `base` elements in a buffer of this kind: host memory and CUDA memory
 * (found by pointer) use `base` itself; a cl_mem needs its kind, queue and the offset of
 * the region. Free it with coll_type_free. */
static inline MPI_Datatype coll_type(int kind, MPI_Datatype base) {
    if (kind != CK_OPENCL) return base;
    MPI_Datatype t;
    MPI_Type_dup(base, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_OPENCL);
    MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)coll_ocl.queue);
    MPI_Type_set_attr(t, MPIX_ACC_OFFSET, (void *)(long)COLL_GUARD);
    return t;
}
static inline void coll_type_free(int kind, MPI_Datatype *t) {
    if (kind == CK_OPENCL) MPI_Type_free(t);
}

/* ------------------------------------------------------------------ values */

/* Element values whose sums and products are exact in any order (small integers and
 * halves), so the device result must equal the host one bit for bit whatever order a
 * reduction takes. Without an op, random bytes. */
static inline void coll_fill(void *buf, size_t count, MPI_Datatype base, MPI_Op op, uint64_t seed) {
    static const double halves[8] = {-2.0, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0, 3.0};
    MPI_Aint lb, ext;
    MPI_Type_get_extent(base, &lb, &ext);
    if (op == MPI_OP_NULL) {
        mt_fill(buf, count * (size_t)ext, seed);
        return;
    }
    for (size_t i = 0; i < count; ++i) {
        unsigned b = mt_byte(seed, i), c = mt_byte(seed + 7, i);
        if (base == MPI_INT)
            ((int *)buf)[i] = (int)(b % 17) - 8;
        else if (base == MPI_FLOAT)
            ((float *)buf)[i] = (float)halves[b % 8];
        else if (base == MPI_DOUBLE)
            ((double *)buf)[i] = halves[b % 8];
        else if (base == MPI_2INT) {
            ((int *)buf)[2 * i] = (int)(b % 9) - 4;
            ((int *)buf)[2 * i + 1] = (int)(c % 5);
        } else
            mt_fill((unsigned char *)buf + i * (size_t)ext, (size_t)ext, seed + i);
    }
}

/* `got` equals `want` (n bytes of elements of `ext` bytes); names the first difference. */
static inline void coll_check_same(const unsigned char *got, const unsigned char *want, size_t n, size_t ext,
                                   const char *what) {
    if (!n || memcmp(got, want, n) == 0) return;
    size_t i = 0;
    while (got[i] == want[i]) ++i;
    MT_CHECK(0, "%s: first wrong byte at %zu of %zu (element %zu): 0x%02x, expected 0x%02x", what, i, n,
             ext ? i / ext : 0, got[i], want[i]);
}

/* ------------------------------------------------------------------ errors and waits */

/* rc is MPI_SUCCESS; otherwise the case fails with the error string. Returns rc == 0. */
static inline int coll_ok(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return 1;
    char s[MPI_MAX_ERROR_STRING + 1] = "";
    int len = 0;
    MPI_Error_string(rc, s, &len);
    MT_CHECK(0, "%s: class %d: %s", what, p2p_class(rc), s);
    return 0;
}

/* Ends the whole job, naming the case: a request that never completes cannot be freed. */
static inline void coll_bail(const char *what) {
    fprintf(stderr, "# [rank %d] %s: %s\n", mt_rank, mt_case_name ? mt_case_name : "setup", what);
    printf("Bail out! rank %d: %s: %s\n", mt_rank, mt_case_name ? mt_case_name : "setup", what);
    fflush(stdout);
    MPI_Abort(W, 3);
}

/* Completes *q by MPI_Test (PMPI_Test where `pmpi`), bounded; a failed completion fails
 * the case. */
static inline int coll_wait(MPI_Request *q, int pmpi, const char *what) {
    double end = MPI_Wtime() + COLL_WAIT_S;
    int flag = 0;
    while (!flag) {
        MPI_Status st;
        int rc = pmpi ? PMPI_Test(q, &flag, &st) : MPI_Test(q, &flag, &st);
        if (!coll_ok(rc, what)) return 0;
        if (!flag && MPI_Wtime() > end) coll_bail("a collective request still pending after 60 s");
    }
    return 1;
}

static char coll_watch_msg[256];
static size_t coll_watch_len;
static void coll_watchdog(int sig) {
    (void)sig;
    ssize_t w = write(STDOUT_FILENO, coll_watch_msg, coll_watch_len);
    w = write(STDERR_FILENO, coll_watch_msg, coll_watch_len);
    (void)w;
    _exit(124);
}

/* One named case, or its skip line (all ranks call it alike). A case that hangs (ranks
 * that disagree about a collective) ends the job with a line naming it. */
static inline void coll_case(const char *name, const char *skip_why, void (*fn)(const void *), const void *arg) {
    const char *only = getenv("COLL_ONLY");
    if (only && *only && !strstr(name, only)) return;
    if (coll_skip_all || skip_why) {
        mt_skip(name, coll_skip_all ? coll_skip_all : skip_why);
        return;
    }
    coll_watch_len = (size_t)snprintf(coll_watch_msg, sizeof coll_watch_msg,
                                      "Bail out! rank %d: case %s did not finish within %u s (hang?)\n", mt_rank, name,
                                      COLL_CASE_LIMIT_S);
    if (coll_watch_len >= sizeof coll_watch_msg) coll_watch_len = sizeof coll_watch_msg - 1;
    signal(SIGALRM, coll_watchdog);
    alarm(COLL_CASE_LIMIT_S);
    MT_CASE(name) fn(arg);
    alarm(0);
}

#endif
