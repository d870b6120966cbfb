/* Across programming models (dissertation Fig. 4.1b): CUDA device memory on one rank,
 * an OpenCL cl_mem (described by MPIX_ACC_COMMAND_QUEUE) on the other, both ways,
 * blocking and nonblocking, with MPIX_ACC_OFFSET, and an OpenCL send ordered after a
 * pending write through MPIX_ACC_EVENT. Sizes 1, 200 (the envelope length), 1 MiB + 3
 * and 16 MiB; every byte checked, and GPU_GUARD bytes after each receive untouched.
 *
 * OpenCL platform: the one whose name contains $MPIACC_OPENCL_PLATFORM, else the first
 * with a GPU device; device rank % devices. Skips by name when CUDA or OpenCL is
 * unavailable on either rank (MPIX_Query_cuda_support, MPIX_Query_opencl_support).
 * MPIACC-TEST-RANKS: 2 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "gpu_util.h"

#define W MPI_COMM_WORLD

static const size_t sizes[] = {1, 200, MiB + 3, 16 * MiB};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static cl_device_id cl_dev;
static cl_context cl_ctx;
static cl_command_queue cl_q;

#define CLCK(call)                                                                                 \
    do {                                                                                           \
        cl_int clck_e_ = (call);                                                                   \
        if (clck_e_ != CL_SUCCESS) gpu_die(__FILE__, __LINE__, "%s: OpenCL error %d", #call, (int)clck_e_); \
    } while (0)

/* Picks the platform and device and makes a context and an in-order queue; 0 with *why
 * where that cannot be done here. */
static int cl_setup(char *why, size_t len) {
    if (!MPIX_Query_opencl_support()) {
        snprintf(why, len, "no usable OpenCL platform (MPIX_Query_opencl_support() = 0)");
        return 0;
    }
    cl_platform_id ps[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, ps, &np) != CL_SUCCESS || np == 0) {
        snprintf(why, len, "clGetPlatformIDs found no platform");
        return 0;
    }
    if (np > 16) np = 16;
    const char *want = getenv("MPIACC_OPENCL_PLATFORM");
    char name[256] = "";
    for (cl_uint i = 0; i < np; ++i) {
        memset(name, 0, sizeof name);
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
        if (want && *want && !strstr(name, want)) continue;
        cl_device_type type = (want && *want) ? CL_DEVICE_TYPE_ALL : CL_DEVICE_TYPE_GPU;
        cl_uint nd = 0;
        if (clGetDeviceIDs(ps[i], type, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
        cl_device_id ds[16];
        if (nd > 16) nd = 16;
        CLCK(clGetDeviceIDs(ps[i], type, nd, ds, NULL));
        cl_dev = ds[mt_rank % nd];
        cl_int err;
        cl_ctx = clCreateContext(NULL, 1, &cl_dev, NULL, NULL, &err);
        if (err != CL_SUCCESS) {
            snprintf(why, len, "clCreateContext on \"%s\": error %d", name, (int)err);
            return 0;
        }
        cl_q = clCreateCommandQueue(cl_ctx, cl_dev, 0, &err);
        if (err != CL_SUCCESS) {
            snprintf(why, len, "clCreateCommandQueue on \"%s\": error %d", name, (int)err);
            return 0;
        }
        char dname[128] = "";
        clGetDeviceInfo(cl_dev, CL_DEVICE_NAME, sizeof dname - 1, dname, NULL);
        snprintf(why, len, "OpenCL platform \"%.100s\", device %u of %u \"%.100s\"", name, mt_rank % nd, nd, dname);
        return 1;
    }
    if (want && *want)
        snprintf(why, len, "no OpenCL platform named like MPIACC_OPENCL_PLATFORM=\"%s\" with a device", want);
    else
        snprintf(why, len, "no OpenCL platform with a GPU device (MPIACC_OPENCL_PLATFORM picks another)");
    return 0;
}

static cl_mem cl_alloc(size_t n) {
    cl_int err;
    cl_mem m = clCreateBuffer(cl_ctx, CL_MEM_READ_WRITE, n ? n : 1, NULL, &err);
    if (err != CL_SUCCESS) gpu_die(__FILE__, __LINE__, "clCreateBuffer(%zu): error %d", n, (int)err);
    return m;
}
static void cl_put(cl_mem m, size_t off, const void *src, size_t n) {
    if (n) CLCK(clEnqueueWriteBuffer(cl_q, m, CL_TRUE, off, n, src, 0, NULL, NULL));
}
static void cl_get(cl_mem m, size_t off, void *dst, size_t n) {
    if (n) CLCK(clEnqueueReadBuffer(cl_q, m, CL_TRUE, off, n, dst, 0, NULL, NULL));
}
static void cl_set(cl_mem m, size_t n, unsigned char v) {
    unsigned char *tmp = malloc(n ? n : 1);
    if (!tmp) gpu_die(__FILE__, __LINE__, "out of memory");
    memset(tmp, v, n);
    cl_put(m, 0, tmp, n);
    free(tmp);
}
/* MPI_CHAR tagged MPIX_ACC_BUF_OPENCL on the queue, at `offset` into the cl_mem. */
static MPI_Datatype cl_type(size_t offset, cl_event ev) {
    MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_OPENCL);
    MCK(MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)cl_q));
    if (offset) MCK(MPI_Type_set_attr(t, MPIX_ACC_OFFSET, (void *)(intptr_t)offset));
    if (ev) MCK(MPI_Type_set_attr(t, MPIX_ACC_EVENT, (void *)ev));
    return t;
}

