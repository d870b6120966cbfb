/* Stencil2D: a SHOC-style 9-point stencil on a 2D process grid, with the halo exchange written
 * two ways (--variant def: staged through host memory by hand; mpi-acc: the device buffer
 * handed to MPI). The global grid is rows x cols floats (single precision, as the MVAPICH2
 * Stencil2D figures), cut into one tile per rank on a non-periodic process grid; cells beyond
 * the grid's edge read as 0 and are never updated. Each iteration exchanges halos with the
 * four neighbours (two phases, so the corners come with the rows) and then applies the
 * stencil into a second buffer, and the two swap.
 *
 * This driver (options, the serial reference, --check and the CSV) is built twice, over the
 * OpenCL device layer as stencil2d and over the CUDA one as stencil2d_cuda (stencil2d.h):
 *
 *   mpiexec -n 4 apps/stencil2d/stencil2d --rows 4096 --cols 4096 --iters 100 --check
 *   mpiexec -n 4 apps/stencil2d/stencil2d_cuda --rows 4096 --cols 4096 --iters 100 --check
 *
 * Without a usable device on every rank it says so and exits with 77 (automake's "skipped").
 * See apps/stencil2d/README.md for the lines-of-code count of the loops. */
#include "stencil2d.h"

#include "../common/app_common.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "results_csv.h"
#include "stencil_cell.h"

/* The reference's cell update: stencil_cell.h's, as C. */
#define GLOBAL_MEM
#define STENCIL2D_FN static inline
STENCIL2D_CELL

typedef struct {
    int rows, cols, iters, warmup, check, prows, pcols, variants; /* variants: bit 0 def, bit 1 mpi-acc */
    const char *csv;
} options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: mpiexec -n N %s [options]\n"
            "  --rows R --cols C   global grid, floats (default 2048 x 2048)\n"
            "  --iters I           timed iterations (default 100)\n"
            "  --warmup W          untimed iterations first, from the same start (default 1)\n"
            "  --variant V         def, mpi-acc or both (default both, def first)\n"
            "  --pgrid PxQ         process grid, P rows of Q ranks (default MPI_Dims_create's)\n"
            "  --check             compare the final grid with a serial reference on rank 0;\n"
            "                      tolerance 4 * FLT_EPSILON * (iters + 1) * max(1, max |reference|)\n"
            "  --csv FILE          per-iteration compute and communication times, one row per variant\n"
            "                      (a folder, or a path ending in '/', gets %s-<date>.csv)\n"
            "  --help              this text\n"
            "%s",
            kProgram, kProgram, kDeviceHelp);
}

/* 0 on success, 1 for --help, 2 (with the message printed on rank 0) for a bad option. */
static int parse(int argc, char **argv, int rank, options *o) {
    *o = (options){.rows = 2048, .cols = 2048, .iters = 100, .warmup = 1, .variants = 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "--help")) return 1;
        if (!strcmp(a, "--check")) {
            o->check = 1;
            continue;
        }
        if (!strcmp(a, "--rows"))
            ok = app_number(v, 1, &o->rows);
        else if (!strcmp(a, "--cols"))
            ok = app_number(v, 1, &o->cols);
        else if (!strcmp(a, "--iters"))
            ok = app_number(v, 1, &o->iters);
        else if (!strcmp(a, "--warmup"))
            ok = app_number(v, 0, &o->warmup);
        else if (!strcmp(a, "--csv"))
            ok = (o->csv = v) && *v;
        else if (!strcmp(a, "--variant"))
            ok = v && (o->variants = !strcmp(v, "def") ? 1 : !strcmp(v, "mpi-acc") ? 2 : !strcmp(v, "both") ? 3 : 0);
        else if (!strcmp(a, "--pgrid")) {
            char tail;
            ok = v && sscanf(v, "%dx%d%c", &o->prows, &o->pcols, &tail) == 2 && o->prows > 0 && o->pcols > 0;
        } else {
            if (rank == 0) fprintf(stderr, "%s: unknown option %s\n", kProgram, a);
            return 2;
        }
        if (!ok) {
            if (rank == 0) fprintf(stderr, "%s: bad option %s %s\n", kProgram, a, v ? v : "(missing value)");
            return 2;
        }
        i++;
    }
    return 0;
}

/* The initial value of global cell (i, j), the same whatever the decomposition: a hash to a
 * multiple of 2^-24 in [0, 1), exact in a float and never subnormal. */
