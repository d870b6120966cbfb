/* OpenCL point-to-point: MPI-ACC between cl_mem buffers against its anchors, 2 ranks.
 *
 * Each rank opens the OpenCL platform whose name contains $MPIACC_OPENCL_PLATFORM (the
 * first platform with a device when unset) and its device rank % ndev. For each
 * configuration, direction and size it measures OSU-style one-way latency (ping-pong;
 * round trip / 2) and windowed bandwidth (a window of sends, then a one-byte ack).
 * Directions name the buffer on each side, rank 0 first (D = cl_mem, H = host memory).
 *
 * Configurations, interleaved: size by size, every configuration and direction at that
 * size, in --rounds rounds whose order rotates, each CSV row the median over the rounds
 * (bench_measure.h says why; the rows of a size are written once its last round is
 * measured, so a run cut short keeps them):
 *   mpich-host  PMPI with host buffers (H->H)
 *   staged      blocking clEnqueueReadBuffer + PMPI_Send; PMPI_Recv + blocking clEnqueueWriteBuffer
 *   pipeline    256 KiB chunks: non-blocking reads/writes into pinned slots + PMPI_Isend/Irecv
 *   mpiacc      MPI_Send/MPI_Recv of the cl_mem through libmpiacc, datatype tagged
 *               MPIX_ACC_BUF_OPENCL and MPIX_ACC_COMMAND_QUEUE
 * MPI-ACC reads MPIACC_TEST_OPENCL_NO_CACHE when it initialises, so "cache off" is a second
 * process run: MPIACC_TEST_OPENCL_NO_CACHE=1 bench/pt2pt_opencl --configs mpiacc, whose rows
 * then read mpiacc-nocache (--label overrides the suffix).
 *
 * Every configuration's first transfer each way is checked byte for byte (the receive
 * buffer is cleared first, and each check sends bytes of its own, so that what an earlier
 * transfer left behind reads as wrong); mismatches are counted and printed, and make the
 * exit code 1.
 * A phase (verify, latency, bandwidth of one size) that takes longer than --watchdog
 * seconds is declared a hang: the program names it on stderr and exits 124.
 *
 *   mpiexec -n 2 bench/pt2pt_opencl [--iters N] [--bw-iters N] [--min-iters N] [--window W]
 *       [--bw-bytes BYTES] [--min-time SEC] [--min-size BYTES] [--max-size BYTES]
 *       [--sizes LIST|pow2] [--configs LIST] [--dirs LIST] [--label SUFFIX] [--csv FILE|DIR/]
 *       [--rounds N] [--watchdog SEC]
 * CSV columns: config,direction,size,lat_us,bw_GBs (GB/s = 1e9 bytes per second).
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <errno.h>
#include <mpi.h>
#include <mpiacc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_harness.h"
#include "results_csv.h"

enum { TAG_DATA = 21, TAG_ACK = 22, TAG_CHUNK = 23, TAG_INFO = 24 };
enum { PIPE_DEPTH = 4 };

/* ------------------------------------------------------------------ errors */


static const char *cl_error_name(cl_int e) {
    switch (e) {
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_MAP_FAILURE: return "CL_MAP_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_PLATFORM: return "CL_INVALID_PLATFORM";
    case CL_INVALID_DEVICE: return "CL_INVALID_DEVICE";
    case CL_INVALID_CONTEXT: return "CL_INVALID_CONTEXT";
    case CL_INVALID_COMMAND_QUEUE: return "CL_INVALID_COMMAND_QUEUE";
    case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_EVENT: return "CL_INVALID_EVENT";
    case CL_INVALID_OPERATION: return "CL_INVALID_OPERATION";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR (no ICD found)";
    default: return "(unknown OpenCL error)";
    }
}

