/* Transfers between a cl_mem and host memory checked word by word, with new contents
 * every time, for the GPU machine. bench/pt2pt_opencl checks one transfer per size with
 * the same bytes every time, so it only sees wrong bytes that were never its pattern
 * (session 34: 12 KiB of zeros once, at the end of a 16 MiB message's fourth 2 MiB
 * chunk, host -> cl_mem). Here every word says which rank, round and word of the message
 * wrote it, so a wrong word tells where it came from: never written (zero), an earlier
 * round (stale), or another offset (misplaced).
 *
 *   $MPICC -O2 -o /tmp/ocl-verify-stress maint/diag/ocl-verify-stress.c -lOpenCL
 *   mpiexec -n 2 /tmp/ocl-verify-stress [SECONDS] [SIZES]     (default 30, 4M,16M,64M)
 *
 * Each round, for each size and each of D->H, H->D, D->D (D: a cl_mem with
 * MPIX_ACC_COMMAND_QUEUE, as the benchmark sends; H: malloc memory): both ranks write
 * their send buffer, clear their receive buffer, then rank 0 sends and receives while
 * rank 1 receives and sends (the benchmark's check), then a window of 4 MPI_Isend /
 * MPI_Irecv pairs rank 0 -> rank 1 into 4 buffers, also checked. Prints each wrong run of
 * words and, at the end, the counts. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <mpi.h>
#include <mpiacc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CL_OK(call)                                                                              \
    do {                                                                                         \
        cl_int e_ = (call);                                                                      \
        if (e_ != CL_SUCCESS) {                                                                  \
            fprintf(stderr, "ocl-verify-stress: rank %d: %s: error %d\n", rank, #call, (int)e_); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                        \
        }                                                                                        \
    } while (0)
#define MPI_OK(call)                                                                        \
    do {                                                                                    \
        int e_ = (call);                                                                    \
        if (e_ != MPI_SUCCESS) {                                                            \
            fprintf(stderr, "ocl-verify-stress: rank %d: %s: error %d\n", rank, #call, e_); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                   \
        }                                                                                   \
    } while (0)

enum { WINDOW = 4, MAX_SIZES = 8 };
static int rank;
static cl_context ctx;
static cl_command_queue queue;
static MPI_Datatype cl_type;
static uint64_t *scratch; /* host image of a buffer being written or checked */

/* The word `idx` of a message rank `from` sent in round `round`. */
static uint64_t word(int from, long round, size_t idx) {
    return 0xA5ull << 56 | (uint64_t)(from & 0xF) << 52 | (uint64_t)(round & 0xFFFFF) << 32 | (uint64_t)idx;
}

typedef struct {
    int dev;
    cl_mem mem;
    uint64_t *host;
} Buf;

static void fill(Buf *b, size_t n, int from, long round) {
    uint64_t *w = b->dev ? scratch : b->host;
    for (size_t i = 0; i < n / 8; i++) w[i] = word(from, round, i);
    if (b->dev) CL_OK(clEnqueueWriteBuffer(queue, b->mem, CL_TRUE, 0, n, scratch, 0, NULL, NULL));
}

static void clear(Buf *b, size_t n) {
    if (!b->dev) {
        memset(b->host, 0, n);
        return;
    }
    cl_uchar zero = 0;
    CL_OK(clEnqueueFillBuffer(queue, b->mem, &zero, 1, 0, n, 0, NULL, NULL));
    CL_OK(clFinish(queue));
}

static void describe(char *out, size_t len, uint64_t w) {
    if (w == 0)
        snprintf(out, len, "zero");
    else if (w >> 56 != 0xA5)
        snprintf(out, len, "0x%016llx (no pattern)", (unsigned long long)w);
    else
        snprintf(out, len, "rank %d round %llu word %llu", (int)(w >> 52 & 0xF),
                 (unsigned long long)(w >> 32 & 0xFFFFF), (unsigned long long)(w & 0xFFFFFFFF));
}

/* Wrong words of a message rank `from` sent in `round`, printed as runs. */
static long check(Buf *b, size_t n, int from, long round, const char *what) {
    const uint64_t *w = b->host;
    if (b->dev) {
        CL_OK(clEnqueueReadBuffer(queue, b->mem, CL_TRUE, 0, n, scratch, 0, NULL, NULL));
        w = scratch;
    }
    long bad = 0;
    int runs = 0;
    for (size_t i = 0; i < n / 8;) {
        if (w[i] == word(from, round, i)) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n / 8 && w[j] != word(from, round, j)) j++;
        bad += (long)(j - i);
        if (runs++ < 4) {
            char first[96], last[96];
            describe(first, sizeof first, w[i]);
            describe(last, sizeof last, w[j - 1]);
            fprintf(
                stderr,
                "ocl-verify-stress: rank %d round %ld %s %zu B: bytes [%zu, %zu) wrong (%zu B): first %s, last %s\n",
                rank, round, what, n, i * 8, j * 8, (j - i) * 8, first, last);
        }
        i = j;
    }
    return bad * 8;
}