static float initial(int i, int j) {
    uint32_t x = (uint32_t)i * 73856093u ^ (uint32_t)j * 19349663u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

/* Both buffers get the initial tile with a zero halo: the halo on a side without a neighbour
 * is the grid's zero edge and nothing writes it again. */
static void load_initial(tile *t) {
    float *host = calloc((size_t)(t->h + 2) * (size_t)t->pitch, sizeof(float));
    for (int y = 1; y <= t->h; y++)
        for (int x = 1; x <= t->w; x++) host[(size_t)y * t->pitch + x] = initial(t->row0 + y - 1, t->col0 + x - 1);
    device_upload(t, host);
    free(host);
}

host_halos host_halos_alloc(const tile *t) {
    const size_t column = (size_t)t->h * sizeof(float), row = (size_t)t->pitch * sizeof(float);
    return (host_halos){
        .send_west = malloc(column),
        .recv_west = malloc(column),
        .send_east = malloc(column),
        .recv_east = malloc(column),
        .send_north = malloc(row),
        .recv_north = malloc(row),
        .send_south = malloc(row),
        .recv_south = malloc(row),
    };
}

void host_halos_free(host_halos *hh) {
    float *all[] = {hh->send_west,  hh->recv_west,  hh->send_east,  hh->recv_east,
                    hh->send_north, hh->recv_north, hh->send_south, hh->recv_south};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* The serial reference on the whole (rows + 2) x (cols + 2) grid, zero edge included; the
 * same arithmetic, in the same order, as the kernel. Returns the rows x cols interior. */
static float *reference(const options *o) {
    const size_t pitch = (size_t)o->cols + 2, n = ((size_t)o->rows + 2) * pitch;
    float *a = calloc(n, sizeof(float)), *b = calloc(n, sizeof(float));
    for (int i = 0; i < o->rows; i++)
        for (int j = 0; j < o->cols; j++) a[(i + 1) * pitch + j + 1] = initial(i, j);
    for (int it = 0; it < o->iters; it++) {
        for (size_t y = 1; y <= (size_t)o->rows; y++) {
            for (size_t x = 1; x <= (size_t)o->cols; x++) {
                const size_t i = y * pitch + x;
                b[i] = stencil2d_cell(a, (long)i, (long)pitch, kCenter, kCardinal, kDiagonal);
            }
        }
        float *swap = a;
        a = b;
        b = swap;
    }
    float *out = malloc((size_t)o->rows * (size_t)o->cols * sizeof(float));
    for (int i = 0; i < o->rows; i++)
        memcpy(out + (size_t)i * o->cols, a + (i + 1) * pitch + 1, o->cols * sizeof(float));
    free(a);
    free(b);
    return out;
}

/* The final grid, rows x cols, on rank 0 (NULL elsewhere): each rank reads its interior back
 * and sends it there. Host memory only: this is the check, not the application. */
static float *gather_grid(const tile *t, const options *o) {
    float *mine = malloc((size_t)t->h * t->w * sizeof(float));
    device_download_interior(t, mine);
    if (t->rank != 0) {
        MPI_Send(mine, t->h * t->w, MPI_FLOAT, 0, 0, t->cart);
        free(mine);
        return NULL;
    }
    float *grid = malloc((size_t)o->rows * o->cols * sizeof(float));
    for (int r = 0; r < t->size; r++) {
        int coords[2], h, w, row0, col0;
        MPI_Cart_coords(t->cart, r, 2, coords);
        app_split(o->rows, t->dims[0], coords[0], &h, &row0);
        app_split(o->cols, t->dims[1], coords[1], &w, &col0);
        float *part = mine;
        if (r != 0) {
            part = malloc((size_t)h * w * sizeof(float));
            MPI_Recv(part, h * w, MPI_FLOAT, r, 0, t->cart, MPI_STATUS_IGNORE);
        }
        for (int y = 0; y < h; y++)
            memcpy(grid + (size_t)(row0 + y) * o->cols + col0, part + (size_t)y * w, (size_t)w * sizeof(float));
        free(part);
    }
    return grid;
}

/* Opens the process grid, finds the tile and neighbours; 0 (message on rank 0) when the
 * grid cannot be cut that way. */
static int make_tile(const options *o, tile *t) {
    int size, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int dims[2] = {o->prows, o->pcols}, periods[2] = {0, 0};
    if (!o->prows) MPI_Dims_create(size, 2, dims);
    if (dims[0] * dims[1] != size || dims[0] > o->rows || dims[1] > o->cols) {
        if (rank == 0)
            fprintf(stderr, "%s: a %dx%d process grid does not fit %d ranks and a %dx%d grid\n", kProgram, dims[0],
                    dims[1], size, o->rows, o->cols);
        return 0;
    }
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &t->cart);
    MPI_Comm_rank(t->cart, &t->rank);
    t->size = size;
    memcpy(t->dims, dims, sizeof dims);
    MPI_Cart_coords(t->cart, t->rank, 2, t->coords);
    MPI_Cart_shift(t->cart, 0, 1, &t->north, &t->south);
    MPI_Cart_shift(t->cart, 1, 1, &t->west, &t->east);
    app_split(o->rows, dims[0], t->coords[0], &t->h, &t->row0);
    app_split(o->cols, dims[1], t->coords[1], &t->w, &t->col0);
    t->pitch = t->w + 2;
    return 1;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options o;
    const int parsed = parse(argc, argv, rank, &o);
    if (parsed) {
        if (rank == 0) usage(parsed == 1 ? stdout : stderr);
        MPI_Finalize();
        return parsed == 1 ? 0 : 2;
    }
    tile t = {0};
    if (!make_tile(&o, &t)) {
        MPI_Finalize();
        return 2;
    }

    MPI_Comm node;
    int local_rank = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    int usable = device_find(local_rank), all_usable = 0;
    MPI_Allreduce(&usable, &all_usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_usable) {
        if (rank == 0) printf("%s: no usable %s device on some rank; nothing to show\n", kProgram, kDeviceKind);
        MPI_Finalize();
        return 77;
    }
    device_open(&t);

    FILE *csv = NULL;
    char csv_path[4096] = "", lib[MPI_MAX_LIBRARY_VERSION_STRING];
    if (o.csv && t.rank == 0) {
        csv = open_results_csv(o.csv, kProgram, csv_path, sizeof csv_path);
        if (!csv) fprintf(stderr, "%s: cannot write %s\n", kProgram, csv_path);
    }
    if (csv) {
        begin_results_csv(csv, kProgram, argc, argv, lib);
        fprintf(csv,
                "# %s\nvariant,precision,ranks,pgrid,rows,cols,iters,compute_us,comm_us,total_us,check,max_abs_diff\n",
                lib);
    }
    float *ref = NULL;
    int failed = 0;
    for (int v = 0; v < 2; v++) {
        if (!(o.variants & (1 << v))) continue;
        const char *name = v == 0 ? "def" : "mpi-acc";
        /* The first iterations build kernels and set up staging on both sides; then a fresh start. */
        if (o.warmup) {
            load_initial(&t);
            v == 0 ? run_def(&t, o.warmup) : run_mpi_acc(&t, o.warmup);
        }
        load_initial(&t);
        MPI_Barrier(t.cart);
        const loop_times mine = v == 0 ? run_def(&t, o.iters) : run_mpi_acc(&t, o.iters);
        loop_times most;
        MPI_Reduce(&mine.compute, &most.compute, 1, MPI_DOUBLE, MPI_MAX, 0, t.cart);
        MPI_Reduce(&mine.comm, &most.comm, 1, MPI_DOUBLE, MPI_MAX, 0, t.cart);
        const double total = mine.compute + mine.comm;
        double total_most = 0;
        MPI_Reduce(&total, &total_most, 1, MPI_DOUBLE, MPI_MAX, 0, t.cart);
        char verdict[160] = "check off";
        double diff = 0;
        if (o.check) {
            float *grid = gather_grid(&t, &o);
            if (t.rank == 0) {
                if (!ref) ref = reference(&o);
                double scale = 1;
                const size_t n = (size_t)o.rows * o.cols;
                for (size_t i = 0; i < n; i++) {
                    scale = fmax(scale, fabs(ref[i]));
                    diff = fmax(diff, isnan(grid[i]) ? INFINITY : fabs((double)grid[i] - ref[i]));
                }
                const double tol = 4 * FLT_EPSILON * (o.iters + 1) * scale;
                failed |= !(diff <= tol);
                snprintf(verdict, sizeof verdict, "check %s: max abs diff %.3g (tolerance %.3g), grid fnv1a 0x%016llx",
                         diff <= tol ? "OK" : "FAILED", diff, tol, (unsigned long long)app_fnv1a(grid, n));
                free(grid);
            }
        }
        if (t.rank == 0) {
            const double us = 1e6 / o.iters;
            printf(
                "%s: %s, %d ranks (%dx%d), %dx%d floats, %d iters: compute %.1f us/iter, comm %.1f us/iter, "
                "%s\n",
                kProgram, name, size, t.dims[0], t.dims[1], o.rows, o.cols, o.iters, most.compute * us, most.comm * us,
                verdict);
            if (csv) {
                char diff_text[32] = "";
                if (o.check) snprintf(diff_text, sizeof diff_text, "%.3g", diff);
                fprintf(csv, "%s,float,%d,%dx%d,%d,%d,%d,%.3f,%.3f,%.3f,%s,%s\n", name, size, t.dims[0], t.dims[1],
                        o.rows, o.cols, o.iters, most.compute * us, most.comm * us, total_most * us,
                        !o.check                          ? "off"
                        : strncmp(verdict, "check OK", 8) ? "failed"
                                                          : "ok",
                        diff_text);
            }
            fflush(stdout);
        }
    }
    if (csv) {
        fclose(csv);
        printf("%s: wrote %s\n", kProgram, csv_path);
    }
    free(ref);
    MPI_Bcast(&failed, 1, MPI_INT, 0, t.cart);
    device_close(&t);
    MPI_Comm_free(&t.cart);
    MPI_Finalize();
    return failed ? 1 : 0;
}
