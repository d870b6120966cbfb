/* CUDA point-to-point: MPI-ACC against every anchor it is held to, in one run, 2 ranks.
 *
 * One GPU per rank (cudaSetDevice(rank % ndev)). For each configuration, direction and
 * size it measures OSU-style one-way latency (ping-pong; round trip / 2) and windowed
 * bandwidth (a window of sends, then a one-byte ack). Directions name the buffer on each
 * side, rank 0 first: D->H means rank 0 uses device memory and rank 1 host memory (the
 * bandwidth is rank 0 to rank 1; the latency is the mean of both ways, as in OSU).
 *
 * Configurations, all in one run, interleaved: size by size, every configuration and
 * direction at that size, in --rounds rounds whose order rotates, each CSV row the
 * median over the rounds (bench_measure.h says why):
 *   mpich-host   PMPI with host buffers (H->H): what MPICH's host transport gives
 *   staged       cudaMemcpy D2H into pinned memory + PMPI_Send; PMPI_Recv + cudaMemcpy H2D
 *   pipeline     256 KiB chunks: cudaMemcpyAsync into pinned slots on two streams + PMPI_Isend/Irecv
 *   nccl         ncclSend/ncclRecv (libnccl.so.2 loaded with dlopen; skipped if absent)
 *   memcpy-peer  cudaMemcpyPeerAsync GPU a -> GPU b inside rank 0 alone (needs 2 devices with peer access)
 *   ipc-pull     the receiver maps the sender's cudaIpcMemHandle and copies; a PMPI RTS/FIN handshake
 *   mpiacc       MPI_Send/MPI_Recv through libmpiacc, datatype tagged MPIX_ACC_BUF_CUDA
 *   mpiacc-auto  the same with plain MPI_BYTE: CUDA pointer autodetection
 * MPI-ACC reads MPIACC_IPC when it initialises, so "IPC off" is a second process run:
 * MPIACC_IPC=0 bench/pt2pt --configs mpiacc,mpiacc-auto. The MPI-ACC rows then read
 * mpiacc-noipc and mpiacc-auto-noipc (--label overrides the suffix).
 *
 * Every configuration's first transfer each way is checked byte for byte (the receive
 * buffer is cleared first, and each check sends bytes of its own, so that what an earlier
 * transfer left behind reads as wrong); mismatches are counted and printed, and make the
 * exit code 1.
 * A phase (verify, latency, bandwidth of one size) that takes longer than --watchdog
 * seconds is declared a hang: the program names it on stderr and exits 124.
 * Large messages get fewer iterations and a smaller window (window x size <= --bw-bytes),
 * and every measurement runs at least --min-time seconds, so a run stays short. The rows of
 * a size are written once its last round is measured, so a run cut short keeps them.
 *
 *   mpiexec -n 2 bench/pt2pt [--iters N] [--bw-iters N] [--min-iters N] [--window W]
 *       [--bw-bytes BYTES] [--min-time SEC] [--min-size BYTES] [--max-size BYTES]
 *       [--sizes LIST|pow2] [--configs LIST] [--dirs LIST] [--label SUFFIX] [--csv FILE|DIR/]
 *       [--rounds N] [--watchdog SEC]
 * CSV columns: config,direction,size,lat_us,bw_GBs (GB/s = 1e9 bytes per second).
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
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

/* Powers of 4, plus the sizes where a path changes: 8 and 32 KiB around the resident
 * copier's limit and the staged device limit (MPIACC_CUDA_KERNEL_COPY_MAX, _DEVICE_EAGER_MAX:
 * with powers of 4 alone, 8 KiB once trailed staging by hand unseen), 128 and 512 KiB on
 * either side of the 256 KiB rendezvous hint for host payloads, 2 MiB at the host
 * rendezvous threshold. */
#define DEFAULT_SIZES "8,64,256,1K,4K,8K,16K,32K,64K,128K,256K,512K,1M,2M,4M,16M,64M,256M"

#include "bench_harness.h"
#include "results_csv.h"

enum { TAG_DATA = 11, TAG_ACK = 12, TAG_CHUNK = 13, TAG_RTS = 14, TAG_FIN = 15, TAG_HANDLE = 16 };
enum { PIPE_DEPTH = 4 };

/* ------------------------------------------------------------------ errors */


