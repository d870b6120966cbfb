/* Bad CUDA buffer descriptions give a clear MPI error and no crash: the exact error class
 * (MPI_Error_class), an error string that names the call, no message sent, no receive
 * posted, no CUDA error left behind for the application; and a normal device transfer
 * works right after. Errors are local to the caller, so both ranks make their bad calls
 * (sends to the peer on BAD_TAG, receives from it), then meet in a barrier, check that
 * nothing arrived on BAD_TAG, and exchange good device messages.
 *
 * Bad calls that could block if the library wrongly accepted them are avoided: blocking
 * sends carry 1000 bytes (eager at every layer), receives are nonblocking, and a bad
 * MPI_Isend / MPI_Irecv that wrongly succeeds is cancelled.
 * MPIACC-TEST-RANKS: 2 */
#include "gpu_util.h"

#define W MPI_COMM_WORLD
#define BAD_TAG 66
#define SMALL 1000
#define LARGE (1 * MiB)

/* ------------------------------------------------------------------ checks */

/* rc must be an error of class `want` whose string names `call`. */
static void expect_error(int rc, int want, const char *call, const char *what) {
    if (rc == MPI_SUCCESS) {
        MT_CHECK(0, "%s: %s returned MPI_SUCCESS, expected %s", what, call, gpu_class_name(want));
        return;
    }
    int cls = gpu_err_class(rc);
    char s[MPI_MAX_ERROR_STRING];
    gpu_err_string(rc, s);
    for (char *c = s; *c; ++c) /* one line, for TAP */
        if (*c == '\n') *c = ' ';
    MT_CHECK(cls == want, "%s: %s gave %s (%d), expected %s: \"%s\"", what, call, gpu_class_name(cls), cls,
             gpu_class_name(want), s);
    MT_CHECK(strstr(s, call) != NULL, "%s: the error string does not name %s: \"%s\"", what, call, s);
    if (mt_rank == 0) printf("# %s -> %s: %s\n", call, gpu_class_name(cls), s);
}

/* A request that should not exist: cancel it, bounded. */
static void discard_request(MPI_Request *r, const char *what) {
    if (*r == MPI_REQUEST_NULL) return;
    MPI_Cancel(r);
    MPI_Status st;
    double end = MPI_Wtime() + 10.0;
    int flag = 0;
    while (!flag && MPI_Wtime() < end) MPI_Test(r, &flag, &st);
    if (!flag) gpu_die(__FILE__, __LINE__, "%s: a wrongly accepted request could not be cancelled", what);
}

/* Bad send calls on (buf, type): MPI_Send of `small` elements, MPI_Isend of `large`
 * elements, and MPI_Irecv of `large` elements when recv_too. Each must fail with `want`. */
static void bad_calls(void *buf, MPI_Datatype type, int small, int large, int want, int recv_too,
                      const char *what) {
    MPI_Request r = MPI_REQUEST_NULL;
    if (small > 0) expect_error(MPI_Send(buf, small, type, gpu_peer, BAD_TAG, W), want, "MPI_Send", what);
    int rc = MPI_Isend(buf, large, type, gpu_peer, BAD_TAG, W, &r);
    expect_error(rc, want, "MPI_Isend", what);
    if (rc == MPI_SUCCESS) discard_request(&r, what);
    if (recv_too) {
        r = MPI_REQUEST_NULL;
        rc = MPI_Irecv(buf, large, type, gpu_peer, BAD_TAG, W, &r);
        expect_error(rc, want, "MPI_Irecv", what);
        if (rc == MPI_SUCCESS) discard_request(&r, what);
    }
}

/* After the bad calls: no CUDA error left for the application, nothing arrived on
 * BAD_TAG, and a normal device transfer each way works. */
