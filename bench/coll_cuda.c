/* bench/coll's CUDA kind: device buffers from cudaMalloc, staging through cudaMallocHost
 * memory on one stream of this rank's device, and NCCL called directly (libnccl.so.2
 * loaded with dlopen, so the program builds and runs without it). */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <mpiacc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_parts.h"

#define CUDA_CHECK(call)                                                                              \
    do {                                                                                              \
        cudaError_t e_ = (call);                                                                      \
        if (e_ != cudaSuccess)                                                                        \
            coll_fail("%s:%d: %s failed: %s (%s)", __FILE__, __LINE__, #call, cudaGetErrorString(e_), \
                      cudaGetErrorName(e_));                                                          \
    } while (0)

static int g_device = -1;
static cudaStream_t g_stream;

void cuda_pick_device_early(int local_rank) {
    int n = 0;
    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) cudaSetDevice(local_rank % n);
    (void)cudaGetLastError(); /* no device here: open() says so later */
}

static int cuda_open(int local_rank, char *desc, size_t desclen, char *id, size_t idlen, char *why, size_t whylen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(why, whylen, "no usable CUDA device (cudaGetDeviceCount: %s, %d devices)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "no error", n);
        (void)cudaGetLastError();
        return 0;
    }
    if (!MPIX_Query_cuda_support()) {
        snprintf(why, whylen, "MPIX_Query_cuda_support() returned 0");
        return 0;
    }
    g_device = local_rank % n;
    CUDA_CHECK(cudaSetDevice(g_device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    struct cudaDeviceProp prop;
    char bus[32] = "?";
    CUDA_CHECK(cudaGetDeviceProperties(&prop, g_device));
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, g_device) != cudaSuccess) snprintf(bus, sizeof bus, "%.31s", prop.name);
    snprintf(desc, desclen, "%d %s (%s)", g_device, prop.name, bus);
    snprintf(id, idlen, "%s", bus);
    return 1;
}

static void *cuda_alloc(size_t bytes) {
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    CUDA_CHECK(cudaDeviceSynchronize());
    return p;
}
static void cuda_release(void *p) { CUDA_CHECK(cudaFree(p)); }
static void *cuda_alloc_pinned(size_t bytes) {
    void *p = NULL;
    CUDA_CHECK(cudaMallocHost(&p, bytes));
    memset(p, 0, bytes); /* fault the pages in before timing */
    return p;
}
static void cuda_release_pinned(void *p) { CUDA_CHECK(cudaFreeHost(p)); }

static void cuda_to_host(void *host, void *buf, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(host, buf, bytes, cudaMemcpyDeviceToHost, g_stream));
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
}
static void cuda_from_host(void *buf, const void *host, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(buf, host, bytes, cudaMemcpyHostToDevice, g_stream));
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
}

static MPI_Datatype cuda_tagged_float(void) {
    MPI_Datatype t;
    if (MPI_Type_dup(MPI_FLOAT, &t) != MPI_SUCCESS ||
        MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(intptr_t)MPIX_ACC_BUF_CUDA) != MPI_SUCCESS)
        coll_fail("cannot tag a float type MPIX_ACC_BUF_CUDA");
    return t;
}

/* ------------------------------------------------------------------ NCCL, loaded at run time */

/* The few NCCL types and calls used here, so that the program builds without nccl.h. */
typedef struct {
    char internal[128];
} NcclUniqueId;
typedef void *NcclComm;
enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0 };
static struct {
    void *lib;
    NcclComm comm;
    int version;
    int (*get_version)(int *);
    int (*get_unique_id)(NcclUniqueId *);
    int (*comm_init_rank)(NcclComm *, int, NcclUniqueId, int);
    int (*comm_destroy)(NcclComm);
    int (*all_reduce)(const void *, void *, size_t, int, int, NcclComm, cudaStream_t);
    int (*reduce)(const void *, void *, size_t, int, int, int, NcclComm, cudaStream_t);
    int (*broadcast)(const void *, void *, size_t, int, int, NcclComm, cudaStream_t);
    int (*all_gather)(const void *, void *, size_t, int, NcclComm, cudaStream_t);
    int (*reduce_scatter)(const void *, void *, size_t, int, int, NcclComm, cudaStream_t);
    int (*send)(const void *, size_t, int, int, NcclComm, cudaStream_t);
    int (*recv)(void *, size_t, int, int, NcclComm, cudaStream_t);
    int (*group_start)(void);
    int (*group_end)(void);
    const char *(*error_string)(int);
} nccl;