#define CL_CHECK(call)                                                                                  \
    do {                                                                                                \
        cl_int e_ = (call);                                                                             \
        if (e_ != CL_SUCCESS) fail("%s:%d: %s failed: %d %s", __FILE__, __LINE__, #call, (int)e_, cl_error_name(e_)); \
    } while (0)


/* ------------------------------------------------------------------ options */

static void usage(void) {
    fprintf(stderr,
            "usage: mpiexec -n 2 pt2pt_opencl [--iters N] [--bw-iters N] [--min-iters N] [--window W]\n"
            "         [--bw-bytes BYTES] [--min-time SEC] [--min-size BYTES] [--max-size BYTES]\n"
            "         [--sizes LIST|pow2] [--configs LIST] [--dirs LIST] [--label SUFFIX] [--csv FILE|DIR/]\n"
            "         [--rounds N]  (repeat the sweep; rows are medians over the rounds; default 1)\n"
            "         [--watchdog SEC]  (abort with a message when one phase takes longer; 0 = off)\n"
            "  sizes take K, M, G suffixes (powers of 1024); LIST is comma separated\n"
            "  configs: mpich-host,staged,pipeline,mpiacc; dirs: D->D,D->H,H->D (or DD,DH,HD)\n"
            "  platform: $MPIACC_OPENCL_PLATFORM (substring of the name), else the first with a device\n");
}

/* ------------------------------------------------------------------ state */

struct Bench {
    Options o;
    int rank, peer;
    size_t max_bytes;
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;
    char platform_name[256], device_name[256];
    cl_mem dev_s, dev_r;
    char *host_s, *host_r;
    cl_mem pinned_mem, slots_mem; /* CL_MEM_ALLOC_HOST_PTR buffers, kept mapped: pinned host memory */
    char *pinned;                 /* staging for "staged"; also the check buffer */
    char *slot[PIPE_DEPTH];
    cl_event slot_ev[PIPE_DEPTH];
    long chunk;
    unsigned char *pat_self, *pat_peer;
    MPI_Request *reqs;
    MPI_Status *stats; /* not MPI_STATUSES_IGNORE: GCC 12 misreads MPICH's constant (-Wstringop-overflow) */
    long max_reqs;
    MPI_Datatype cl_type;
    long mismatches, verify_failures;
    FILE *csv;
};

/* A buffer on one side: a cl_mem (dev) or host memory. */
struct Side {
    cl_mem mem;
    char *host;
    int dev;
};


/* ------------------------------------------------------------------ data pattern and checks */

static long check_side(Bench *b, Side s, size_t n) {
    const unsigned char *got = (const unsigned char *)s.host;
    if (s.dev) {
        CL_CHECK(clEnqueueReadBuffer(b->queue, s.mem, CL_TRUE, 0, n, b->pinned, 0, NULL, NULL));
        got = (const unsigned char *)b->pinned;
    }
    return count_mismatches(b->pat_peer + g_pattern_shift, got, n,
                            s.dev ? "cl_mem receive buffer" : "host receive buffer");
}

static void load_side(Bench *b, Side s, const unsigned char *bytes, size_t n) {
    if (s.dev)
        CL_CHECK(clEnqueueWriteBuffer(b->queue, s.mem, CL_TRUE, 0, n, bytes, 0, NULL, NULL));
    else
        memcpy(s.host, bytes, n);
}

static void clear_side(Bench *b, Side s, size_t n) {
    if (s.dev) {
        cl_uchar zero = 0;
        CL_CHECK(clEnqueueFillBuffer(b->queue, s.mem, &zero, 1, 0, n, 0, NULL, NULL));
        CL_CHECK(clFinish(b->queue));
    } else {
        memset(s.host, 0, n);
    }
}

static Side send_side(const Bench *b, const Dir *d) {
    int dev = b->rank == 0 ? d->src_dev : d->dst_dev;
    return (Side){b->dev_s, b->host_s, dev};
}

static Side recv_side(const Bench *b, const Dir *d) {
    int dev = b->rank == 0 ? d->src_dev : d->dst_dev;
    return (Side){b->dev_r, b->host_r, dev};
}

/* ------------------------------------------------------------------ plain MPICH (PMPI) */

static void host_send(Bench *b, Side s, size_t n) {
    MPI_CHECK(PMPI_Send(s.host, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD));
}
static void host_recv(Bench *b, Side s, size_t n) {
    MPI_CHECK(PMPI_Recv(s.host, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}
static void host_send_window(Bench *b, Side s, size_t n, int w) {
    for (int i = 0; i < w; i++) MPI_CHECK(PMPI_Isend(s.host, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD, &b->reqs[i]));
    MPI_CHECK_ALL(PMPI_Waitall(w, b->reqs, b->stats), w, b->stats);
}
static void host_recv_window(Bench *b, Side s, size_t n, int w) {
    for (int i = 0; i < w; i++) MPI_CHECK(PMPI_Irecv(s.host, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD, &b->reqs[i]));
    MPI_CHECK_ALL(PMPI_Waitall(w, b->reqs, b->stats), w, b->stats);
}

/* ------------------------------------------------------------------ manual blocking staging */

static void staged_send(Bench *b, Side s, size_t n) {
    const void *src = s.host;
    if (s.dev) {
        CL_CHECK(clEnqueueReadBuffer(b->queue, s.mem, CL_TRUE, 0, n, b->pinned, 0, NULL, NULL));
        src = b->pinned;
    }
    MPI_CHECK(PMPI_Send(src, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD));
}
static void staged_recv(Bench *b, Side s, size_t n) {
    MPI_CHECK(PMPI_Recv(s.dev ? b->pinned : s.host, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    if (s.dev) CL_CHECK(clEnqueueWriteBuffer(b->queue, s.mem, CL_TRUE, 0, n, b->pinned, 0, NULL, NULL));
}

/* ------------------------------------------------------------------ manual chunk pipeline */

static size_t chunk_len(const Bench *b, size_t n, long k) {
    size_t off = (size_t)k * (size_t)b->chunk;
    return n - off < (size_t)b->chunk ? n - off : (size_t)b->chunk;
}

static long nchunks(const Bench *b, size_t n) { return (long)((n + (size_t)b->chunk - 1) / (size_t)b->chunk); }

static void wait_slot(Bench *b, int slot) {
    if (!b->slot_ev[slot]) return;
    CL_CHECK(clWaitForEvents(1, &b->slot_ev[slot]));
    CL_CHECK(clReleaseEvent(b->slot_ev[slot]));
    b->slot_ev[slot] = NULL;
}

/* Reads of the next chunks run while earlier chunks are on the wire: PIPE_DEPTH pinned
 * slots; a slot is reused once its send has completed. */
static void pipeline_send(Bench *b, Side s, size_t n) {
    long nc = nchunks(b, n);
    if (!s.dev) {
        for (long k = 0; k < nc; k++)
            MPI_CHECK(PMPI_Isend(s.host + (size_t)k * (size_t)b->chunk, (int)chunk_len(b, n, k), MPI_BYTE, b->peer,
                                 TAG_CHUNK, MPI_COMM_WORLD, &b->reqs[k]));
        MPI_CHECK_ALL(PMPI_Waitall((int)nc, b->reqs, b->stats), (int)nc, b->stats);
        return;
    }
    MPI_Request req[PIPE_DEPTH];
    for (int i = 0; i < PIPE_DEPTH; i++) req[i] = MPI_REQUEST_NULL;
    long copied = 0;
    for (long k = 0; k < nc; k++) {
        while (copied < nc && copied - k < PIPE_DEPTH) {
            int slot = (int)(copied % PIPE_DEPTH);
            MPI_CHECK(PMPI_Wait(&req[slot], MPI_STATUS_IGNORE));
            CL_CHECK(clEnqueueReadBuffer(b->queue, s.mem, CL_FALSE, (size_t)copied * (size_t)b->chunk,
                                         chunk_len(b, n, copied), b->slot[slot], 0, NULL, &b->slot_ev[slot]));
            copied++;
        }
        CL_CHECK(clFlush(b->queue));
        int slot = (int)(k % PIPE_DEPTH);
        wait_slot(b, slot);
        MPI_CHECK(PMPI_Isend(b->slot[slot], (int)chunk_len(b, n, k), MPI_BYTE, b->peer, TAG_CHUNK, MPI_COMM_WORLD,
                             &req[slot]));
    }
    MPI_CHECK_ALL(PMPI_Waitall(PIPE_DEPTH, req, b->stats), PIPE_DEPTH, b->stats);
}

static void pipeline_recv(Bench *b, Side s, size_t n) {
    long nc = nchunks(b, n);
    if (!s.dev) {
        for (long k = 0; k < nc; k++)
            MPI_CHECK(PMPI_Irecv(s.host + (size_t)k * (size_t)b->chunk, (int)chunk_len(b, n, k), MPI_BYTE, b->peer,
                                 TAG_CHUNK, MPI_COMM_WORLD, &b->reqs[k]));
        MPI_CHECK_ALL(PMPI_Waitall((int)nc, b->reqs, b->stats), (int)nc, b->stats);
        return;
    }
    MPI_Request req[PIPE_DEPTH];
    for (long k = 0; k < PIPE_DEPTH; k++) req[k] = MPI_REQUEST_NULL;
    for (long k = 0; k < nc && k < PIPE_DEPTH; k++)
        MPI_CHECK(PMPI_Irecv(b->slot[k], (int)chunk_len(b, n, k), MPI_BYTE, b->peer, TAG_CHUNK, MPI_COMM_WORLD, &req[k]));
    for (long k = 0; k < nc; k++) {
        int slot = (int)(k % PIPE_DEPTH);
        MPI_CHECK(PMPI_Wait(&req[slot], MPI_STATUS_IGNORE));
        CL_CHECK(clEnqueueWriteBuffer(b->queue, s.mem, CL_FALSE, (size_t)k * (size_t)b->chunk, chunk_len(b, n, k),
                                      b->slot[slot], 0, NULL, &b->slot_ev[slot]));
        CL_CHECK(clFlush(b->queue));
        /* Repost the previous chunk's slot, whose write has had a chunk's time to finish. */
        long next = k - 1 + PIPE_DEPTH;
        if (k >= 1 && next < nc) {
            int prev = (int)((k - 1) % PIPE_DEPTH);
            wait_slot(b, prev);
            MPI_CHECK(PMPI_Irecv(b->slot[prev], (int)chunk_len(b, n, next), MPI_BYTE, b->peer, TAG_CHUNK,
                                 MPI_COMM_WORLD, &req[prev]));
        }
    }
    CL_CHECK(clFinish(b->queue));
    for (int i = 0; i < PIPE_DEPTH; i++) wait_slot(b, i);
}

/* ------------------------------------------------------------------ MPI-ACC */

static int mpiacc_setup(Bench *b, char *why, size_t whylen) {
    int ok = MPIX_Query_opencl_support(), all = 0;
    why[0] = '\0';
    if (!ok) snprintf(why, whylen, "MPIX_Query_opencl_support() returned 0 on rank %d", b->rank);
    MPI_CHECK(PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all && ok) snprintf(why, whylen, "MPIX_Query_opencl_support() returned 0 on the other rank");
    if (all && b->cl_type == MPI_DATATYPE_NULL) {
        MPI_CHECK(MPI_Type_dup(MPI_BYTE, &b->cl_type));
        MPI_CHECK(MPI_Type_set_attr(b->cl_type, MPIX_ACC_BUF_TYPE, (void *)(intptr_t)MPIX_ACC_BUF_OPENCL));
        MPI_CHECK(MPI_Type_set_attr(b->cl_type, MPIX_ACC_COMMAND_QUEUE, (void *)b->queue));
    }
    return all;
}

static void *acc_buf(Side s) { return s.dev ? (void *)s.mem : (void *)s.host; }
static MPI_Datatype acc_type(const Bench *b, Side s) { return s.dev ? b->cl_type : MPI_BYTE; }

static void acc_send(Bench *b, Side s, size_t n) {
    MPI_CHECK(MPI_Send(acc_buf(s), (int)n, acc_type(b, s), b->peer, TAG_DATA, MPI_COMM_WORLD));
}
static void acc_recv(Bench *b, Side s, size_t n) {
    MPI_CHECK(MPI_Recv(acc_buf(s), (int)n, acc_type(b, s), b->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}
static void acc_send_window(Bench *b, Side s, size_t n, int w) {
    for (int i = 0; i < w; i++)
        MPI_CHECK(MPI_Isend(acc_buf(s), (int)n, acc_type(b, s), b->peer, TAG_DATA, MPI_COMM_WORLD, &b->reqs[i]));
    MPI_CHECK_ALL(MPI_Waitall(w, b->reqs, b->stats), w, b->stats);
}
static void acc_recv_window(Bench *b, Side s, size_t n, int w) {
    for (int i = 0; i < w; i++)
        MPI_CHECK(MPI_Irecv(acc_buf(s), (int)n, acc_type(b, s), b->peer, TAG_DATA, MPI_COMM_WORLD, &b->reqs[i]));
    MPI_CHECK_ALL(MPI_Waitall(w, b->reqs, b->stats), w, b->stats);
}

static const Config configs[] = {
    {"mpich-host", DIR_HH, 0, 0, NULL, host_send, host_recv, host_send_window, host_recv_window, NULL, NULL},
    {"staged", DIR_DEV, 0, 0, NULL, staged_send, staged_recv, NULL, NULL, NULL, NULL},
    {"pipeline", DIR_DEV, 0, 0, NULL, pipeline_send, pipeline_recv, NULL, NULL, NULL, NULL},
    {"mpiacc", DIR_DEV, 1, 0, mpiacc_setup, acc_send, acc_recv, acc_send_window, acc_recv_window, NULL, NULL},
};

#include "bench_measure.h"

/* ------------------------------------------------------------------ OpenCL setup */

/* The platform named by $MPIACC_OPENCL_PLATFORM (a substring, as MPI-ACC matches it), or
 * the first with a device; then device rank % ndev. Returns 0 with a reason. */
static int open_device(Bench *b, char *why, size_t whylen) {
    cl_uint np = 0;
    cl_int e = clGetPlatformIDs(0, NULL, &np);
    if (e != CL_SUCCESS || np == 0) {
        snprintf(why, whylen, "no OpenCL platform (clGetPlatformIDs: %d %s)", (int)e, cl_error_name(e));
        return 0;
    }
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats) fail("out of memory");
    CL_CHECK(clGetPlatformIDs(np, plats, NULL));
    const char *want = getenv("MPIACC_OPENCL_PLATFORM");
    int found = 0;
    why[0] = '\0';
    for (cl_uint i = 0; i < np && !found; i++) {
        char name[256] = "";
        cl_uint nd = 0;
        clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
        if (want && *want && !strstr(name, want)) continue;
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
        cl_device_id *devs = calloc(nd, sizeof *devs);
        if (!devs) fail("out of memory");
        CL_CHECK(clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, nd, devs, NULL));
        b->platform = plats[i];
        b->device = devs[(cl_uint)b->rank % nd];
        snprintf(b->platform_name, sizeof b->platform_name, "%s", name);
        free(devs);
        found = 1;
    }
    free(plats);
    if (!found) {
        snprintf(why, whylen, "no OpenCL platform with a device%s%s%s", want && *want ? " whose name contains \"" : "",
                 want && *want ? want : "", want && *want ? "\" (MPIACC_OPENCL_PLATFORM)" : "");
        return 0;
    }
    clGetDeviceInfo(b->device, CL_DEVICE_NAME, sizeof b->device_name - 1, b->device_name, NULL);
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)b->platform, 0};
    b->ctx = clCreateContext(props, 1, &b->device, NULL, NULL, &e);
    CL_CHECK(e);
    b->queue = clCreateCommandQueue(b->ctx, b->device, 0, &e);
    CL_CHECK(e);
    return 1;
}

static char *map_pinned(Bench *b, cl_mem *mem, size_t n) {
    cl_int e;
    *mem = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, n, NULL, &e);
    CL_CHECK(e);
    char *p = clEnqueueMapBuffer(b->queue, *mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, n, 0, NULL, NULL, &e);
    CL_CHECK(e);
    return p;
}

/* ------------------------------------------------------------------ main */

static int env_is_one(const char *name) {
    const char *v = getenv(name);
    return v && !strcmp(v, "1");
}

int main(int argc, char **argv) {
    Bench bb, *b = &bb;
    memset(b, 0, sizeof *b);
    b->cl_type = MPI_DATATYPE_NULL;
    MPI_Init(&argc, &argv);
    int nranks;
    PMPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &nranks);
    g_rank = b->rank;
    b->peer = 1 - b->rank;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    g_prog = "pt2pt_opencl";
    if (!parse_options(argc, argv, &b->o, 64L << 20, "8,64,256,1K,4K,16K,64K,256K,1M,4M,16M,64M") || nranks != 2) {
        if (b->rank == 0) {
            if (nranks != 2) fprintf(stderr, "pt2pt_opencl: needs exactly 2 ranks, got %d\n", nranks);
            usage();
        }
        MPI_Finalize();
        return 2;
    }
    if (!b->o.label) b->o.label = env_is_one("MPIACC_TEST_OPENCL_NO_CACHE") ? "nocache" : "";

    char why[256];
    int ok = open_device(b, why, sizeof why), all = 0;
    if (!ok) fprintf(stderr, "pt2pt_opencl: rank %d: %s\n", b->rank, why);
    MPI_CHECK(PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all) {
        MPI_Finalize();
        return 1;
    }

    if (!setup_host_side(b)) {
        MPI_Finalize();
        return 2;
    }
    cl_int e;
    b->dev_s = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, b->max_bytes, NULL, &e);
    CL_CHECK(e);
    b->dev_r = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, b->max_bytes, NULL, &e);
    CL_CHECK(e);
    CL_CHECK(clEnqueueWriteBuffer(b->queue, b->dev_s, CL_TRUE, 0, b->max_bytes, b->pat_self, 0, NULL, NULL));
    b->pinned = map_pinned(b, &b->pinned_mem, b->max_bytes);
    char *slots = map_pinned(b, &b->slots_mem, (size_t)PIPE_DEPTH * (size_t)b->chunk);
    for (int i = 0; i < PIPE_DEPTH; i++) b->slot[i] = slots + (size_t)i * (size_t)b->chunk;
    CL_CHECK(clFinish(b->queue));

    if (b->rank == 0) {
        const char *cache = getenv("MPIACC_TEST_OPENCL_NO_CACHE");
        char details[1024];
        snprintf(details, sizeof details, "platform=\"%.255s\" device=\"%.255s\" MPIACC_TEST_OPENCL_NO_CACHE=%.64s", b->platform_name,
                 b->device_name, cache ? cache : "(unset)");
        csv_header(b, argc, argv, details);
        printf("# pt2pt_opencl: 2 ranks, platform \"%s\", rank 0 device \"%s\"\n", b->platform_name, b->device_name);
        printf("# one-way latency = round trip / 2; bandwidth in GB/s (1e9 B/s); window <= %ld, window x size <= %ld B\n",
               b->o.window, b->o.bw_bytes);
    }
    run_all(b);
    if (b->cl_type != MPI_DATATYPE_NULL) MPI_Type_free(&b->cl_type);
    const int ret = finish_run(b);
    /* MPI-ACC may hold this queue in its cache until MPI_Finalize: release after it. */
    MPI_Finalize();
    clEnqueueUnmapMemObject(b->queue, b->pinned_mem, b->pinned, 0, NULL, NULL);
    clEnqueueUnmapMemObject(b->queue, b->slots_mem, slots, 0, NULL, NULL);
    clFinish(b->queue);
    clReleaseMemObject(b->pinned_mem);
    clReleaseMemObject(b->slots_mem);
    clReleaseMemObject(b->dev_s);
    clReleaseMemObject(b->dev_r);
    clReleaseCommandQueue(b->queue);
    clReleaseContext(b->ctx);
    return ret;
}