static void after_errors(int tag) {
    cudaError_t last = cudaGetLastError();
    MT_CHECK(last == cudaSuccess, "a CUDA error was left behind for the application: %s", cudaGetErrorName(last));
    MCK(MPI_Barrier(W));
    double end = MPI_Wtime() + 0.2;
    int flag = 0;
    MPI_Status st;
    while (!flag && MPI_Wtime() < end) MCK(MPI_Iprobe(MPI_ANY_SOURCE, BAD_TAG, W, &flag, &st));
    MT_CHECK(!flag, "a failed call sent a message (%d bytes from rank %d)", gpu_count_bytes(&st), st.MPI_SOURCE);
    if (flag) { /* drain it so later cases are not disturbed */
        int n = gpu_count_bytes(&st);
        void *h = malloc(n > 0 ? (size_t)n : 1);
        MPI_Recv(h, n > 0 ? n : 0, MPI_BYTE, st.MPI_SOURCE, BAD_TAG, W, MPI_STATUS_IGNORE);
        free(h);
    }
    MCK(MPI_Barrier(W));

    MPI_Datatype cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    const size_t n1 = MiB + 3, n2 = 100;
    unsigned char *d1 = gpu_malloc(n1 + GPU_GUARD), *d2 = gpu_malloc(n2 + GPU_GUARD);
    MPI_Status s;
    if (mt_rank == 0) {
        MPI_Request r;
        gpu_upload(d1, gpu_ref + gpu_offset(tag), n1);
        MCK(MPI_Isend(d1, (int)n1, cuda_t, 1, tag, W, &r));
        gpu_wait(&r, MPI_STATUS_IGNORE, "good Isend after errors");
        gpu_memset(d2, GPU_SENTINEL, n2 + GPU_GUARD);
        MCK(MPI_Recv(d2, (int)n2, cuda_t, 1, tag + 1, W, &s));
        GPU_CHECK_STATUS(s, 1, tag + 1, n2, "good device message after errors");
        const unsigned char *got = gpu_download(d2, n2 + GPU_GUARD);
        GPU_CHECK_SAME(got, gpu_ref + gpu_offset(tag + 1), n2, "good 100-byte device message after errors");
        GPU_CHECK_UNTOUCHED(got + n2, GPU_GUARD, GPU_SENTINEL, "past the good message");
    } else {
        gpu_memset(d1, GPU_SENTINEL, n1 + GPU_GUARD);
        MCK(MPI_Recv(d1, (int)n1, MPI_CHAR, 0, tag, W, &s));
        GPU_CHECK_STATUS(s, 0, tag, n1, "good device message after errors");
        const unsigned char *got = gpu_download(d1, n1 + GPU_GUARD);
        GPU_CHECK_SAME(got, gpu_ref + gpu_offset(tag), n1, "good 1 MiB + 3 device message after errors");
        GPU_CHECK_UNTOUCHED(got + n1, GPU_GUARD, GPU_SENTINEL, "past the good message");
        gpu_upload(d2, gpu_ref + gpu_offset(tag + 1), n2);
        MCK(MPI_Send(d2, (int)n2, MPI_CHAR, 0, tag + 1, W));
    }
    CK(cudaFree(d1));
    CK(cudaFree(d2));
    MCK(MPI_Type_free(&cuda_t));
}

/* ------------------------------------------------------------------ cases */

static void c_freed_device_pointer(void) {
    MPI_Datatype cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    /* never seen by MPI-ACC */
    void *p = gpu_malloc(LARGE);
    CK(cudaFree(p));
    bad_calls(p, cuda_t, SMALL, (int)LARGE, MPI_ERR_BUFFER, 1, "freed device pointer, never used before");
    /* used for a transfer first (its range is cached, the peer may hold an IPC mapping) */
    void *q = gpu_malloc(LARGE), *qr = gpu_malloc(LARGE);
    gpu_upload(q, gpu_ref, LARGE);
    MCK(MPI_Sendrecv(q, (int)LARGE, cuda_t, gpu_peer, 10, qr, (int)LARGE, cuda_t, gpu_peer, 10, W,
                     MPI_STATUS_IGNORE));
    CK(cudaFree(q));
    CK(cudaFree(qr));
    bad_calls(q, cuda_t, SMALL, (int)LARGE, MPI_ERR_BUFFER, 1, "freed device pointer, sent from before");
    bad_calls((char *)qr + 4096, cuda_t, SMALL, (int)SMALL, MPI_ERR_BUFFER, 1,
              "interior of a freed device allocation, received into before");
    MCK(MPI_Type_free(&cuda_t));
    after_errors(100);
}