/* The reference offset of message `tag` from rank `from`. */
static size_t ref_off(int tag, int from) { return gpu_offset(tag * 5 + from * 7777); }

/* Host copy of a cl_mem region [0, total): `got` must be gpu_ref bytes in [at, at+n), and
 * GPU_SENTINEL everywhere else. */
static void check_cl(cl_mem m, size_t total, size_t at, size_t n, size_t off, const char *what) {
    cl_get(m, 0, gpu_readback, total);
    GPU_CHECK_UNTOUCHED(gpu_readback, at, GPU_SENTINEL, "%s, %zu bytes: before the offset", what, n);
    GPU_CHECK_SAME(gpu_readback + at, gpu_ref + off, n, "%s, %zu bytes", what, n);
    GPU_CHECK_UNTOUCHED(gpu_readback + at + n, total - at - n, GPU_SENTINEL, "%s, %zu bytes: past the message", what,
                        n);
}
static void check_cuda(const void *d, size_t total, size_t n, size_t off, const char *what) {
    const unsigned char *got = gpu_download(d, total);
    GPU_CHECK_SAME(got, gpu_ref + off, n, "%s, %zu bytes", what, n);
    GPU_CHECK_UNTOUCHED(got + n, total - n, GPU_SENTINEL, "%s, %zu bytes: past the message", what, n);
}

/* ------------------------------------------------------------------ cases */

/* Blocking: rank `from` sends every size from CUDA (cuda_to_cl) or from a cl_mem; the
 * other receives into the other kind. */
static void blocking_across(int cuda_to_cl, int from, int tagbase) {
    MPI_Datatype ct = cl_type(0, NULL), cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    for (int i = 0; i < NSIZES; ++i) {
        size_t n = sizes[i];
        int tag = tagbase + i;
        size_t off = ref_off(tag, from);
        if (mt_rank == from) {
            if (cuda_to_cl) {
                void *d = gpu_malloc(n);
                gpu_upload(d, gpu_ref + off, n);
                MCK(MPI_Send(d, (int)n, cuda_t, gpu_peer, tag, W));
                CK(cudaFree(d));
            } else {
                cl_mem m = cl_alloc(n);
                cl_put(m, 0, gpu_ref + off, n);
                MCK(MPI_Send(m, (int)n, ct, gpu_peer, tag, W));
                CLCK(clReleaseMemObject(m));
            }
        } else {
            MPI_Status st;
            if (cuda_to_cl) {
                cl_mem m = cl_alloc(n + GPU_GUARD);
                cl_set(m, n + GPU_GUARD, GPU_SENTINEL);
                MCK(MPI_Recv(m, (int)n, ct, from, tag, W, &st));
                GPU_CHECK_STATUS(st, from, tag, n, "CUDA -> OpenCL MPI_Recv");
                check_cl(m, n + GPU_GUARD, 0, n, off, "CUDA -> OpenCL");
                CLCK(clReleaseMemObject(m));
            } else {
                void *d = gpu_malloc(n + GPU_GUARD);
                gpu_memset(d, GPU_SENTINEL, n + GPU_GUARD);
                MCK(MPI_Recv(d, (int)n, MPI_CHAR, from, tag, W, &st)); /* found by pointer query */
                GPU_CHECK_STATUS(st, from, tag, n, "OpenCL -> CUDA MPI_Recv");
                check_cuda(d, n + GPU_GUARD, n, off, "OpenCL -> CUDA");
                CK(cudaFree(d));
            }
        }
    }
    MCK(MPI_Type_free(&ct));
    MCK(MPI_Type_free(&cuda_t));
}

static void c_cuda_send_opencl_recv(void) { blocking_across(1, 0, 100); }
static void c_opencl_send_cuda_recv(void) { blocking_across(0, 1, 200); }