#define CUDA_CHECK(call)                                                                                \
    do {                                                                                                \
        cudaError_t e_ = (call);                                                                        \
        if (e_ != cudaSuccess)                                                                          \
            fail("%s:%d: %s failed: %s (%s)", __FILE__, __LINE__, #call, cudaGetErrorString(e_),         \
                 cudaGetErrorName(e_));                                                                 \
    } while (0)


/* ------------------------------------------------------------------ NCCL, loaded at run time */

/* The few NCCL types and calls used here, so that the program builds without nccl.h. */
typedef struct {
    char internal[128];
} NcclUniqueId;
typedef void *NcclComm;
typedef struct {
    int (*get_version)(int *);
    int (*get_unique_id)(NcclUniqueId *);
    int (*comm_init_rank)(NcclComm *, int, NcclUniqueId, int);
    int (*comm_destroy)(NcclComm);
    int (*send)(const void *, size_t, int, int, NcclComm, cudaStream_t);
    int (*recv)(void *, size_t, int, int, NcclComm, cudaStream_t);
    const char *(*error_string)(int);
} NcclApi;
enum { NCCL_INT8 = 0 };

#define NCCL_CHECK(b, call)                                                                             \
    do {                                                                                                \
        int r_ = (call);                                                                                \
        if (r_ != 0) fail("%s:%d: %s failed: %s", __FILE__, __LINE__, #call, (b)->nccl.error_string(r_)); \
    } while (0)

/* ------------------------------------------------------------------ options */

static void usage(void) {
    fprintf(stderr,
            "usage: mpiexec -n 2 pt2pt [--iters N] [--bw-iters N] [--min-iters N] [--window W]\n"
            "         [--bw-bytes BYTES] [--min-time SEC] [--min-size BYTES] [--max-size BYTES]\n"
            "         [--sizes LIST|pow2] [--configs LIST] [--dirs LIST] [--label SUFFIX] [--csv FILE|DIR/]\n"
            "         [--rounds N]  (repeat the sweep; rows are medians over the rounds; default 1)\n"
            "         [--watchdog SEC]  (abort with a message when one phase takes longer; 0 = off)\n"
            "  sizes take K, M, G suffixes (powers of 1024); LIST is comma separated\n"
            "  configs: mpich-host,staged,pipeline,nccl,memcpy-peer,ipc-pull,mpiacc,mpiacc-auto\n"
            "  dirs: D->D,D->H,H->D (or DD,DH,HD)\n");
}

/* ------------------------------------------------------------------ state */

struct Bench {
    Options o;
    int rank, peer, device, ndev;
    size_t max_bytes;
    char *dev_s, *dev_r;       /* device send / receive buffers */
    char *host_s, *host_r;     /* pageable host send / receive buffers */
    char *pinned;              /* staging for "staged"; also the check buffer */
    unsigned char *pat_self, *pat_peer;
    cudaStream_t stream[2];
    /* pipeline */
    long chunk;
    char *slot[PIPE_DEPTH];
    cudaEvent_t slot_ev[PIPE_DEPTH];
    MPI_Request *reqs;
    MPI_Status *stats; /* not MPI_STATUSES_IGNORE: GCC 12 misreads MPICH's constant (-Wstringop-overflow) */
    long max_reqs;
    /* nccl */
    void *nccl_lib;
    NcclApi nccl;
    NcclComm nccl_comm;
    int nccl_version;
    /* memcpy-peer (rank 0) */
    int peer_dev;
    char *peer_buf;
    /* ipc-pull */
    char *ipc_peer_s; /* the peer's send buffer, mapped */
    /* mpiacc */
    MPI_Datatype cuda_type;
    /* results */
    long mismatches, verify_failures;
    FILE *csv;
};

struct Side {
    void *buf;
    int dev;
};


/* ------------------------------------------------------------------ data pattern and checks */

static long check_side(Bench *b, Side s, size_t n) {
    const unsigned char *got = s.buf;
    if (s.dev) {
        CUDA_CHECK(cudaMemcpy(b->pinned, s.buf, n, cudaMemcpyDeviceToHost));
        got = (const unsigned char *)b->pinned;
    }
    return count_mismatches(b->pat_peer + g_pattern_shift, got, n,
                            s.dev ? "device receive buffer" : "host receive buffer");
}

static void load_side(Bench *b, Side s, const unsigned char *bytes, size_t n) {
    (void)b;
    if (s.dev) {
        /* From pageable memory cudaMemcpy may return before the device has the bytes. */
        CUDA_CHECK(cudaMemcpy(s.buf, bytes, n, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());
    } else {
        memcpy(s.buf, bytes, n);
    }
}

static void clear_side(Bench *b, Side s, size_t n) {
    (void)b;
    if (s.dev) {
        CUDA_CHECK(cudaMemset(s.buf, 0, n));
        CUDA_CHECK(cudaDeviceSynchronize());
    } else {
        memset(s.buf, 0, n);
    }
}

static Side send_side(const Bench *b, const Dir *d) {
    int dev = b->rank == 0 ? d->src_dev : d->dst_dev;
    return (Side){dev ? b->dev_s : b->host_s, dev};
}

static Side recv_side(const Bench *b, const Dir *d) {
    int dev = b->rank == 0 ? d->src_dev : d->dst_dev;
    return (Side){dev ? b->dev_r : b->host_r, dev};
}

/* ------------------------------------------------------------------ plain MPICH (PMPI) */

static void host_send(Bench *b, Side s, size_t n) {
    MPI_CHECK(PMPI_Send(s.buf, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD));
}
static void host_recv(Bench *b, Side s, size_t n) {
    MPI_CHECK(PMPI_Recv(s.buf, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}
static void host_send_window(Bench *b, Side s, size_t n, int w) {
    for (int i = 0; i < w; i++) MPI_CHECK(PMPI_Isend(s.buf, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD, &b->reqs[i]));
    MPI_CHECK_ALL(PMPI_Waitall(w, b->reqs, b->stats), w, b->stats);
}
static void host_recv_window(Bench *b, Side s, size_t n, int w) {
    for (int i = 0; i < w; i++) MPI_CHECK(PMPI_Irecv(s.buf, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD, &b->reqs[i]));
    MPI_CHECK_ALL(PMPI_Waitall(w, b->reqs, b->stats), w, b->stats);
}

/* ------------------------------------------------------------------ manual blocking staging */

static void staged_send(Bench *b, Side s, size_t n) {
    const void *src = s.buf;
    if (s.dev) {
        CUDA_CHECK(cudaMemcpy(b->pinned, s.buf, n, cudaMemcpyDeviceToHost));
        src = b->pinned;
    }
    MPI_CHECK(PMPI_Send(src, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD));
}
static void staged_recv(Bench *b, Side s, size_t n) {
    MPI_CHECK(PMPI_Recv(s.dev ? b->pinned : s.buf, (int)n, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    if (s.dev) CUDA_CHECK(cudaMemcpy(s.buf, b->pinned, n, cudaMemcpyHostToDevice));
}

/* ------------------------------------------------------------------ manual chunk pipeline */

static size_t chunk_len(const Bench *b, size_t n, long k) {
    size_t off = (size_t)k * (size_t)b->chunk;
    return n - off < (size_t)b->chunk ? n - off : (size_t)b->chunk;
}

static long nchunks(const Bench *b, size_t n) { return (long)((n + (size_t)b->chunk - 1) / (size_t)b->chunk); }

/* Copies of the next chunks run while earlier chunks are on the wire: PIPE_DEPTH pinned
 * slots, chunk k on stream k % 2; a slot is reused once its send has completed. */
static void pipeline_send(Bench *b, Side s, size_t n) {
    long nc = nchunks(b, n);
    if (!s.dev) {
        for (long k = 0; k < nc; k++)
            MPI_CHECK(PMPI_Isend(s.buf + (size_t)k * (size_t)b->chunk, (int)chunk_len(b, n, k), MPI_BYTE, b->peer,
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
            cudaStream_t st = b->stream[copied % 2];
            CUDA_CHECK(cudaMemcpyAsync(b->slot[slot], (char *)s.buf + (size_t)copied * (size_t)b->chunk,
                                       chunk_len(b, n, copied), cudaMemcpyDeviceToHost, st));
            CUDA_CHECK(cudaEventRecord(b->slot_ev[slot], st));
            copied++;
        }
        int slot = (int)(k % PIPE_DEPTH);
        CUDA_CHECK(cudaEventSynchronize(b->slot_ev[slot]));
        MPI_CHECK(PMPI_Isend(b->slot[slot], (int)chunk_len(b, n, k), MPI_BYTE, b->peer, TAG_CHUNK, MPI_COMM_WORLD,
                             &req[slot]));
    }
    MPI_CHECK_ALL(PMPI_Waitall(PIPE_DEPTH, req, b->stats), PIPE_DEPTH, b->stats);
}

static void pipeline_recv(Bench *b, Side s, size_t n) {
    long nc = nchunks(b, n);
    if (!s.dev) {
        for (long k = 0; k < nc; k++)
            MPI_CHECK(PMPI_Irecv((char *)s.buf + (size_t)k * (size_t)b->chunk, (int)chunk_len(b, n, k), MPI_BYTE,
                                 b->peer, TAG_CHUNK, MPI_COMM_WORLD, &b->reqs[k]));
        MPI_CHECK_ALL(PMPI_Waitall((int)nc, b->reqs, b->stats), (int)nc, b->stats);
        return;
    }
    MPI_Request req[PIPE_DEPTH];
    for (long k = 0; k < PIPE_DEPTH; k++)
        req[k] = MPI_REQUEST_NULL;
    for (long k = 0; k < nc && k < PIPE_DEPTH; k++)
        MPI_CHECK(PMPI_Irecv(b->slot[k], (int)chunk_len(b, n, k), MPI_BYTE, b->peer, TAG_CHUNK, MPI_COMM_WORLD, &req[k]));
    for (long k = 0; k < nc; k++) {
        int slot = (int)(k % PIPE_DEPTH);
        MPI_CHECK(PMPI_Wait(&req[slot], MPI_STATUS_IGNORE));
        cudaStream_t st = b->stream[k % 2];
        CUDA_CHECK(cudaMemcpyAsync((char *)s.buf + (size_t)k * (size_t)b->chunk, b->slot[slot], chunk_len(b, n, k),
                                   cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaEventRecord(b->slot_ev[slot], st));
        /* Repost the previous chunk's slot, whose copy has had a chunk's time to finish. */
        long next = k - 1 + PIPE_DEPTH;
        if (k >= 1 && next < nc) {
            int prev = (int)((k - 1) % PIPE_DEPTH);
            CUDA_CHECK(cudaEventSynchronize(b->slot_ev[prev]));
            MPI_CHECK(PMPI_Irecv(b->slot[prev], (int)chunk_len(b, n, next), MPI_BYTE, b->peer, TAG_CHUNK,
                                 MPI_COMM_WORLD, &req[prev]));
        }
    }
    CUDA_CHECK(cudaStreamSynchronize(b->stream[0]));
    CUDA_CHECK(cudaStreamSynchronize(b->stream[1]));
}

/* ------------------------------------------------------------------ NCCL */

static int nccl_setup(Bench *b, char *why, size_t whylen) {
    int ok = 1, all = 0;
    why[0] = '\0';
    int devs[2] = {b->device, -1}, peer_dev = -1;
    MPI_CHECK(PMPI_Sendrecv(&devs[0], 1, MPI_INT, b->peer, TAG_HANDLE, &peer_dev, 1, MPI_INT, b->peer, TAG_HANDLE,
                            MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    if (peer_dev == b->device) {
        snprintf(why, whylen, "both ranks use CUDA device %d; NCCL needs one device per rank", b->device);
        ok = 0;
    }
    if (ok) {
        b->nccl_lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!b->nccl_lib) b->nccl_lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
        if (!b->nccl_lib) {
            snprintf(why, whylen, "dlopen(libnccl.so.2): %s", dlerror());
            ok = 0;
        }
    }
    if (ok) {
        struct {
            const char *sym;
            void **fn;
        } syms[] = {{"ncclGetVersion", (void **)&b->nccl.get_version},
                    {"ncclGetUniqueId", (void **)&b->nccl.get_unique_id},
                    {"ncclCommInitRank", (void **)&b->nccl.comm_init_rank},
                    {"ncclCommDestroy", (void **)&b->nccl.comm_destroy},
                    {"ncclSend", (void **)&b->nccl.send},
                    {"ncclRecv", (void **)&b->nccl.recv},
                    {"ncclGetErrorString", (void **)&b->nccl.error_string}};
        for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
            if (!(*syms[i].fn = dlsym(b->nccl_lib, syms[i].sym))) {
                snprintf(why, whylen, "dlsym(%s) failed in libnccl", syms[i].sym);
                ok = 0;
                break;
            }
    }
    MPI_CHECK(PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all) {
        if (ok) snprintf(why, whylen, "NCCL unusable on the other rank");
        return 0;
    }
    b->nccl.get_version(&b->nccl_version);
    NcclUniqueId id;
    memset(&id, 0, sizeof id);
    if (b->rank == 0) NCCL_CHECK(b, b->nccl.get_unique_id(&id));
    MPI_CHECK(PMPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    setenv("NCCL_NVLS_ENABLE", "0", 1); /* never NVLink multicast on the shared machines */
    int r = b->nccl.comm_init_rank(&b->nccl_comm, 2, id, b->rank);
    ok = r == 0;
    if (!ok) snprintf(why, whylen, "ncclCommInitRank: %s", b->nccl.error_string(r));
    MPI_CHECK(PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all && ok) snprintf(why, whylen, "ncclCommInitRank failed on the other rank");
    return all;
}

static void nccl_teardown(Bench *b) {
    if (b->nccl_comm) NCCL_CHECK(b, b->nccl.comm_destroy(b->nccl_comm));
    b->nccl_comm = NULL;
}

static void nccl_send(Bench *b, Side s, size_t n) {
    NCCL_CHECK(b, b->nccl.send(s.buf, n, NCCL_INT8, b->peer, b->nccl_comm, b->stream[0]));
    CUDA_CHECK(cudaStreamSynchronize(b->stream[0]));
}
static void nccl_recv(Bench *b, Side s, size_t n) {
    NCCL_CHECK(b, b->nccl.recv(s.buf, n, NCCL_INT8, b->peer, b->nccl_comm, b->stream[0]));
    CUDA_CHECK(cudaStreamSynchronize(b->stream[0]));
}
static void nccl_send_window(Bench *b, Side s, size_t n, int w) {
    for (int i = 0; i < w; i++) NCCL_CHECK(b, b->nccl.send(s.buf, n, NCCL_INT8, b->peer, b->nccl_comm, b->stream[0]));
    CUDA_CHECK(cudaStreamSynchronize(b->stream[0]));
}
static void nccl_recv_window(Bench *b, Side s, size_t n, int w) {
    for (int i = 0; i < w; i++) NCCL_CHECK(b, b->nccl.recv(s.buf, n, NCCL_INT8, b->peer, b->nccl_comm, b->stream[0]));
    CUDA_CHECK(cudaStreamSynchronize(b->stream[0]));
}

/* ------------------------------------------------------------------ cudaMemcpyPeer (rank 0 alone) */

static int peer_setup(Bench *b, char *why, size_t whylen) {
    int ok = 0;
    why[0] = '\0';
    if (b->rank == 0) {
        if (b->ndev < 2) {
            snprintf(why, whylen, "rank 0 sees %d CUDA device(s); needs 2", b->ndev);
        } else {
            int can = 0;
            b->peer_dev = (b->device + 1) % b->ndev;
            CUDA_CHECK(cudaDeviceCanAccessPeer(&can, b->device, b->peer_dev));
            if (!can) {
                snprintf(why, whylen, "cudaDeviceCanAccessPeer(%d, %d) = 0", b->device, b->peer_dev);
            } else {
                cudaError_t e = cudaDeviceEnablePeerAccess(b->peer_dev, 0);
                if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
                    CUDA_CHECK(e);
                (void)cudaGetLastError(); /* clear the "already enabled" error */
                CUDA_CHECK(cudaSetDevice(b->peer_dev));
                CUDA_CHECK(cudaMalloc((void **)&b->peer_buf, b->max_bytes));
                CUDA_CHECK(cudaSetDevice(b->device));
                ok = 1;
            }
        }
    }
    MPI_CHECK(PMPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (!ok && b->rank != 0) snprintf(why, whylen, "not usable on rank 0");
    return ok;
}

static void peer_teardown(Bench *b) {
    if (!b->peer_buf) return;
    CUDA_CHECK(cudaFree(b->peer_buf));
    b->peer_buf = NULL;
    CUDA_CHECK(cudaDeviceDisablePeerAccess(b->peer_dev));
}

static void peer_copy(Bench *b, Side s, size_t n) {
    CUDA_CHECK(cudaMemcpyPeerAsync(b->peer_buf, b->peer_dev, s.buf, b->device, n, b->stream[0]));
    CUDA_CHECK(cudaStreamSynchronize(b->stream[0]));
}
static void peer_copy_window(Bench *b, Side s, size_t n, int w) {
    for (int i = 0; i < w; i++)
        CUDA_CHECK(cudaMemcpyPeerAsync(b->peer_buf, b->peer_dev, s.buf, b->device, n, b->stream[0]));
    CUDA_CHECK(cudaStreamSynchronize(b->stream[0]));
}
/* The copy lands on rank 0's other device and carries rank 0's own pattern. */
static long peer_verify(Bench *b, const Config *c, const Dir *d, size_t n) {
    long bad = 0, all = 0;
    if (b->rank == 0) {
        load_side(b, send_side(b, d), b->pat_self + g_pattern_shift, n);
        CUDA_CHECK(cudaMemset(b->peer_buf, 0, n));
        CUDA_CHECK(cudaDeviceSynchronize());
        c->send(b, send_side(b, d), n);
        CUDA_CHECK(cudaMemcpy(b->pinned, b->peer_buf, n, cudaMemcpyDeviceToHost));
        bad = count_mismatches(b->pat_self + g_pattern_shift, (const unsigned char *)b->pinned, n, "peer device copy");
    }
    MPI_CHECK(PMPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    return all;
}

/* ------------------------------------------------------------------ raw CUDA IPC pull */

/* Each rank maps the other's send buffer: the receiver pulls on an RTS and answers FIN. */
static int ipc_setup(Bench *b, char *why, size_t whylen) {
    cudaIpcMemHandle_t mine, theirs;
    int ok = 1, all = 0;
    why[0] = '\0';
    CUDA_CHECK(cudaIpcGetMemHandle(&mine, b->dev_s));
    MPI_CHECK(PMPI_Sendrecv(&mine, (int)sizeof mine, MPI_BYTE, b->peer, TAG_HANDLE, &theirs, (int)sizeof theirs,
                            MPI_BYTE, b->peer, TAG_HANDLE, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    cudaError_t e = cudaIpcOpenMemHandle((void **)&b->ipc_peer_s, theirs, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        snprintf(why, whylen, "cudaIpcOpenMemHandle: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        ok = 0;
    }
    MPI_CHECK(PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all && ok) snprintf(why, whylen, "cudaIpcOpenMemHandle failed on the other rank");
    return all;
}

static void ipc_teardown(Bench *b) {
    if (b->ipc_peer_s) CUDA_CHECK(cudaIpcCloseMemHandle(b->ipc_peer_s));
    b->ipc_peer_s = NULL;
    /* the peer must not free or reuse its buffer while it is mapped here */
    MPI_CHECK(PMPI_Barrier(MPI_COMM_WORLD));
}

static void ipc_send(Bench *b, Side s, size_t n) {
    char rts = 1, fin;
    (void)s, (void)n;
    MPI_CHECK(PMPI_Send(&rts, 1, MPI_BYTE, b->peer, TAG_RTS, MPI_COMM_WORLD));
    MPI_CHECK(PMPI_Recv(&fin, 1, MPI_BYTE, b->peer, TAG_FIN, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}
static void ipc_recv_window(Bench *b, Side s, size_t n, int w) {
    char rts, fin = 1;
    MPI_CHECK(PMPI_Recv(&rts, 1, MPI_BYTE, b->peer, TAG_RTS, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int i = 0; i < w; i++)
        CUDA_CHECK(cudaMemcpyAsync(s.buf, b->ipc_peer_s, n, cudaMemcpyDeviceToDevice, b->stream[0]));
    CUDA_CHECK(cudaStreamSynchronize(b->stream[0]));
    MPI_CHECK(PMPI_Send(&fin, 1, MPI_BYTE, b->peer, TAG_FIN, MPI_COMM_WORLD));
}
static void ipc_recv(Bench *b, Side s, size_t n) { ipc_recv_window(b, s, n, 1); }
static void ipc_send_window(Bench *b, Side s, size_t n, int w) {
    (void)w;
    ipc_send(b, s, n);
}

/* ------------------------------------------------------------------ MPI-ACC */

static int mpiacc_setup(Bench *b, char *why, size_t whylen) {
    int ok = MPIX_Query_cuda_support(), all = 0;
    why[0] = '\0';
    if (!ok) snprintf(why, whylen, "MPIX_Query_cuda_support() returned 0 on rank %d", b->rank);
    MPI_CHECK(PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all && ok) snprintf(why, whylen, "MPIX_Query_cuda_support() returned 0 on the other rank");
    if (all && b->cuda_type == MPI_DATATYPE_NULL) {
        MPI_CHECK(MPI_Type_dup(MPI_BYTE, &b->cuda_type));
        MPI_CHECK(MPI_Type_set_attr(b->cuda_type, MPIX_ACC_BUF_TYPE, (void *)(intptr_t)MPIX_ACC_BUF_CUDA));
    }
    return all;
}

static MPI_Datatype acc_type(const Bench *b, Side s, int tagged) { return tagged && s.dev ? b->cuda_type : MPI_BYTE; }

static void acc_send_impl(Bench *b, Side s, size_t n, int tagged) {
    MPI_CHECK(MPI_Send(s.buf, (int)n, acc_type(b, s, tagged), b->peer, TAG_DATA, MPI_COMM_WORLD));
}
static void acc_recv_impl(Bench *b, Side s, size_t n, int tagged) {
    MPI_CHECK(MPI_Recv(s.buf, (int)n, acc_type(b, s, tagged), b->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}
static void acc_send_window_impl(Bench *b, Side s, size_t n, int w, int tagged) {
    for (int i = 0; i < w; i++)
        MPI_CHECK(MPI_Isend(s.buf, (int)n, acc_type(b, s, tagged), b->peer, TAG_DATA, MPI_COMM_WORLD, &b->reqs[i]));
    MPI_CHECK_ALL(MPI_Waitall(w, b->reqs, b->stats), w, b->stats);
}
static void acc_recv_window_impl(Bench *b, Side s, size_t n, int w, int tagged) {
    for (int i = 0; i < w; i++)
        MPI_CHECK(MPI_Irecv(s.buf, (int)n, acc_type(b, s, tagged), b->peer, TAG_DATA, MPI_COMM_WORLD, &b->reqs[i]));
    MPI_CHECK_ALL(MPI_Waitall(w, b->reqs, b->stats), w, b->stats);
}
static void acc_send(Bench *b, Side s, size_t n) { acc_send_impl(b, s, n, 1); }
static void acc_recv(Bench *b, Side s, size_t n) { acc_recv_impl(b, s, n, 1); }
static void acc_send_window(Bench *b, Side s, size_t n, int w) { acc_send_window_impl(b, s, n, w, 1); }
static void acc_recv_window(Bench *b, Side s, size_t n, int w) { acc_recv_window_impl(b, s, n, w, 1); }
static void auto_send(Bench *b, Side s, size_t n) { acc_send_impl(b, s, n, 0); }
static void auto_recv(Bench *b, Side s, size_t n) { acc_recv_impl(b, s, n, 0); }
static void auto_send_window(Bench *b, Side s, size_t n, int w) { acc_send_window_impl(b, s, n, w, 0); }
static void auto_recv_window(Bench *b, Side s, size_t n, int w) { acc_recv_window_impl(b, s, n, w, 0); }

static const Config configs[] = {
    {"mpich-host", DIR_HH, 0, 0, NULL, host_send, host_recv, host_send_window, host_recv_window, NULL, NULL},
    {"staged", DIR_DEV, 0, 0, NULL, staged_send, staged_recv, NULL, NULL, NULL, NULL},
    {"pipeline", DIR_DEV, 0, 0, NULL, pipeline_send, pipeline_recv, NULL, NULL, NULL, NULL},
    {"nccl", DIR_DD, 0, 0, nccl_setup, nccl_send, nccl_recv, nccl_send_window, nccl_recv_window, nccl_teardown, NULL},
    {"memcpy-peer", DIR_DD, 0, 1, peer_setup, peer_copy, NULL, peer_copy_window, NULL, peer_teardown,
     peer_verify},
    {"ipc-pull", DIR_DD, 0, 0, ipc_setup, ipc_send, ipc_recv, ipc_send_window, ipc_recv_window, ipc_teardown, NULL},
    {"mpiacc", DIR_DEV, 1, 0, mpiacc_setup, acc_send, acc_recv, acc_send_window, acc_recv_window, NULL, NULL},
    {"mpiacc-auto", DIR_DEV, 1, 0, mpiacc_setup, auto_send, auto_recv, auto_send_window, auto_recv_window, NULL, NULL},
};

#include "bench_measure.h"

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
    Bench bb, *b = &bb;
    memset(b, 0, sizeof *b);
    b->cuda_type = MPI_DATATYPE_NULL;

    /* Pick the device before MPI_Init, so that MPI-ACC's CUDA context lands on it. */
    cudaError_t count_err = cudaGetDeviceCount(&b->ndev);
    if (count_err == cudaSuccess && b->ndev > 0) cudaSetDevice(local_rank_from_env() % b->ndev);

    MPI_Init(&argc, &argv);
    int nranks;
    PMPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &nranks);
    g_rank = b->rank;
    b->peer = 1 - b->rank;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    g_prog = "pt2pt";
    if (!parse_options(argc, argv, &b->o, 256L << 20, DEFAULT_SIZES) || nranks != 2) {
        if (b->rank == 0) {
            if (nranks != 2) fprintf(stderr, "pt2pt: needs exactly 2 ranks, got %d\n", nranks);
            usage();
        }
        MPI_Finalize();
        return 2;
    }
    if (count_err != cudaSuccess || b->ndev == 0) {
        fprintf(stderr, "pt2pt: rank %d: no usable CUDA device: cudaGetDeviceCount: %s\n", b->rank,
                count_err != cudaSuccess ? cudaGetErrorString(count_err) : "0 devices");
        MPI_Finalize();
        return 1;
    }
    if (!b->o.label) b->o.label = env_is_off("MPIACC_IPC") ? "noipc" : "";
    b->device = b->rank % b->ndev;
    CUDA_CHECK(cudaSetDevice(b->device));

    if (!setup_host_side(b)) {
        MPI_Finalize();
        return 2;
    }
    CUDA_CHECK(cudaMalloc((void **)&b->dev_s, b->max_bytes));
    CUDA_CHECK(cudaMalloc((void **)&b->dev_r, b->max_bytes));
    CUDA_CHECK(cudaMallocHost((void **)&b->pinned, b->max_bytes));
    CUDA_CHECK(cudaMemcpy(b->dev_s, b->pat_self, b->max_bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(b->dev_r, 0, b->max_bytes));
    for (int i = 0; i < 2; i++) CUDA_CHECK(cudaStreamCreateWithFlags(&b->stream[i], cudaStreamNonBlocking));
    for (int i = 0; i < PIPE_DEPTH; i++) {
        CUDA_CHECK(cudaMallocHost((void **)&b->slot[i], (size_t)b->chunk));
        CUDA_CHECK(cudaEventCreateWithFlags(&b->slot_ev[i], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaDeviceSynchronize());

    /* Describe the devices once, for the table and the CSV. */
    struct cudaDeviceProp prop;
    char bus[32] = "?", devinfo[1024];
    CUDA_CHECK(cudaGetDeviceProperties(&prop, b->device));
    cudaDeviceGetPCIBusId(bus, sizeof bus, b->device);
    char mine[320], theirs[320];
    snprintf(mine, sizeof mine, "%s (%s)", prop.name, bus);
    MPI_CHECK(PMPI_Sendrecv(mine, sizeof mine, MPI_CHAR, b->peer, TAG_HANDLE, theirs, sizeof theirs, MPI_CHAR, b->peer,
                            TAG_HANDLE, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    snprintf(devinfo, sizeof devinfo, "visible_devices=%d rank0_device=\"%d %s\" rank1_device=\"%d %s\"", b->ndev,
             b->rank == 0 ? b->device : b->peer % b->ndev, b->rank == 0 ? mine : theirs,
             b->rank == 1 ? b->device : b->peer % b->ndev, b->rank == 1 ? mine : theirs);
    if (b->rank == 0) {
        const char *ipc = getenv("MPIACC_IPC");
        char details[1200];
        snprintf(details, sizeof details, "%s MPIACC_IPC=%.64s", devinfo, ipc ? ipc : "(unset)");
        csv_header(b, argc, argv, details);
        printf("# pt2pt: 2 ranks, %s\n", devinfo);
        printf("# one-way latency = round trip / 2 (memcpy-peer: one copy); bandwidth in GB/s (1e9 B/s);"
               " window <= %ld, window x size <= %ld B\n", b->o.window, b->o.bw_bytes);
    }
    run_all(b);
    if (b->cuda_type != MPI_DATATYPE_NULL) MPI_Type_free(&b->cuda_type);
    if (b->rank == 0 && b->nccl_version) printf("# nccl version %d\n", b->nccl_version);
    const int ret = finish_run(b);
    MPI_Finalize();
    return ret;
}