static void c_host_pointer_tagged_cuda(void) {
    MPI_Datatype cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    unsigned char *h = malloc(LARGE);
    if (!h) gpu_die(__FILE__, __LINE__, "out of memory");
    memset(h, 1, LARGE);
    unsigned char stack[SMALL];
    memset(stack, 1, sizeof stack);
    bad_calls(h, cuda_t, SMALL, (int)LARGE, MPI_ERR_BUFFER, 1, "malloc pointer tagged MPIX_ACC_BUF_CUDA");
    bad_calls(stack, cuda_t, SMALL, SMALL, MPI_ERR_BUFFER, 1, "stack array tagged MPIX_ACC_BUF_CUDA");
    free(h);
    MCK(MPI_Type_free(&cuda_t));
    after_errors(200);
}

static void c_stream_of_another_device(void) {
    int other = (gpu_dev + 1) % gpu_ndev;
    cudaStream_t s;
    CK(cudaSetDevice(other));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaSetDevice(gpu_dev));
    void *d = gpu_malloc(LARGE);
    gpu_memset(d, 1, LARGE);
    MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    MCK(MPI_Type_set_attr(t, MPIX_ACC_STREAM, (void *)s));
    char what[120];
    snprintf(what, sizeof what, "memory of device %d with a stream of device %d", gpu_dev, other);
    bad_calls(d, t, SMALL, (int)LARGE, MPI_ERR_ARG, 1, what);
    int dev = -1;
    CK(cudaGetDevice(&dev));
    MT_CHECK(dev == gpu_dev, "the current device changed from %d to %d", gpu_dev, dev);
    MCK(MPI_Type_free(&t));
    CK(cudaFree(d));
    CK(cudaStreamDestroy(s));
    after_errors(300);
}

static void c_count_past_end(void) {
    /* 2 MiB: a whole number of allocation granules, so the range the driver reports is
     * exactly what was asked for */
    const size_t n = 2 * MiB;
    unsigned char *d = gpu_malloc(n);
    gpu_memset(d, 1, n);
    MPI_Datatype cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    bad_calls(d, cuda_t, 0, (int)n + 1, MPI_ERR_COUNT, 1, "tagged, one byte past the end");
    bad_calls(d + n - 100, cuda_t, SMALL, SMALL, MPI_ERR_COUNT, 1, "tagged, 900 bytes past the end from inside");
    bad_calls(d, MPI_CHAR, 0, (int)n + 1, MPI_ERR_COUNT, 1, "untagged MPI_CHAR, one byte past the end");
    bad_calls(d + n - 8, MPI_DOUBLE, 2, (int)(n / 8), MPI_ERR_COUNT, 1, "untagged MPI_DOUBLE, past the end");
    MCK(MPI_Type_free(&cuda_t));
    CK(cudaFree(d));
    after_errors(400);
}

static void c_unknown_buf_type(void) {
    static const intptr_t values[] = {42, 0, -1, 4};
    void *d = gpu_malloc(LARGE);
    gpu_memset(d, 1, LARGE);
    for (int i = 0; i < 4; ++i) {
        MPI_Datatype t;
        MCK(MPI_Type_dup(MPI_CHAR, &t));
        MCK(MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)values[i]));
        char what[80];
        snprintf(what, sizeof what, "MPIX_ACC_BUF_TYPE = %ld", (long)values[i]);
        bad_calls(d, t, SMALL, (int)LARGE, MPI_ERR_ARG, 1, what);
        MCK(MPI_Type_free(&t));
    }
    CK(cudaFree(d));
    after_errors(500);
}