#define NCCL_CHECK(call)                                                                                  \
    do {                                                                                                  \
        int r_ = (call);                                                                                  \
        if (r_ != 0) coll_fail("%s:%d: %s failed: %s", __FILE__, __LINE__, #call, nccl.error_string(r_)); \
    } while (0)

/* Loads the library and its symbols on this rank; 0 with a reason. */
static int nccl_load(char *why, size_t whylen) {
    if (!nccl.lib) nccl.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!nccl.lib) {
        const char *err = dlerror();
        snprintf(why, whylen, "libnccl.so.2 not loadable: %s", err ? err : "?");
        return 0;
    }
    struct {
        const char *sym;
        void **fn;
    } syms[] = {{"ncclGetVersion", (void **)&nccl.get_version},
                {"ncclGetUniqueId", (void **)&nccl.get_unique_id},
                {"ncclCommInitRank", (void **)&nccl.comm_init_rank},
                {"ncclCommDestroy", (void **)&nccl.comm_destroy},
                {"ncclAllReduce", (void **)&nccl.all_reduce},
                {"ncclReduce", (void **)&nccl.reduce},
                {"ncclBroadcast", (void **)&nccl.broadcast},
                {"ncclAllGather", (void **)&nccl.all_gather},
                {"ncclReduceScatter", (void **)&nccl.reduce_scatter},
                {"ncclSend", (void **)&nccl.send},
                {"ncclRecv", (void **)&nccl.recv},
                {"ncclGroupStart", (void **)&nccl.group_start},
                {"ncclGroupEnd", (void **)&nccl.group_end},
                {"ncclGetErrorString", (void **)&nccl.error_string}};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].fn = dlsym(nccl.lib, syms[i].sym))) {
            snprintf(why, whylen, "dlsym(%s) failed in libnccl.so.2 (NCCL older than 2.7?)", syms[i].sym);
            return 0;
        }
    return 1;
}

static int cuda_nccl_open(int shared_device, char *why, size_t whylen) {
    int rank, nranks, ok = 1, all = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &nranks);
    why[0] = '\0';
    if (shared_device) {
        /* ncclCommInitRank fails ("Duplicate GPU detected") when two ranks name one device. */
        snprintf(why, whylen, "ranks share one GPU, and NCCL refuses two ranks on one device");
        return 0;
    }
    ok = nccl_load(why, whylen);
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) coll_fail("PMPI_Allreduce");
    if (!all) {
        if (ok) snprintf(why, whylen, "NCCL unusable on another rank");
        return 0;
    }
    nccl.get_version(&nccl.version);
    NcclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0) NCCL_CHECK(nccl.get_unique_id(&id));
    if (PMPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) coll_fail("PMPI_Bcast");
    setenv("NCCL_NVLS_ENABLE", "0", 1); /* never NVLink multicast on the shared machines */
    int r = nccl.comm_init_rank(&nccl.comm, nranks, id, rank);
    ok = r == 0;
    if (!ok) snprintf(why, whylen, "ncclCommInitRank: %s", nccl.error_string(r));
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) coll_fail("PMPI_Allreduce");
    if (!all && ok) snprintf(why, whylen, "ncclCommInitRank failed on another rank");
    return all;
}

static void cuda_nccl_run(int op, void *send, void *recv, size_t count, int nranks) {
    const size_t block = count * sizeof(float);
    switch (op) {
        case OP_ALLREDUCE:
            NCCL_CHECK(nccl.all_reduce(send, recv, count, NCCL_FLOAT32, NCCL_SUM, nccl.comm, g_stream));
            break;
        case OP_REDUCE:
            NCCL_CHECK(nccl.reduce(send, recv, count, NCCL_FLOAT32, NCCL_SUM, COLL_ROOT, nccl.comm, g_stream));
            break;
        case OP_BCAST:
            NCCL_CHECK(nccl.broadcast(recv, recv, count, NCCL_FLOAT32, COLL_ROOT, nccl.comm, g_stream));
            break;
        case OP_ALLGATHER: NCCL_CHECK(nccl.all_gather(send, recv, count, NCCL_FLOAT32, nccl.comm, g_stream)); break;
        case OP_ALLTOALL:
            /* NCCL has no alltoall of its own: a group of sends and receives, as nccl-tests does. */
            NCCL_CHECK(nccl.group_start());
            for (int peer = 0; peer < nranks; peer++) {
                NCCL_CHECK(
                    nccl.send((char *)send + (size_t)peer * block, count, NCCL_FLOAT32, peer, nccl.comm, g_stream));
                NCCL_CHECK(
                    nccl.recv((char *)recv + (size_t)peer * block, count, NCCL_FLOAT32, peer, nccl.comm, g_stream));
            }
            NCCL_CHECK(nccl.group_end());
            break;
        case OP_REDUCE_SCATTER:
            NCCL_CHECK(nccl.reduce_scatter(send, recv, count, NCCL_FLOAT32, NCCL_SUM, nccl.comm, g_stream));
            break;
        default: coll_fail("unknown op %d", op);
    }
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
}

static void cuda_nccl_close(void) {
    if (nccl.comm) NCCL_CHECK(nccl.comm_destroy(nccl.comm));
    nccl.comm = NULL;
}

static const char *cuda_nccl_version(void) {
    static char text[32];
    if (!nccl.version) return NULL;
    snprintf(text, sizeof text, "%d", nccl.version);
    return text;
}

static void cuda_close(void) {
    if (g_device >= 0) CUDA_CHECK(cudaStreamDestroy(g_stream));
}

const DeviceKind cuda_kind = {
    .name = "cuda",
    .open = cuda_open,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .alloc_pinned = cuda_alloc_pinned,
    .release_pinned = cuda_release_pinned,
    .to_host = cuda_to_host,
    .from_host = cuda_from_host,
    .tagged_float = cuda_tagged_float,
    .close = cuda_close,
    .nccl_open = cuda_nccl_open,
    .nccl_run = cuda_nccl_run,
    .nccl_close = cuda_nccl_close,
    .nccl_version = cuda_nccl_version,
};
