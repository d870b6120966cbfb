/* How fast MPICH moves host data between two ranks of one node, by how the buffers were
 * allocated: MPI-ACC's pipeline (MPIACC_IPC=0, the path between nodes) sends each chunk
 * from one pinned staging slot to another through MPICH, and its bandwidth trails MPICH's
 * own host-to-host rate by 7-13% at 4-16 MiB (issue 4, criterion 5). If MPICH's
 * single-copy path (CMA) cannot take pages the CUDA driver mapped, or takes 4 KiB pages
 * slower than huge ones, the slots' allocation decides it.
 *
 *   $MPICC -O2 -I/usr/local/cuda/include -o /tmp/pinned-xfer maint/diag/pinned-host-transfer.c \
 *       -L/usr/local/cuda/lib64 -lcudart
 *   mpiexec -n 2 /tmp/pinned-xfer [ROUNDS] [mixed|chunked|h2d]
 *
 * Each line: allocation, message size, GB/s of windows of 8 messages (median of ROUNDS).
 * Both ranks allocate alike, or with `mixed` the sender (rank 0) and the receiver (rank 1)
 * differently, as in the pipeline's host->device direction (the sender's own buffer into
 * a staging slot) and device->host (a slot into the receiver's own buffer).
 * `chunked` asks whether cutting a message into pieces costs MPICH bandwidth: one malloc
 * buffer each side, each message of 4 or 16 MiB sent whole or as back-to-back chunks (all
 * posted at once), windows of 16 messages from the one buffer into the other, as
 * bench/pt2pt measures MPICH host-to-host; each line gives the chunk size too.
 * `h2d` asks what the IPC-off host->device pipeline's receiver costs MPICH: the sender's
 * malloc buffer goes as 16 MiB messages (windows of 8) into one malloc buffer (bench/pt2pt's
 * MPICH anchor) or one thp+register buffer, or as chunks of 1-8 MiB into a few thp+register
 * slots, each slot's receive posted again once it lands, or once it lands and its copy to
 * the device (cudaMemcpyAsync and an event, polled as the library polls) has ended, as the
 * pipeline's receiver does. Each line adds the receiver's time inside the CUDA calls per
 * chunk. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cuda_check.h"

enum { WINDOW = 8, CHUNKED_WINDOW = 16, MAX_MESSAGES = 64 };
static const size_t kBytes = 64u << 20; /* per buffer: WINDOW messages of up to 8 MiB */

typedef struct {
    const char *name;
    void *(*alloc)(size_t);
} Kind;