static void c_device_attr_not_an_ordinal(void) {
    const intptr_t values[] = {99, -1, gpu_ndev};
    void *d = gpu_malloc(LARGE);
    gpu_memset(d, 1, LARGE);
    for (int i = 0; i < 3; ++i) {
        MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
        MCK(MPI_Type_set_attr(t, MPIX_ACC_DEVICE, (void *)values[i]));
        char what[80];
        snprintf(what, sizeof what, "MPIX_ACC_DEVICE = %ld with %d device(s)", (long)values[i], gpu_ndev);
        bad_calls(d, t, SMALL, (int)LARGE, MPI_ERR_ARG, 1, what);
        MCK(MPI_Type_free(&t));
    }
    CK(cudaFree(d));
    after_errors(600);
}

static void c_device_attr_names_another_device(void) {
    int other = (gpu_dev + 1) % gpu_ndev;
    void *d = gpu_malloc(LARGE);
    gpu_memset(d, 1, LARGE);
    MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    MCK(MPI_Type_set_attr(t, MPIX_ACC_DEVICE, (void *)(intptr_t)other));
    char what[80];
    snprintf(what, sizeof what, "memory of device %d, MPIX_ACC_DEVICE = %d", gpu_dev, other);
    bad_calls(d, t, SMALL, (int)LARGE, MPI_ERR_ARG, 1, what);
    MCK(MPI_Type_free(&t));
    CK(cudaFree(d));
    after_errors(700);
}

static void c_opencl_attrs_on_cuda_buffer(void) {
    static void *readable_dummy[16]; /* never an OpenCL object; readable if inspected */
    void *d = gpu_malloc(LARGE);
    gpu_memset(d, 1, LARGE);
    MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    MCK(MPI_Type_set_attr(t, MPIX_ACC_OFFSET, (void *)(intptr_t)16));
    bad_calls(d, t, SMALL, (int)LARGE, MPI_ERR_ARG, 1, "MPIX_ACC_OFFSET on a MPIX_ACC_BUF_CUDA buffer");
    MCK(MPI_Type_free(&t));
    t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    MCK(MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)readable_dummy));
    bad_calls(d, t, SMALL, (int)LARGE, MPI_ERR_ARG, 1, "MPIX_ACC_COMMAND_QUEUE on a MPIX_ACC_BUF_CUDA buffer");
    MCK(MPI_Type_free(&t));
    CK(cudaFree(d));
    after_errors(800);
}

static void c_stream_being_captured(void) {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *d = gpu_malloc(LARGE);
    gpu_memset(d, 1, LARGE);
    MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    MCK(MPI_Type_set_attr(t, MPIX_ACC_STREAM, (void *)s));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    /* only nonblocking calls: nothing here may wait on the capturing stream */
    bad_calls(d, t, 0, (int)LARGE, MPI_ERR_ARG, 1, "MPIX_ACC_STREAM being captured into a CUDA graph");
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(s, &g);
    MT_CHECK(e == cudaSuccess, "cudaStreamEndCapture: %s (the failed calls invalidated the user's capture)",
             cudaGetErrorName(e));
    (void)cudaGetLastError();
    if (g) CK(cudaGraphDestroy(g));
    CK(cudaStreamSynchronize(s));
    MCK(MPI_Type_free(&t));
    CK(cudaFree(d));
    CK(cudaStreamDestroy(s));
    after_errors(900);
}

