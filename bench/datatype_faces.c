/* bench/datatype's halo exchange (datatype.c's opening comment): the six faces of an n^3
 * grid of doubles on each rank, sent D->D as subarray types through MPI-ACC and, as the
 * anchor, packed by hand and sent as contiguous bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mpiacc.h>

#include "datatype_kernels.h"
#include "datatype_parts.h"

enum { NFACES = 6, F_MPIACC = 0, F_KERNEL_SEND = 1, NFCONFIGS = 2 };
static const char *const face_names[NFACES] = {"face-x-lo", "face-x-hi", "face-y-lo",
                                               "face-y-hi", "face-z-lo", "face-z-hi"};
static const char *const fconfig_names[NFCONFIGS] = {"mpiacc", "kernel-send"};

typedef struct {
    long n, bytes;          /* grid edge; bytes of one face */
    double *grid, *ps, *pr; /* device: the grid, the anchor's packed face to send and received */
    double *check;          /* host copy of the grid, for the check */
    DtkBox send_box[NFACES], recv_box[NFACES];
    MPI_Datatype send_type[NFACES], recv_type[NFACES]; /* tagged MPIX_ACC_BUF_CUDA */
} Grid;

/* The value rank r's grid holds at element i until a face arrives: distinct on every
 * element of both ranks, and exact in a double (i < 2^30). */
static double grid_base(int rank) { return (double)rank * 4294967296.0 + 0.5; }

/* Face f = 2 * d + hi crosses dimension d. Its interior plane (1 or n-2 along d, interior
 * along the others) goes to the neighbour on that side; the other neighbour's arrives in
 * the ghost plane on the opposite side (n-1 or 0). Both neighbours are the other rank. */
static void face_boxes(long n, int f, DtkBox *send, DtkBox *recv) {
    const int d = f / 2, hi = f % 2;
    for (int k = 0; k < 3; k++) {
        send->dims[k] = recv->dims[k] = n;
        send->sub[k] = recv->sub[k] = k == d ? 1 : (int)(n - 2);
        send->start[k] = recv->start[k] = 1;
    }
    send->start[d] = hi ? (int)(n - 2) : 1;
    recv->start[d] = hi ? 0 : (int)(n - 1);
}

static MPI_Datatype box_type(const DtkBox *box) {
    int sizes[3], sub[3], start[3];
    for (int k = 0; k < 3; k++) sizes[k] = (int)box->dims[k], sub[k] = box->sub[k], start[k] = box->start[k];
    MPI_Datatype t;
    CHECK_MPI(MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, MPI_DOUBLE, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    CHECK_MPI(MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(intptr_t)MPIX_ACC_BUF_CUDA));
    return t;
}

static void grid_setup(Grid *g, long n) {
    memset(g, 0, sizeof *g);
    g->n = n;
    g->bytes = (n - 2) * (n - 2) * (long)sizeof(double);
    const size_t cells = (size_t)n * (size_t)n * (size_t)n;
    CHECK_CUDA(cudaMalloc((void **)&g->grid, cells * sizeof(double)));
    CHECK_CUDA(cudaMalloc((void **)&g->ps, (size_t)g->bytes));
    CHECK_CUDA(cudaMalloc((void **)&g->pr, (size_t)g->bytes));
    CHECK_CUDA(cudaMemset(g->ps, 0, (size_t)g->bytes));
    g->check = malloc(cells * sizeof(double));
    if (!g->check) die("cannot allocate %zu bytes of host memory", cells * sizeof(double));
    memset(g->check, 0, cells * sizeof(double));
    for (int f = 0; f < NFACES; f++) {
        face_boxes(n, f, &g->send_box[f], &g->recv_box[f]);
        g->send_type[f] = box_type(&g->send_box[f]);
        g->recv_type[f] = box_type(&g->recv_box[f]);
    }
    CHECK_CUDA(cudaDeviceSynchronize());
}

static void grid_free(Grid *g) {
    CHECK_CUDA(cudaFree(g->grid));
    CHECK_CUDA(cudaFree(g->ps));
    CHECK_CUDA(cudaFree(g->pr));
    free(g->check);
    for (int f = 0; f < NFACES; f++) {
        CHECK_MPI(MPI_Type_free(&g->send_type[f]));
        CHECK_MPI(MPI_Type_free(&g->recv_type[f]));
    }
}

static void exchange_mpiacc(Bench *b, Grid *g, int f) {
    MPI_Request req[2];
    MPI_Status st[2];
    CHECK_MPI(MPI_Irecv(g->grid, 1, g->recv_type[f], b->peer, TAG_FACE, MPI_COMM_WORLD, &req[0]));
    CHECK_MPI(MPI_Isend(g->grid, 1, g->send_type[f], b->peer, TAG_FACE, MPI_COMM_WORLD, &req[1]));
    CHECK_MPI_ALL(MPI_Waitall(2, req, st), 2, st);
}