/* Both ranks at once: every Irecv posted into one kind, every Isend from the other. */
static void exchange_across(int cuda_to_cl, int tagbase) {
    MPI_Datatype ct = cl_type(0, NULL), cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    cl_mem clm[NSIZES];
    void *dm[NSIZES];
    MPI_Request q[2 * NSIZES];
    MPI_Status sts[2 * NSIZES];
    for (int i = 0; i < NSIZES; ++i) { /* receives */
        size_t n = sizes[i];
        if (cuda_to_cl) {
            clm[i] = cl_alloc(n + GPU_GUARD);
            cl_set(clm[i], n + GPU_GUARD, GPU_SENTINEL);
            MCK(MPI_Irecv(clm[i], (int)n, ct, gpu_peer, tagbase + i, W, &q[i]));
        } else {
            dm[i] = gpu_malloc(n + GPU_GUARD);
            gpu_memset(dm[i], GPU_SENTINEL, n + GPU_GUARD);
            MCK(MPI_Irecv(dm[i], (int)n, cuda_t, gpu_peer, tagbase + i, W, &q[i]));
        }
    }
    void *sd[NSIZES];
    cl_mem sc[NSIZES];
    for (int i = NSIZES - 1; i >= 0; --i) { /* sends, largest first */
        size_t n = sizes[i], off = ref_off(tagbase + i, mt_rank);
        if (cuda_to_cl) {
            sd[i] = gpu_malloc(n);
            gpu_upload(sd[i], gpu_ref + off, n);
            MCK(MPI_Isend(sd[i], (int)n, MPI_CHAR, gpu_peer, tagbase + i, W, &q[NSIZES + i]));
        } else {
            sc[i] = cl_alloc(n);
            cl_put(sc[i], 0, gpu_ref + off, n);
            MCK(MPI_Isend(sc[i], (int)n, ct, gpu_peer, tagbase + i, W, &q[NSIZES + i]));
        }
    }
    gpu_wait_all(2 * NSIZES, q, sts, "CUDA/OpenCL exchange");
    for (int i = 0; i < NSIZES; ++i) {
        size_t n = sizes[i], off = ref_off(tagbase + i, gpu_peer);
        GPU_CHECK_STATUS(sts[i], gpu_peer, tagbase + i, n, "%s MPI_Irecv", cuda_to_cl ? "CUDA -> OpenCL" : "OpenCL -> CUDA");
        if (cuda_to_cl) {
            check_cl(clm[i], n + GPU_GUARD, 0, n, off, "CUDA -> OpenCL, nonblocking");
            CLCK(clReleaseMemObject(clm[i]));
            CK(cudaFree(sd[i]));
        } else {
            check_cuda(dm[i], n + GPU_GUARD, n, off, "OpenCL -> CUDA, nonblocking");
            CK(cudaFree(dm[i]));
            CLCK(clReleaseMemObject(sc[i]));
        }
    }
    MCK(MPI_Type_free(&ct));
    MCK(MPI_Type_free(&cuda_t));
}

static void c_exchange_cuda_to_opencl(void) { exchange_across(1, 300); }
static void c_exchange_opencl_to_cuda(void) { exchange_across(0, 400); }

/* MPIX_ACC_OFFSET: rank 0 (CUDA) -> rank 1 into a cl_mem at offset 4096, then rank 1
 * sends from a cl_mem at offset 4096 -> rank 0 (CUDA). */
static void c_offset_attribute(void) {
    static const size_t osz[] = {1, 200, MiB + 3};
    const size_t at = 4096;
    MPI_Datatype ct = cl_type(at, NULL), cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    for (int i = 0; i < 3; ++i) {
        size_t n = osz[i];
        int tag = 500 + i;
        size_t total = at + n + GPU_GUARD;
        MPI_Status st;
        /* CUDA -> cl_mem at offset */
        if (mt_rank == 0) {
            void *d = gpu_malloc(n);
            gpu_upload(d, gpu_ref + ref_off(tag, 0), n);
            MCK(MPI_Send(d, (int)n, cuda_t, 1, tag, W));
            CK(cudaFree(d));
        } else {
            cl_mem m = cl_alloc(total);
            cl_set(m, total, GPU_SENTINEL);
            MCK(MPI_Recv(m, (int)n, ct, 0, tag, W, &st));
            GPU_CHECK_STATUS(st, 0, tag, n, "receive at MPIX_ACC_OFFSET");
            check_cl(m, total, at, n, ref_off(tag, 0), "CUDA -> OpenCL at offset 4096");
            CLCK(clReleaseMemObject(m));
        }
        /* cl_mem at offset -> CUDA */
        if (mt_rank == 1) {
            cl_mem m = cl_alloc(at + n);
            cl_set(m, at + n, 0x11);
            cl_put(m, at, gpu_ref + ref_off(tag + 50, 1), n);
            MCK(MPI_Send(m, (int)n, ct, 0, tag + 50, W));
            CLCK(clReleaseMemObject(m));
        } else {
            void *d = gpu_malloc(n + GPU_GUARD);
            gpu_memset(d, GPU_SENTINEL, n + GPU_GUARD);
            MCK(MPI_Recv(d, (int)n, MPI_CHAR, 1, tag + 50, W, &st));
            GPU_CHECK_STATUS(st, 1, tag + 50, n, "send from MPIX_ACC_OFFSET");
            check_cuda(d, n + GPU_GUARD, n, ref_off(tag + 50, 1), "OpenCL at offset 4096 -> CUDA");
            CK(cudaFree(d));
        }
    }
    MCK(MPI_Type_free(&ct));
    MCK(MPI_Type_free(&cuda_t));
}

