/* MPI_Reduce_local on cl_mem buffers (reduce_local_cases.h): every (op, type) pair MPI
 * defines, against MPICH on host copies; pairs it does not define refused. Also: the
 * kernel runs after work already on the user's queue (a non-blocking write just before
 * the call), and buffers given as an offset into a larger cl_mem (MPIX_ACC_OFFSET).
 * MPIACC-TEST-RANKS: 1 */
#include "opencl_util.h"
#include "reduce_local_cases.h"

static ocl_env env;

static void *cl_alloc_buf(size_t bytes) { return (void *)ocl_alloc(&env, bytes); }
static void cl_put(void *dev, const void *host, size_t bytes) { ocl_write(&env, (cl_mem)dev, 0, host, bytes); }
static void cl_get(void *dev, void *host, size_t bytes) { ocl_read(&env, (cl_mem)dev, 0, host, bytes); }
static void cl_release(void *dev) { clReleaseMemObject((cl_mem)dev); }
static MPI_Datatype cl_tag(MPI_Datatype base) {
    MPI_Datatype t;
    MPI_Type_dup(base, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_OPENCL);
    MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)env.queue);
    return t;
}

static int has_fp64(cl_device_id device) {
    char ext[8192] = {0};
    clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL);
    return strstr(ext, "cl_khr_fp64") != NULL;
}

/* A write enqueued without waiting, then the call: the sum sees the written values. */
static void ordered_after_queue(void) {
    MT_CASE("MPI_Reduce_local on cl_mem: runs after work already on the user's queue") {
        enum { N = 1 << 16 };
        static int a[N], b[N], got[N];
        for (int i = 0; i < N; ++i) a[i] = i, b[i] = 3 * i;
        cl_mem din = ocl_alloc(&env, sizeof a), dio = ocl_alloc(&env, sizeof b);
        ocl_fill(&env, din, sizeof a, 0);
        ocl_fill(&env, dio, sizeof b, 0);
        clEnqueueWriteBuffer(env.queue, din, CL_FALSE, 0, sizeof a, a, 0, NULL, NULL);
        clEnqueueWriteBuffer(env.queue, dio, CL_FALSE, 0, sizeof b, b, 0, NULL, NULL);
        MPI_Datatype t = cl_tag(MPI_INT);
        int rc = MPI_Reduce_local(din, dio, N, t, MPI_SUM);
        MT_CHECK(rc == MPI_SUCCESS, "MPI_Reduce_local failed");
        ocl_read(&env, dio, 0, got, sizeof got);
        int bad = -1;
        for (int i = 0; i < N && bad < 0; ++i)
            if (got[i] != 4 * i) bad = i;
        MT_CHECK(bad < 0, "element %d is %d, not %d", bad, bad < 0 ? 0 : got[bad], 4 * bad);
        MPI_Type_free(&t);
        clReleaseMemObject(din);
        clReleaseMemObject(dio);
    }
}

/* Both buffers at MPIX_ACC_OFFSET 64 of their cl_mem: the bytes before and after stay. */
static void at_an_offset(void) {
    MT_CASE("MPI_Reduce_local on cl_mem: buffers at an offset, bytes around them untouched") {
        enum { N = 100, OFF = 64 };
        unsigned char before[OFF + N * 8 + OFF], after[sizeof before];
        long long a[N], want[N];
        for (int i = 0; i < N; ++i) a[i] = -i * 1000003LL, want[i] = i * 7LL;
        memset(before, 0xa5, sizeof before);
        memcpy(before + OFF, want, sizeof want);
        cl_mem din = ocl_alloc(&env, sizeof before), dio = ocl_alloc(&env, sizeof before);
        ocl_fill(&env, din, sizeof before, 0x5a);
        ocl_write(&env, din, OFF, a, sizeof a);
        ocl_write(&env, dio, 0, before, sizeof before);
        MPI_Datatype t = cl_tag(MPI_LONG_LONG);
        MPI_Type_set_attr(t, MPIX_ACC_OFFSET, (void *)(long)OFF);
        int rc = MPI_Reduce_local(din, dio, N, t, MPI_MIN);
        MT_CHECK(rc == MPI_SUCCESS, "MPI_Reduce_local failed");
        PMPI_Reduce_local(a, want, N, MPI_LONG_LONG, MPI_MIN);
        ocl_read(&env, dio, 0, after, sizeof after);
        memcpy(before + OFF, want, sizeof want);
        MT_CHECK(memcmp(before, after, sizeof after) == 0, "the result or the bytes around it differ");
        MPI_Type_free(&t);
        clReleaseMemObject(din);
        clReleaseMemObject(dio);
    }
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    env = ocl_setup();
    if (!ocl_all_ok(&env)) {
        rl_skip_all("cl_mem", "no usable OpenCL platform");
        mt_skip("MPI_Reduce_local on cl_mem: runs after work already on the user's queue", "no usable OpenCL platform");
        mt_skip("MPI_Reduce_local on cl_mem: buffers at an offset, bytes around them untouched",
                "no usable OpenCL platform");
        ocl_teardown(&env);
        return mt_finalize();
    }
    rl_backend be = {"cl_mem", cl_alloc_buf, cl_put, cl_get, cl_release, cl_tag, has_fp64(env.device)};
    rl_run_all(&be);
    ordered_after_queue();
    at_an_offset();
    ocl_teardown(&env);
    return mt_finalize();
}