/* What a code does by hand: the receive posted first, then pack, send, wait and unpack. */
static void exchange_kernel_send(Bench *b, Grid *g, int f) {
    const int count = (int)(g->bytes / (long)sizeof(double));
    MPI_Request req[2];
    MPI_Status st[2];
    CHECK_MPI(MPI_Irecv(g->pr, count, b->dbl_cuda, b->peer, TAG_FACE, MPI_COMM_WORLD, &req[0]));
    CHECK_CUDA(dtk_copy_box(g->grid, g->ps, g->send_box[f], 1, b->stream));
    CHECK_CUDA(cudaStreamSynchronize(b->stream));
    CHECK_MPI(MPI_Isend(g->ps, count, b->dbl_cuda, b->peer, TAG_FACE, MPI_COMM_WORLD, &req[1]));
    CHECK_MPI_ALL(MPI_Waitall(2, req, st), 2, st);
    CHECK_CUDA(dtk_copy_box(g->grid, g->pr, g->recv_box[f], 0, b->stream));
    CHECK_CUDA(cudaStreamSynchronize(b->stream));
}

static void exchange(Bench *b, Grid *g, int f, int config) {
    if (config == F_MPIACC)
        exchange_mpiacc(b, g, f);
    else
        exchange_kernel_send(b, g, f);
}

/* MPI-ACC's first exchange of a face, which may be refused: each rank tells the other which
 * of its calls went through, and a message that went out to a refused receive is taken as
 * plain doubles (as is one the refused send owes a posted receive), so that nothing is left
 * pending. Returns 1 when both ranks' calls went through. */