static void *by_malloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 2u << 20, n)) return NULL;
    return p;
}
static void *by_mallochost(size_t n) {
    void *p = NULL;
    CK(cudaMallocHost(&p, n));
    return p;
}
static void *mapped(size_t n, int huge) {
    /* 2 MiB aligned, so that THP can back it */
    size_t len = n + (2u << 20);
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    char *a = (char *)(((unsigned long)p + (2u << 20) - 1) & ~((2ul << 20) - 1));
    if (huge) madvise(a, n, MADV_HUGEPAGE);
    memset(a, 1, n);
    return a;
}
static void *by_mmap_register(size_t n) {
    void *p = mapped(n, 0);
    CK(cudaHostRegister(p, n, cudaHostRegisterPortable));
    return p;
}
static void *by_thp_register(size_t n) {
    void *p = mapped(n, 1);
    CK(cudaHostRegister(p, n, cudaHostRegisterPortable));
    return p;
}
static void *by_thp(size_t n) { return mapped(n, 1); }

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A window ends when the receiver (rank 1) says it has all of it, as bench/pt2pt's do. */
static void window_ack(int rank) {
    char ack = 0;
    if (rank == 1)
        MPI_Send(&ack, 1, MPI_BYTE, 0, 99, MPI_COMM_WORLD);
    else
        MPI_Recv(&ack, 1, MPI_BYTE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* Median GB/s over `rounds` of `batches` batches, each `msgs` messages of `bytes` from
 * consecutive offsets of buf, posted at once and then waited for. */
static double window_rate(char *buf, size_t bytes, int msgs, int batches, int rounds, int rank) {
    double rate[64];
    for (int r = 0; r < rounds + 1; r++) {
        MPI_Request req[MAX_MESSAGES];
        MPI_Status st[MAX_MESSAGES];
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        for (int b = 0; b < batches; b++) {
            for (int k = 0; k < msgs; k++) {
                if (rank == 0)
                    MPI_Isend(buf + k * bytes, (int)bytes, MPI_BYTE, 1, k, MPI_COMM_WORLD, &req[k]);
                else
                    MPI_Irecv(buf + k * bytes, (int)bytes, MPI_BYTE, 0, k, MPI_COMM_WORLD, &req[k]);
            }
            MPI_Waitall(msgs, req, st);
        }
        window_ack(rank);
        t = MPI_Wtime() - t;
        if (r > 0) rate[r - 1] = (double)batches * msgs * bytes / t / 1e9;
    }
    qsort(rate, rounds, sizeof rate[0], cmp);
    return rate[rounds / 2];
}

enum { H2D_WINDOW = 8, H2D_MAX_DEPTH = 8, H2D_MIN_CHUNK = 1u << 20, H2D_MAX_CHUNK = 8u << 20 };
static const size_t kH2dMessage = 16u << 20;
#define H2D_SENDS (H2D_WINDOW * (16u << 20) / H2D_MIN_CHUNK)

typedef struct {
    const char *name;
    size_t chunk; /* 0: each message whole, into one buffer */
    int depth, to_device, into_malloc;
} H2dVariant;

static double now_us(void) { return MPI_Wtime() * 1e6; }

/* One round of an `h2d` chunked variant: H2D_WINDOW messages of kH2dMessage as chunks of
 * v->chunk, rank 0 from buf, rank 1 into v->depth slots (each then copied to dev when
 * v->to_device). Returns GB/s; *cuda_us (rank 1) gets the time in CUDA calls per chunk. */
static double h2d_chunked_round(const H2dVariant *v, char *buf, char **slots, char *dev, cudaStream_t stream,
                                cudaEvent_t *ev, int rank, double *cuda_us) {
    const size_t chunk = v->chunk;
    const int chunks = (int)(kH2dMessage / chunk), total = H2D_WINDOW * chunks;
    static MPI_Request sends[H2D_SENDS];
    static MPI_Status st[H2D_SENDS];
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime(), in_cuda = 0;
    if (rank == 0) {
        for (int k = 0; k < total; k++)
            MPI_Isend(buf + (size_t)(k % chunks) * chunk, (int)chunk, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &sends[k]);
        MPI_Waitall(total, sends, st);
    } else {
        enum { FREE, RECEIVING, COPYING } state[H2D_MAX_DEPTH];
        MPI_Request req[H2D_MAX_DEPTH];
        int chunk_of[H2D_MAX_DEPTH], next = 0, done = 0;
        for (int d = 0; d < v->depth; d++) state[d] = FREE;
        while (done < total) {
            for (int d = 0; d < v->depth; d++) {
                if (state[d] == FREE && next < total) {
                    chunk_of[d] = next++;
                    MPI_Irecv(slots[d], (int)chunk, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &req[d]);
                    state[d] = RECEIVING;
                }
                if (state[d] == RECEIVING) {
                    int flag = 0;
                    MPI_Test(&req[d], &flag, MPI_STATUS_IGNORE);
                    if (!flag) continue;
                    if (!v->to_device) {
                        state[d] = FREE;
                        done++;
                        continue;
                    }
                    double c = now_us();
                    CK(cudaMemcpyAsync(dev + (size_t)(chunk_of[d] % chunks) * chunk, slots[d], chunk,
                                       cudaMemcpyHostToDevice, stream));
                    CK(cudaEventRecord(ev[d], stream));
                    in_cuda += now_us() - c;
                    state[d] = COPYING;
                } else if (state[d] == COPYING) {
                    double c = now_us();
                    cudaError_t e = cudaEventQuery(ev[d]);
                    in_cuda += now_us() - c;
                    if (e == cudaErrorNotReady) continue;
                    CK(e);
                    state[d] = FREE;
                    done++;
                }
            }
        }
    }
    window_ack(rank);
    t = MPI_Wtime() - t;
    *cuda_us = in_cuda / total;
    return (double)H2D_WINDOW * kH2dMessage / t / 1e9;
}

/* The `h2d` mode (see the top). */
static void h2d(int rounds, int rank) {
    static const H2dVariant variants[] = {
        {"whole>malloc (MPICH anchor)", 0, 0, 0, 1}, {"whole>thp+register", 0, 0, 0, 0},
        {"1M chunks>4 slots", 1u << 20, 4, 0, 0},    {"1M chunks>4 slots+h2d", 1u << 20, 4, 1, 0},
        {"2M chunks>4 slots", 2u << 20, 4, 0, 0},    {"2M chunks>4 slots+h2d", 2u << 20, 4, 1, 0},
        {"2M chunks>8 slots+h2d", 2u << 20, 8, 1, 0}, {"4M chunks>4 slots", 4u << 20, 4, 0, 0},
        {"4M chunks>4 slots+h2d", 4u << 20, 4, 1, 0}, {"8M chunks>2 slots", 8u << 20, 2, 0, 0},
        {"8M chunks>2 slots+h2d", 8u << 20, 2, 1, 0}};
    enum { VARIANTS = sizeof variants / sizeof variants[0] };
    char *src = by_malloc(kH2dMessage), *into_malloc = by_malloc(kH2dMessage);
    char *into_registered = by_thp_register(kH2dMessage), *slots[H2D_MAX_DEPTH], *dev = NULL;
    cudaStream_t stream;
    cudaEvent_t ev[H2D_MAX_DEPTH];
    if (!src || !into_malloc || !into_registered) MPI_Abort(MPI_COMM_WORLD, 1);
    memset(src, rank, kH2dMessage);
    memset(into_malloc, rank, kH2dMessage);
    CK(cudaMalloc((void **)&dev, kH2dMessage));
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int d = 0; d < H2D_MAX_DEPTH; d++) {
        if (!(slots[d] = by_thp_register(H2D_MAX_CHUNK))) MPI_Abort(MPI_COMM_WORLD, 1);
        CK(cudaEventCreateWithFlags(&ev[d], cudaEventDisableTiming));
    }
    if (rank == 0) printf("%-34s %8s %14s\n", "variant (16 MiB messages)", "GB/s", "cuda us/chunk");
    /* variants interleaved round by round, so that a drifting machine shifts them alike */
    double rate[VARIANTS][64], per_chunk[VARIANTS][64];
    for (int r = 0; r < rounds + 1; r++) {
        for (int k = 0; k < VARIANTS; k++) {
            const H2dVariant *v = &variants[k];
            double gbs, cu = 0;
            if (v->chunk == 0)
                gbs = window_rate(rank == 0 ? src : (v->into_malloc ? into_malloc : into_registered), kH2dMessage, 1,
                                  H2D_WINDOW, 1, rank);
            else
                gbs = h2d_chunked_round(v, src, slots, dev, stream, ev, rank, &cu);
            if (r > 0) rate[k][r - 1] = gbs, per_chunk[k][r - 1] = cu;
        }
    }
    for (int k = 0; k < VARIANTS; k++) {
        qsort(rate[k], rounds, sizeof(double), cmp);
        qsort(per_chunk[k], rounds, sizeof(double), cmp);
        double cu = per_chunk[k][rounds / 2];
        if (rank == 1) MPI_Send(&cu, 1, MPI_DOUBLE, 0, 98, MPI_COMM_WORLD);
        if (rank == 0) {
            MPI_Recv(&cu, 1, MPI_DOUBLE, 1, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            printf("%-34s %8.2f %14.2f\n", variants[k].name, rate[k][rounds / 2], cu);
        }
    }
}

/* The `chunked` mode (see the top). */
static void chunked(int rounds, int rank) {
    const size_t sizes[] = {4u << 20, 16u << 20};
    const size_t chunks[] = {0, 4u << 20, 2u << 20, 1u << 20}; /* 0: whole */
    char *buf = by_malloc(16u << 20);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    memset(buf, rank, 16u << 20);
    if (rank == 0) printf("%10s %10s %8s\n", "bytes", "chunk", "GB/s");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            size_t n = sizes[s], chunk = chunks[c] ? chunks[c] : n;
            if (chunk > n || (chunks[c] && chunk == n)) continue;
            double gbs = window_rate(buf, chunk, (int)(n / chunk), CHUNKED_WINDOW, rounds, rank);
            if (rank == 0) printf("%10zu %10zu %8.2f\n", n, chunk, gbs);
        }
    }
    free(buf);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    if (rounds < 1 || rounds > 64) rounds = 7;
    if (argc > 2 && strcmp(argv[2], "chunked") == 0) {
        chunked(rounds, rank);
        MPI_Finalize();
        return 0;
    }
    CK(cudaSetDevice(rank));
    if (argc > 2 && strcmp(argv[2], "h2d") == 0) {
        h2d(rounds, rank);
        MPI_Finalize();
        return 0;
    }
    if (rank == 0) {
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
        char line[256] = "?";
        if (f && fgets(line, sizeof line, f)) line[strcspn(line, "\n")] = 0;
        if (f) fclose(f);
        printf("# THP: %s\n%-30s %10s %8s\n", line, "allocation", "bytes", "GB/s");
    }
    const Kind kinds[] = {{"malloc", by_malloc},
                          {"cudaMallocHost", by_mallochost},
                          {"mmap+register", by_mmap_register},
                          {"thp+register", by_thp_register},
                          {"thp", by_thp}};
    const size_t sizes[] = {256u << 10, 2u << 20, 8u << 20};
    /* sender kind, receiver kind (indices into kinds) */
    static const int same[][2] = {{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}};
    static const int mixed[][2] = {{0, 0}, {0, 3}, {3, 0}, {3, 3}, {0, 4}, {4, 0}, {0, 1}, {1, 0}};
    int use_mixed = argc > 2 && strcmp(argv[2], "mixed") == 0;
    const int(*pairs)[2] = use_mixed ? mixed : same;
    size_t npairs = use_mixed ? sizeof mixed / sizeof mixed[0] : sizeof same / sizeof same[0];
    for (size_t k = 0; k < npairs; k++) {
        const Kind *mine = &kinds[pairs[k][rank == 0 ? 0 : 1]];
        char name[40];
        if (use_mixed)
            snprintf(name, sizeof name, "%s>%s", kinds[pairs[k][0]].name, kinds[pairs[k][1]].name);
        else
            snprintf(name, sizeof name, "%s", mine->name);
        char *buf = mine->alloc(kBytes);
        if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
        memset(buf, rank, kBytes);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            double gbs = window_rate(buf, sizes[s], WINDOW, 4, rounds, rank);
            if (rank == 0) printf("%-30s %10zu %8.2f\n", name, sizes[s], gbs);
        }
    }
    MPI_Finalize();
    return 0;
}
