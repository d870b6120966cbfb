/* A CUDA-aware program that does not synchronise: it writes a device buffer with
 * cudaMemcpy from pageable memory or with cudaMemset (on the legacy or the per-thread
 * default stream) and passes it straight to MPI. MPI-ACC orders its copies after that
 * work. Queued behind a large memset on the same stream, the write is still running when
 * MPI is called, so a transfer that does not wait for it moves stale bytes. Both ranks
 * on device 0, no synchronisation anywhere before an MPI call; cuda_unsynchronised_pipeline
 * runs the same cases with MPIACC_IPC=0.
 * MPIACC-TEST-RANKS: 2 */
#include "gpu_util.h"

#ifndef UNSYNC_NO_IPC
#define UNSYNC_NO_IPC 0
#endif

#define W MPI_COMM_WORLD
#define DELAY_BYTES (512 * MiB)

static const size_t sizes[] = {8, 4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void *delay_buf; /* a large memset here holds the stream for a while */
static unsigned char *pageable;

/* Puts a long memset on `s` (a default stream) ahead of what the case queues next. */
static void hold_stream(cudaStream_t s) { CK(cudaMemsetAsync(delay_buf, 0x11, DELAY_BYTES, s)); }

static unsigned char fill_byte(int k) { return (unsigned char)(0x30 + k); }

static void check_filled(const void *got, size_t n, unsigned char v, const char *what, size_t size) {
    const unsigned char *g = got;
    for (size_t i = 0; i < n; ++i)
        if (g[i] != v) {
            MT_CHECK(0, "%s, %zu bytes: byte %zu is 0x%02x, expected 0x%02x", what, size, i, g[i], v);
            return;
        }
}

/* How the sender writes its device buffer just before the send. */
enum writer { BY_PAGEABLE_MEMCPY, BY_MEMSET, BY_PER_THREAD_MEMSET };

static void write_send_buffer(unsigned char *d, size_t n, enum writer how, int k) {
    switch (how) {
        case BY_PAGEABLE_MEMCPY:
            hold_stream(cudaStreamLegacy);
            memcpy(pageable, gpu_ref + gpu_offset(k), n);
            CK(cudaMemcpy(d, pageable, n, cudaMemcpyHostToDevice));
            break;
        case BY_MEMSET:
            hold_stream(cudaStreamLegacy);
            CK(cudaMemset(d, fill_byte(k), n));
            break;
        case BY_PER_THREAD_MEMSET:
            hold_stream(cudaStreamPerThread);
            CK(cudaMemsetAsync(d, fill_byte(k), n, cudaStreamPerThread));
            break;
    }
}

static void check_received(const void *got, size_t n, enum writer how, int k, const char *what) {
    if (how == BY_PAGEABLE_MEMCPY)
        GPU_CHECK_SAME(got, gpu_ref + gpu_offset(k), n, "%s, %zu bytes", what, n);
    else
        check_filled(got, n, fill_byte(k), what, n);
}

/* Buffers ordered after work still queued on a default stream. */
static long long ordered_count(void) { return mpiacc_counter_value("cuda.capture.default_stream"); }

/* Rank 0 writes its device buffer without synchronising and sends; rank 1 clears its
 * device buffer (or host buffer) the same way and receives into it at once. */
static void device_pair(enum writer how, int nonblocking, int host_receiver, const char *what) {
    const int tag = 9100 + (int)how * 10 + nonblocking * 3 + host_receiver;
    unsigned char *d = gpu_malloc(16 * MiB);
    unsigned char *h = malloc(16 * MiB);
    const long long ordered_before = ordered_count();
    for (size_t i = 0; i < NSIZES; ++i) {
        const size_t n = sizes[i];
        const int k = (int)i + 1;
        MPI_Request r;
        MPI_Status st;
        if (mt_rank == 0) {
            write_send_buffer(d, n, how, k);
            if (nonblocking) {
                MCK(MPI_Isend(d, (int)n, MPI_BYTE, 1, tag, W, &r));
                gpu_wait(&r, MPI_STATUS_IGNORE, what);
            } else {
                MCK(MPI_Send(d, (int)n, MPI_BYTE, 1, tag, W));
            }
            /* The next size's write may begin only once this send has read its data. */
        } else if (host_receiver) {
            memset(h, 0, n);
            if (nonblocking) {
                MCK(MPI_Irecv(h, (int)n, MPI_BYTE, 0, tag, W, &r));
                gpu_wait(&r, &st, what);
            } else {
                MCK(MPI_Recv(h, (int)n, MPI_BYTE, 0, tag, W, &st));
            }
            GPU_CHECK_STATUS(st, 0, tag, n, "%s", what);
            check_received(h, n, how, k, what);
        } else {
            hold_stream(cudaStreamLegacy);
            CK(cudaMemset(d, 0, n)); /* must land before the message, not over it */
            if (nonblocking) {
                MCK(MPI_Irecv(d, (int)n, MPI_BYTE, 0, tag, W, &r));
                gpu_wait(&r, &st, what);
            } else {
                MCK(MPI_Recv(d, (int)n, MPI_BYTE, 0, tag, W, &st));
            }
            GPU_CHECK_STATUS(st, 0, tag, n, "%s", what);
            check_received(gpu_download(d, n), n, how, k, what);
        }
    }
    free(h);
    /* A write behind a held stream is normally still queued at the call (not always: the
     * driver may run a memset at once, and a pageable cudaMemcpy waits for the stream
     * before it copies), so at least one buffer of the case was ordered after it. */
    if (mt_rank == 0 ? how != BY_PAGEABLE_MEMCPY : !host_receiver) {
        const long long ordered = ordered_count() - ordered_before;
        MT_CHECK(ordered >= 1, "%s: none of %zu buffers was ordered after a busy default stream", what, NSIZES);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
}

/* Rank 0 sends host memory; rank 1 clears its device buffer without synchronising. */
static void host_into_cleared_device(int nonblocking) {
    const int tag = 9300 + nonblocking;
    unsigned char *d = gpu_malloc(16 * MiB);
    for (size_t i = 0; i < NSIZES; ++i) {
        const size_t n = sizes[i];
        const int k = (int)i + 20;
        MPI_Request r;
        MPI_Status st;
        if (mt_rank == 0) {
            MCK(MPI_Send(gpu_ref + gpu_offset(k), (int)n, MPI_BYTE, 1, tag, W));
        } else {
            hold_stream(cudaStreamLegacy);
            CK(cudaMemset(d, 0, n));
            if (nonblocking) {
                MCK(MPI_Irecv(d, (int)n, MPI_BYTE, 0, tag, W, &r));
                gpu_wait(&r, &st, "host into a device buffer cleared without synchronising");
            } else {
                MCK(MPI_Recv(d, (int)n, MPI_BYTE, 0, tag, W, &st));
            }
            GPU_CHECK_STATUS(st, 0, tag, n, "host into cleared device");
            GPU_CHECK_SAME(gpu_download(d, n), gpu_ref + gpu_offset(k), n, "host into cleared device, %zu bytes", n);
        }
    }
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
}

static void c_memcpy_send_recv(void) { device_pair(BY_PAGEABLE_MEMCPY, 0, 0, "pageable cudaMemcpy, MPI_Send"); }
static void c_memcpy_isend_irecv(void) { device_pair(BY_PAGEABLE_MEMCPY, 1, 0, "pageable cudaMemcpy, MPI_Isend"); }
static void c_memset_send_recv(void) { device_pair(BY_MEMSET, 0, 0, "cudaMemset, MPI_Send"); }
static void c_memset_isend_irecv(void) { device_pair(BY_MEMSET, 1, 0, "cudaMemset, MPI_Isend"); }
static void c_memset_send_to_host(void) { device_pair(BY_MEMSET, 0, 1, "cudaMemset, MPI_Send to host"); }
static void c_memset_isend_to_host(void) { device_pair(BY_MEMSET, 1, 1, "cudaMemset, MPI_Isend to host"); }
static void c_per_thread_send_recv(void) { device_pair(BY_PER_THREAD_MEMSET, 0, 0, "per-thread memset, MPI_Send"); }
static void c_per_thread_isend(void) { device_pair(BY_PER_THREAD_MEMSET, 1, 0, "per-thread memset, MPI_Isend"); }
static void c_host_into_cleared_device(void) { host_into_cleared_device(0); }
static void c_host_into_cleared_device_irecv(void) { host_into_cleared_device(1); }

static const gpu_case_t cases[] = {
    {"pageable_memcpy_then_send_into_cleared_device_buffer", c_memcpy_send_recv, 0},
    {"pageable_memcpy_then_isend_into_cleared_device_buffer", c_memcpy_isend_irecv, 0},
    {"memset_then_send_into_cleared_device_buffer", c_memset_send_recv, 0},
    {"memset_then_isend_into_cleared_device_buffer", c_memset_isend_irecv, 0},
    {"memset_then_send_to_host", c_memset_send_to_host, 0},
    {"memset_then_isend_to_host", c_memset_isend_to_host, 0},
    {"per_thread_stream_memset_then_send", c_per_thread_send_recv, 0},
    {"per_thread_stream_memset_then_isend", c_per_thread_isend, 0},
    {"host_send_into_device_buffer_cleared_without_synchronising", c_host_into_cleared_device, 0},
    {"host_send_into_device_irecv_cleared_without_synchronising", c_host_into_cleared_device_irecv, 0},
};

int main(int argc, char **argv) {
#if UNSYNC_NO_IPC
    setenv("MPIACC_IPC", "0", 1); /* read at MPI_Init: the staged pipeline */
#endif
    MT_INIT(&argc, &argv);
    gpu_setup(0);
    if (!gpu_skip_why) {
        delay_buf = gpu_malloc(DELAY_BYTES);
        pageable = malloc(16 * MiB);
        if (mt_rank == 0)
            printf("# variant: both ranks on device 0, %s\n", UNSYNC_NO_IPC ? "MPIACC_IPC=0 (pipeline)" : "IPC on");
    }
    gpu_run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    if (delay_buf) CK(cudaFree(delay_buf));
    free(pageable);
    gpu_teardown();
    return mt_finalize();
}