static int probe_exchange(Bench *b, Grid *g, int f) {
    const int count = (int)(g->bytes / (long)sizeof(double));
    MPI_Request req[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st[4];
    int rc = MPI_Irecv(g->grid, 1, g->recv_type[f], b->peer, TAG_FACE, MPI_COMM_WORLD, &req[0]);
    const int recv_ok = !refused(b, rc, "MPI_Irecv");
    rc = MPI_Isend(g->grid, 1, g->send_type[f], b->peer, TAG_FACE, MPI_COMM_WORLD, &req[1]);
    const int send_ok = !refused(b, rc, "MPI_Isend");
    if (!recv_ok) req[0] = MPI_REQUEST_NULL;
    if (!send_ok) req[1] = MPI_REQUEST_NULL;
    int mine[2] = {recv_ok, send_ok}, theirs[2];
    CHECK_MPI(PMPI_Sendrecv(mine, 2, MPI_INT, b->peer, TAG_FLAGS, theirs, 2, MPI_INT, b->peer, TAG_FLAGS,
                            MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    if (!recv_ok && theirs[1])
        CHECK_MPI(MPI_Irecv(g->pr, count, b->dbl_cuda, b->peer, TAG_FACE, MPI_COMM_WORLD, &req[2]));
    if (!send_ok && theirs[0])
        CHECK_MPI(MPI_Isend(g->ps, count, b->dbl_cuda, b->peer, TAG_FACE, MPI_COMM_WORLD, &req[3]));
    CHECK_MPI_ALL(MPI_Waitall(4, req, st), 4, st);
    return recv_ok && send_ok && theirs[0] && theirs[1];
}

/* Doubles of the grid that differ from what one exchange of face f leaves: the other
 * rank's interior plane in the ghost box, this rank's own values everywhere else. */
static long check_grid(Bench *b, const Grid *g, int f) {
    const DtkBox *rb = &g->recv_box[f];
    const int d = f / 2, from = g->send_box[f].start[d];
    const double own = grid_base(b->rank), other = grid_base(b->peer);
    const long n = g->n;
    long bad = 0, first = -1;
    double got0 = 0, want0 = 0;
    const long zs = rb->start[2], ze = zs + rb->sub[2];
    for (long x = 0, i = 0; x < n; x++)
        for (long y = 0; y < n; y++) {
            const int row_inside = x >= rb->start[0] && x < rb->start[0] + rb->sub[0] && y >= rb->start[1] &&
                                   y < rb->start[1] + rb->sub[1];
            for (long z = 0; z < n; z++, i++) {
                double want = own + (double)i;
                if (row_inside && z >= zs && z < ze) {
                    long s[3] = {x, y, z};
                    s[d] = from;
                    want = other + (double)((s[0] * n + s[1]) * n + s[2]);
                }
                if (g->check[i] != want && bad++ == 0) first = i, got0 = g->check[i], want0 = want;
            }
        }
    if (bad)
        fprintf(stderr,
                "datatype: rank %d: VERIFY FAILED %s n=%ld: %ld of %ld doubles differ (first at %ld: got %.17g, "
                "want %.17g)\n",
                b->rank, face_names[f], n, bad, n * n * n, first, got0, want0);
    return bad;
}

/* One exchange from freshly filled grids, every double of both grids checked: "ok",
 * "MISMATCH" or "unsupported" (both ranks answer the same). */
static const char *face_verify(Bench *b, Grid *g, int f, int config) {
    const long cells = g->n * g->n * g->n;
    CHECK_CUDA(dtk_fill(g->grid, cells, grid_base(b->rank), b->stream));
    CHECK_CUDA(cudaStreamSynchronize(b->stream));
    CHECK_MPI(PMPI_Barrier(MPI_COMM_WORLD));
    if (config == F_MPIACC) {
        if (!probe_exchange(b, g, f)) return "unsupported";
    } else {
        exchange(b, g, f, config);
    }
    CHECK_CUDA(cudaMemcpy(g->check, g->grid, (size_t)cells * sizeof(double), cudaMemcpyDeviceToHost));
    long bad = check_grid(b, g, f), all = 0;
    CHECK_MPI(PMPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    if (!all) return "ok";
    if (b->rank == 0) b->mismatches += all, b->failed_checks++;
    return "MISMATCH";
}

/* Seconds per exchange, the slower rank's: rank 0's first two set how many make
 * --min-time, at most --iters. */
static double face_time(Bench *b, Grid *g, int f, int config, long *iters) {
    CHECK_MPI(PMPI_Barrier(MPI_COMM_WORLD));
    double t0 = PMPI_Wtime();
    for (int i = 0; i < 2; i++) exchange(b, g, f, config);
    const double one = (PMPI_Wtime() - t0) / 2;
    long n = one > 0 ? (long)(b->o.min_time / one) + 1 : b->o.iters;
    if (n > b->o.iters) n = b->o.iters;
    CHECK_MPI(PMPI_Bcast(&n, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    CHECK_MPI(PMPI_Barrier(MPI_COMM_WORLD));
    t0 = PMPI_Wtime();
    for (long i = 0; i < n; i++) exchange(b, g, f, config);
    double sec = (PMPI_Wtime() - t0) / (double)n, slowest = 0;
    CHECK_MPI(PMPI_Allreduce(&sec, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    *iters = n;
    return slowest;
}

void run_grid(Bench *b, long n) {
    Grid g;
    set_where("grid %ld setup", n);
    set_phase("setup");
    grid_setup(&g, n);
    int configs[NFCONFIGS], nconfigs = 0;
    for (int c = 0; c < NFCONFIGS; c++)
        if (selected(b->o.configs, fconfig_names[c])) configs[nconfigs++] = c;
    const char *status[NFACES][NFCONFIGS] = {{NULL}};
    double secs[NFACES][NFCONFIGS][MAX_ROUNDS];
    char names[NFCONFIGS][64];
    for (int c = 0; c < NFCONFIGS; c++) config_name(b, fconfig_names[c], 1, names[c], sizeof names[c]);
    /* Face by face, the configurations in an order that turns from round to round. */
    for (long r = 0; r < b->o.rounds; r++)
        for (int f = 0; f < NFACES; f++)
            for (int j = 0; j < nconfigs; j++) {
                const int c = configs[(j + r) % nconfigs];
                set_where("%s %ld %s", face_names[f], n, names[c]);
                if (!status[f][c]) {
                    set_phase("verify");
                    status[f][c] = face_verify(b, &g, f, c);
                }
                if (!strcmp(status[f][c], "unsupported")) continue;
                set_phase("exchange");
                long iters;
                secs[f][c][r] = face_time(b, &g, f, c, &iters);
                print_round(b, face_names[f], n, g.bytes, names[c], "exchange", secs[f][c][r], iters, r,
                            r ? "-" : status[f][c]);
            }
    for (int f = 0; f < NFACES; f++)
        for (int j = 0; j < nconfigs; j++) {
            const int c = configs[j];
            if (!strcmp(status[f][c], "unsupported")) {
                if (b->rank == 0) b->unsupported++;
                print_round(b, face_names[f], n, g.bytes, names[c], "exchange", 0, 0, 0, "unsupported");
            }
            add_result(b, face_names[f], n, g.bytes, fconfig_names[c], names[c], "exchange", secs[f][c],
                       (int)b->o.rounds, status[f][c]);
        }
    set_where("grid %ld teardown", n);
    set_phase("teardown");
    CHECK_MPI(PMPI_Barrier(MPI_COMM_WORLD)); /* neither rank frees what the other may still map */
    grid_free(&g);
}