static void c_stream_on_host_tagged_buffer(void) {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned char *h = malloc(LARGE);
    if (!h) gpu_die(__FILE__, __LINE__, "out of memory");
    memset(h, 1, LARGE);
    MPI_Datatype t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_HOST);
    MCK(MPI_Type_set_attr(t, MPIX_ACC_STREAM, (void *)s));
    bad_calls(h, t, SMALL, (int)LARGE, MPI_ERR_ARG, 1, "MPIX_ACC_STREAM on a MPIX_ACC_BUF_HOST buffer");
    MCK(MPI_Type_free(&t));
    /* no buffer type: the stream says CUDA, the pointer query says host */
    MCK(MPI_Type_dup(MPI_CHAR, &t));
    MCK(MPI_Type_set_attr(t, MPIX_ACC_STREAM, (void *)s));
    bad_calls(h, t, SMALL, (int)LARGE, MPI_ERR_BUFFER, 1, "MPIX_ACC_STREAM without buffer type on host memory");
    MCK(MPI_Type_free(&t));
    free(h);
    CK(cudaStreamDestroy(s));
    after_errors(1000);
}

/* cudaMalloc hands freed addresses out again. A freed pointer that MPI-ACC was shown
 * (and found to be no device memory) must not make memory later allocated at that address
 * look like host memory to pointer query: untagged MPI_CHAR exchange in memory of the
 * freed allocation's size. Last of all, because a wrong answer here can crash the rank
 * (host code touching device memory). */
static void c_realloc_at_probed_freed_address(void) {
    MPI_Datatype cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    void *p = gpu_malloc(LARGE), *pr = gpu_malloc(LARGE);
    CK(cudaFree(p));
    CK(cudaFree(pr));
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Isend(p, (int)LARGE, cuda_t, gpu_peer, BAD_TAG, W, &r);
    expect_error(rc, MPI_ERR_BUFFER, "MPI_Isend", "freed device pointer");
    if (rc == MPI_SUCCESS) discard_request(&r, "freed device pointer");
    rc = MPI_Irecv(pr, (int)LARGE, cuda_t, gpu_peer, BAD_TAG, W, &r);
    expect_error(rc, MPI_ERR_BUFFER, "MPI_Irecv", "freed device pointer");
    if (rc == MPI_SUCCESS) discard_request(&r, "freed device pointer");
    void *q2 = gpu_malloc(LARGE), *qr2 = gpu_malloc(LARGE);
    int reused = q2 == p || q2 == pr || qr2 == p || qr2 == pr, any = 0;
    MPI_Allreduce(&reused, &any, 1, MPI_INT, MPI_MAX, W);
    if (mt_rank == 0) printf("# new allocations %s the freed, probed addresses\n", any ? "reuse" : "do not reuse");
    gpu_upload(q2, gpu_ref + gpu_offset(11 + mt_rank), LARGE);
    gpu_memset(qr2, GPU_SENTINEL, LARGE);
    MPI_Status st;
    MCK(MPI_Sendrecv(q2, (int)LARGE, MPI_CHAR, gpu_peer, 11, qr2, (int)LARGE, MPI_CHAR, gpu_peer, 11, W, &st));
    GPU_CHECK_STATUS(st, gpu_peer, 11, LARGE, "untagged exchange in reallocated device memory");
    GPU_CHECK_SAME(gpu_download(qr2, LARGE), gpu_ref + gpu_offset(11 + gpu_peer), LARGE,
                   "untagged exchange in reallocated device memory");
    CK(cudaFree(q2));
    CK(cudaFree(qr2));
    MCK(MPI_Type_free(&cuda_t));
    after_errors(1100);
}

/* Collectives take host buffers only (ROADMAP 2): a device pointer, found by pointer
 * query under a plain type or tagged, is refused before MPICH reads it as host memory.
 * Every rank passes one, so every rank fails locally. */