static void send(Buf *b, size_t n) {
    MPI_OK(MPI_Send(b->dev ? (void *)b->mem : (void *)b->host, (int)n, b->dev ? cl_type : MPI_BYTE, 1 - rank, 7,
                    MPI_COMM_WORLD));
}
static void recv(Buf *b, size_t n) {
    MPI_OK(MPI_Recv(b->dev ? (void *)b->mem : (void *)b->host, (int)n, b->dev ? cl_type : MPI_BYTE, 1 - rank, 7,
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}

static Buf make(int dev, size_t n) {
    Buf b = {dev, NULL, NULL};
    if (dev) {
        cl_int e;
        b.mem = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n, NULL, &e);
        CL_OK(e);
    } else {
        b.host = malloc(n);
        memset(b.host, 0, n);
    }
    return b;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double seconds = argc > 1 ? atof(argv[1]) : 30;
    size_t sizes[MAX_SIZES];
    int nsizes = 0;
    size_t max = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", argc > 2 ? argv[2] : "4M,16M,64M");
    for (char *t = strtok(list, ","); t && nsizes < MAX_SIZES; t = strtok(NULL, ",")) {
        char *end;
        size_t v = strtoull(t, &end, 10);
        if (*end == 'K') v <<= 10;
        if (*end == 'M') v <<= 20;
        sizes[nsizes++] = v;
        if (v > max) max = v;
    }

    cl_platform_id plats[8], plat = NULL;
    cl_uint np = 0;
    CL_OK(clGetPlatformIDs(8, plats, &np));
    const char *want = getenv("MPIACC_OPENCL_PLATFORM");
    for (cl_uint i = 0; i < np && !plat; i++) {
        char name[256];
        clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
        if (!want || strstr(name, want)) plat = plats[i];
    }
    if (!plat) plat = plats[0];
    cl_device_id devs[8];
    cl_uint nd = 0;
    CL_OK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 8, devs, &nd));
    cl_device_id d = devs[rank % nd];
    cl_int e;
    ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
    CL_OK(e);
    queue = clCreateCommandQueueWithProperties(ctx, d, NULL, &e);
    CL_OK(e);
    MPI_OK(MPI_Type_dup(MPI_BYTE, &cl_type));
    MPI_OK(MPI_Type_set_attr(cl_type, MPIX_ACC_BUF_TYPE, (void *)(intptr_t)MPIX_ACC_BUF_OPENCL));
    MPI_OK(MPI_Type_set_attr(cl_type, MPIX_ACC_COMMAND_QUEUE, (void *)queue));
    scratch = malloc(max > (4u << 20) ? max : (4u << 20)); /* the windows' 4 MiB too */

    /* dirs: rank 0's side, rank 1's side */
    const int sides[3][2] = {{1, 0}, {0, 1}, {1, 1}};
    const char *names[3] = {"D->H", "H->D", "D->D"};
    Buf s[2][2], r[2][2], win[2][WINDOW]; /* [dev][...] */
    for (int dev = 0; dev < 2; dev++) {
        s[dev][0] = make(dev, max);
        r[dev][0] = make(dev, max);
        for (int k = 0; k < WINDOW; k++) win[dev][k] = make(dev, 4u << 20);
    }
    long bad[3][MAX_SIZES] = {{0}}, checks[3][MAX_SIZES] = {{0}}, win_bad[3] = {0}, rounds = 0;
    double t0 = MPI_Wtime();
    for (long round = 1;; round++) {
        int stop = MPI_Wtime() - t0 > seconds;
        MPI_OK(MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD));
        if (stop) break;
        rounds = round;
        for (int di = 0; di < 3; di++) {
            const int mine = sides[di][rank];
            for (int si = 0; si < nsizes; si++) {
                size_t n = sizes[si];
                fill(&s[mine][0], n, rank, round);
                clear(&r[mine][0], n);
                MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
                if (rank == 0) {
                    send(&s[mine][0], n);
                    recv(&r[mine][0], n);
                } else {
                    recv(&r[mine][0], n);
                    send(&s[mine][0], n);
                }
                bad[di][si] += check(&r[mine][0], n, 1 - rank, round, names[di]);
                checks[di][si]++;
            }
            /* A window rank 0 -> rank 1 of 4 MiB messages, each into its own buffer. */
            MPI_Request req[WINDOW];
            MPI_Status st[WINDOW];
            const size_t n = 4u << 20;
            for (int k = 0; k < WINDOW; k++) {
                if (rank == 0)
                    fill(&win[mine][k], n, rank, round * 8 + k);
                else
                    clear(&win[mine][k], n);
            }
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
            for (int k = 0; k < WINDOW; k++) {
                Buf *b = &win[mine][k];
                void *p = b->dev ? (void *)b->mem : (void *)b->host;
                MPI_Datatype t = b->dev ? cl_type : MPI_BYTE;
                if (rank == 0)
                    MPI_OK(MPI_Isend(p, (int)n, t, 1, 8, MPI_COMM_WORLD, &req[k]));
                else
                    MPI_OK(MPI_Irecv(p, (int)n, t, 0, 8, MPI_COMM_WORLD, &req[k]));
            }
            MPI_OK(MPI_Waitall(WINDOW, req, st));
            if (rank == 1)
                for (int k = 0; k < WINDOW; k++) win_bad[di] += check(&win[mine][k], n, 0, round * 8 + k, names[di]);
        }
    }
    long all[3][MAX_SIZES], all_win[3];
    MPI_OK(MPI_Reduce(bad, all, 3 * MAX_SIZES, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    MPI_OK(MPI_Reduce(win_bad, all_win, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        printf("ocl-verify-stress: %ld rounds in %.0f s\n", rounds, MPI_Wtime() - t0);
        for (int di = 0; di < 3; di++) {
            printf("  %s:", names[di]);
            for (int si = 0; si < nsizes; si++)
                printf("  %zu B: %ld wrong bytes in %ld checks each way", sizes[si], all[di][si], checks[di][si]);
            printf("  window: %ld wrong bytes\n", all_win[di]);
        }
    }
    MPI_Type_free(&cl_type);
    MPI_Finalize();
    return 0;
}