/* MPIX_ACC_EVENT: rank 1 enqueues a write into its cl_mem that waits on a user event,
 * MPI_Isends the cl_mem with the write's event, and for 300 ms the send must not complete
 * (the data is not there yet); then the user event fires and rank 0 (CUDA) gets the
 * written bytes, not the stale ones. */
static void c_opencl_isend_waits_for_event(void) {
    const size_t n = MiB + 3;
    const int tag = 600;
    if (mt_rank == 1) {
        cl_int err;
        cl_mem m = cl_alloc(n);
        cl_set(m, n, 0xee);
        cl_event user = clCreateUserEvent(cl_ctx, &err);
        if (err != CL_SUCCESS) gpu_die(__FILE__, __LINE__, "clCreateUserEvent: error %d", (int)err);
        cl_event written = NULL;
        CLCK(clEnqueueWriteBuffer(cl_q, m, CL_FALSE, 0, n, gpu_ref + ref_off(tag, 1), 1, &user, &written));
        CLCK(clFlush(cl_q));
        MPI_Datatype t = cl_type(0, written);
        MPI_Request r;
        double t0 = MPI_Wtime();
        MCK(MPI_Isend(m, (int)n, t, 0, tag, W, &r));
        double dt = MPI_Wtime() - t0;
        MT_CHECK(dt < 0.1, "MPI_Isend with a pending MPIX_ACC_EVENT took %.3f s (did it wait for the event?)", dt);
        MCK(MPI_Type_free(&t));
        int flag = 0;
        double end = MPI_Wtime() + 0.3;
        while (!flag && MPI_Wtime() < end) MCK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        MT_CHECK(!flag, "the send completed before the write it depends on could run");
        CLCK(clSetUserEventStatus(user, CL_COMPLETE));
        if (!flag) gpu_wait(&r, MPI_STATUS_IGNORE, "Isend after the user event fired");
        CLCK(clFinish(cl_q));
        CLCK(clReleaseEvent(written));
        CLCK(clReleaseEvent(user));
        CLCK(clReleaseMemObject(m));
    } else {
        void *d = gpu_malloc(n + GPU_GUARD);
        gpu_memset(d, GPU_SENTINEL, n + GPU_GUARD);
        MPI_Status st;
        MCK(MPI_Recv(d, (int)n, MPI_CHAR, 1, tag, W, &st));
        GPU_CHECK_STATUS(st, 1, tag, n, "send ordered after an OpenCL event");
        check_cuda(d, n + GPU_GUARD, n, ref_off(tag, 1), "OpenCL send after the event");
        CK(cudaFree(d));
    }
}

static const gpu_case_t cases[] = {
    {"cuda_send_to_opencl_receive_every_size", c_cuda_send_opencl_recv, 0},
    {"opencl_send_to_cuda_receive_every_size", c_opencl_send_cuda_recv, 0},
    {"cuda_isend_to_opencl_irecv_both_ranks_at_once", c_exchange_cuda_to_opencl, 0},
    {"opencl_isend_to_cuda_irecv_both_ranks_at_once", c_exchange_opencl_to_cuda, 0},
    {"opencl_offset_attribute_between_cuda_and_opencl", c_offset_attribute, 0},
    {"opencl_isend_with_event_waits_for_pending_write", c_opencl_isend_waits_for_event, 0},
};

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    gpu_setup(-1);
    if (!gpu_skip_why) {
        static char why[300], first[300];
        int ok = cl_setup(why, sizeof why), all = 0;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        /* rank 0 prints the choice, or the first rank's reason to skip */
        int src = ok ? mt_size : mt_rank, who = 0;
        MPI_Allreduce(&src, &who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all) {
            if (mt_rank == who) memcpy(first, why, sizeof first);
            MPI_Bcast(first, sizeof first, MPI_CHAR, who, MPI_COMM_WORLD);
            snprintf(gpu_skip_buf, sizeof gpu_skip_buf, "%s", first);
            gpu_skip_why = gpu_skip_buf;
        } else if (mt_rank == 0) {
            printf("# rank 0: %s\n", why);
        }
    }
    gpu_run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    if (cl_q) clReleaseCommandQueue(cl_q);
    if (cl_ctx) clReleaseContext(cl_ctx);
    gpu_teardown();
    return mt_finalize();
}