static void c_collectives_refuse_device_buffers(void) {
    int *d = gpu_malloc(64 * sizeof(int)), host[64] = {0};
    MPI_Datatype cuda_t = gpu_tagged(MPI_INT, MPIX_ACC_BUF_CUDA);
    const int autodetect = mpiacc_knob_value("MPIACC_CUDA_AUTODETECT") != 0;
    const MPI_Datatype types[2] = {cuda_t, MPI_INT};
    for (int k = 0; k < (autodetect ? 2 : 1); ++k) {
        MPI_Datatype t = types[k];
        const char *what = k == 0 ? "tagged device buffer" : "device pointer under MPI_INT (autodetect)";
        MPI_Request r = MPI_REQUEST_NULL;
        expect_error(MPI_Allreduce(d, host, 64, t, MPI_SUM, W), MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Allreduce", what);
        expect_error(MPI_Bcast(d, 64, t, 0, W), MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Bcast", what);
        expect_error(MPI_Alltoall(host, 32, MPI_INT, d, 32, t, W), MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Alltoall",
                     what);
        int rc = MPI_Iallgather(d, 32, t, host, 32, MPI_INT, W, &r);
        expect_error(rc, MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Iallgather", what);
        if (rc == MPI_SUCCESS) MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    MCK(MPI_Type_free(&cuda_t));
    CK(cudaFree(d));
    after_errors(1300);
}

/* One-sided calls take host memory only: a device window base (found by pointer query)
 * and a device origin buffer (tagged, or found under MPI_INT) are refused. */
static void c_rma_refuses_device_buffers(void) {
    int *d = gpu_malloc(64 * sizeof(int));
    const int autodetect = mpiacc_knob_value("MPIACC_CUDA_AUTODETECT") != 0;
    MPI_Win win;
    if (autodetect)
        expect_error(MPI_Win_create(d, 64 * sizeof(int), sizeof(int), MPI_INFO_NULL, W, &win),
                     MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Win_create", "device window base");
    int *mem = NULL;
    MCK(MPI_Win_allocate(64 * sizeof(int), sizeof(int), MPI_INFO_NULL, W, &mem, &win));
    MCK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Datatype cuda_t = gpu_tagged(MPI_INT, MPIX_ACC_BUF_CUDA);
    MCK(MPI_Win_fence(0, win));
    expect_error(MPI_Put(d, 4, cuda_t, gpu_peer, 0, 4, MPI_INT, win), MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Put",
                 "tagged device origin");
    if (autodetect)
        expect_error(MPI_Get(d, 4, MPI_INT, gpu_peer, 0, 4, MPI_INT, win), MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Get",
                     "device origin under MPI_INT (autodetect)");
    MCK(MPI_Win_fence(0, win));
    MCK(MPI_Type_free(&cuda_t));
    MCK(MPI_Win_free(&win));
    CK(cudaFree(d));
    after_errors(1400);
}

static const gpu_case_t cases[] = {
    {"one_sided_calls_refuse_device_buffers_with_unsupported_operation", c_rma_refuses_device_buffers, 0},
    {"collectives_refuse_device_buffers_with_unsupported_operation", c_collectives_refuse_device_buffers, 0},
    {"host_pointer_tagged_cuda_gives_err_buffer", c_host_pointer_tagged_cuda, 0},
    {"stream_of_another_device_gives_err_arg", c_stream_of_another_device, 1},
    {"count_past_end_of_device_allocation_gives_err_count", c_count_past_end, 0},
    {"unknown_buf_type_value_gives_err_arg", c_unknown_buf_type, 0},
    {"device_attribute_that_is_no_cuda_ordinal_gives_err_arg", c_device_attr_not_an_ordinal, 0},
    {"device_attribute_naming_another_device_gives_err_arg", c_device_attr_names_another_device, 1},
    {"opencl_only_attributes_on_cuda_buffer_give_err_arg", c_opencl_attrs_on_cuda_buffer, 0},
    {"stream_being_captured_into_graph_gives_err_arg", c_stream_being_captured, 0},
    {"stream_attribute_on_host_buffer_gives_err_arg_or_err_buffer", c_stream_on_host_tagged_buffer, 0},
    /* last: these probe freed device addresses, which cudaMalloc may hand out again */
    {"freed_device_pointer_tagged_cuda_gives_err_buffer", c_freed_device_pointer, 0},
    {"device_memory_reallocated_at_a_probed_freed_address_is_found_by_autodetect",
     c_realloc_at_probed_freed_address, 0},
};

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    gpu_setup(-1);
    gpu_run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    gpu_teardown();
    return mt_finalize();
}
