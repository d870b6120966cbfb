/* FDM-Seismology: a 3D elastic velocity-stress staggered-grid finite-difference code (4th
 * order in space, 2nd in time), with its halo exchange written three ways, as in the MPI-ACC
 * port of FDM-Seismology: mpi-gpu (whole fields copied to the host and marshaled there),
 * mpi-gpu-adv (faces marshaled on the device, only they staged) and mpi-acc (the device
 * buffer handed to MPI with a datatype per face). A layered model (three horizontal layers),
 * an explosive point source (Ricker wavelet), a sponge on all six faces, vz recorded at four
 * receivers. The grid is cut along x, one slab per rank; each step computes velocity,
 * exchanges its halos, computes stress and exchanges its halos.
 *
 * This driver (options, the serial reference, --check, the hash and the CSV) is built twice,
 * over the OpenCL device layer as seismology and over the CUDA one as seismology_cuda
 * (seismology.h):
 *
 *   mpiexec -n 4 apps/seismology/seismology --nx 256 --ny 128 --nz 128 --steps 100 --check
 *   mpiexec -n 4 apps/seismology/seismology_cuda --nx 256 --ny 128 --nz 128 --steps 100 --check
 *
 * Without a usable device on every rank it says so and exits with 77 (automake's
 * "skipped"). See apps/seismology/README.md for the lines-of-code count of the loops. */
#include "seismology.h"

#include "../common/app_common.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "results_csv.h"

typedef struct {
    int nx, ny, nz, steps, every, warmup, check, async,
        variants; /* variants: bit 0 mpi-gpu, 1 mpi-gpu-adv, 2 mpi-acc */
    const char *csv;
} options;

static const char *const kVariants[3] = {"mpi-gpu", "mpi-gpu-adv", "mpi-acc"};

static void usage(FILE *f) {
    fprintf(f,
            "usage: mpiexec -n N %s [options]\n"
            "  --nx X --ny Y --nz Z  global grid in cells, z the depth, cut along x (default 256 x 128 x 128)\n"
            "  --steps S           timed time steps (default 100)\n"
            "  --every E           a receiver sample each E steps (default 10)\n"
            "  --warmup W          untimed steps first, from the same start (default 1, at most --steps)\n"
            "  --variant V         mpi-gpu, mpi-gpu-adv, mpi-acc or all (default all, in that order)\n"
            "  --check             compare the final wavefield (its norm, and each field cell by cell) and the\n"
            "                      traces with a serial reference on rank 0; tolerance 4 * FLT_EPSILON * (steps + 1),\n"
            "                      relative to the norm, to each field's largest value and the largest sample\n"
            "  --async             mpi-acc only: the compute steps enqueue their kernels and do not wait, the sends\n"
            "                      wait for them through the types' MPIX_ACC_EVENT (OpenCL) or MPIX_ACC_STREAM\n"
            "                      (CUDA); compute then counts the enqueues only, and comm the kernels too\n"
            "  --csv FILE          per-step compute, marshaling, copy and communication times, one row per variant\n"
            "                      (a folder, or a path ending in '/', gets %s-<date>.csv)\n"
            "  --help              this text\n"
            "%s",
            kProgram, kProgram, kDeviceHelp);
}

static int variant_bits(const char *v) {
    if (!strcmp(v, "all")) return 7;
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, kVariants[i])) return 1 << i;
    return 0;
}

/* 0 on success, 1 for --help, 2 (with the message printed on rank 0) for a bad option. */
static int parse(int argc, char **argv, int rank, options *o) {
    *o = (options){.nx = 256, .ny = 128, .nz = 128, .steps = 100, .every = 10, .warmup = 1, .variants = 7};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "--help")) return 1;
        if (!strcmp(a, "--check")) {
            o->check = 1;
            continue;
        }
        if (!strcmp(a, "--async")) {
            o->async = 1;
            continue;
        }
        if (!strcmp(a, "--nx"))
            ok = app_number(v, 1, &o->nx);
        else if (!strcmp(a, "--ny"))
            ok = app_number(v, 1, &o->ny);
        else if (!strcmp(a, "--nz"))
            ok = app_number(v, 1, &o->nz);
        else if (!strcmp(a, "--steps"))
            ok = app_number(v, 1, &o->steps);
        else if (!strcmp(a, "--every"))
            ok = app_number(v, 1, &o->every);
        else if (!strcmp(a, "--warmup"))
            ok = app_number(v, 0, &o->warmup);
        else if (!strcmp(a, "--csv"))
            ok = (o->csv = v) && *v;
        else if (!strcmp(a, "--variant"))
            ok = v && (o->variants = variant_bits(v));
        else {
            if (rank == 0) fprintf(stderr, "%s: unknown option %s\n", kProgram, a);
            return 2;
        }
        if (!ok) {
            if (rank == 0) fprintf(stderr, "%s: bad option %s %s\n", kProgram, a, v ? v : "(missing value)");
            return 2;
        }
        i++;
    }
    if (o->warmup > o->steps) {
        if (rank == 0) fprintf(stderr, "%s: --warmup %d is more than --steps %d\n", kProgram, o->warmup, o->steps);
        return 2;
    }
    return 0;
}

/* The slab's inputs to the device: its sponge factors (returned, lnx then ny then nz floats,
 * for the caller to free), where its receivers sit in the wavefield (-1 where not in the
 * slab) and, into d->source, where its source sits in a field. */
static float *slab_inputs(domain *d, int where[RECEIVERS]) {
    const problem *p = d->p;
    float *damp = malloc((size_t)(d->lnx + p->ny + p->nz) * sizeof(float));
    memcpy(damp, p->sponge[0] + d->x0, (size_t)d->lnx * sizeof(float));
    memcpy(damp + d->lnx, p->sponge[1], (size_t)p->ny * sizeof(float));
    memcpy(damp + d->lnx + p->ny, p->sponge[2], (size_t)p->nz * sizeof(float));
    for (int r = 0; r < RECEIVERS; r++) {
        const int i = p->receiver_x[r] - d->x0;
        where[r] = i < 0 || i >= d->lnx
                       ? -1
                       : VZ * d->field + ((p->receiver_z + HALO) * d->nyp + p->receiver_y + HALO) * d->nxp + i + HALO;
    }
    const int si = p->source[0] - d->x0;
    d->source =
        si < 0 || si >= d->lnx ? -1 : ((p->source[2] + HALO) * d->nyp + p->source[1] + HALO) * d->nxp + si + HALO;
    return damp;
}

host_buffers host_buffers_alloc(const domain *d, int mirror) {
    const size_t face = (size_t)STRESS_FIELDS * d->p->nz * d->p->ny * HALO * sizeof(float);
    return (host_buffers){
        .mirror = mirror ? malloc((size_t)FIELDS * d->field * sizeof(float)) : NULL,
        .send_west = malloc(face),
        .recv_west = malloc(face),
        .send_east = malloc(face),
        .recv_east = malloc(face),
    };
}

void host_buffers_free(host_buffers *hb) {
    float *all[] = {hb->mirror, hb->send_west, hb->recv_west, hb->send_east, hb->recv_east};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* HALO columns from column `i0` of `count` fields, interior rows only. */
static MPI_Datatype face(const domain *d, int first, int count, int i0,
                         void (*tag)(const domain *d, int first, MPI_Datatype t)) {
    const int sizes[4] = {count, d->nzp, d->nyp, d->nxp}, subsizes[4] = {count, d->p->nz, d->p->ny, HALO};
    const int starts[4] = {0, HALO, HALO, i0};
    MPI_Datatype t;
    MPI_Type_create_subarray(4, sizes, subsizes, starts, MPI_ORDER_C, MPI_FLOAT, &t);
    tag(d, first, t);
    MPI_Type_commit(&t);
    return t;
}

face_types make_face_types(const domain *d, int first, int count,
                           void (*tag)(const domain *d, int first, MPI_Datatype t)) {
    return (face_types){
        .send_west = face(d, first, count, HALO, tag),
        .recv_west = face(d, first, count, 0, tag),
        .send_east = face(d, first, count, d->lnx, tag),
        .recv_east = face(d, first, count, d->lnx + HALO, tag),
    };
}

void free_face_types(face_types *ft) {
    MPI_Datatype *all[] = {&ft->send_west, &ft->recv_west, &ft->send_east, &ft->recv_east};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) MPI_Type_free(all[i]);
}

/* main loop: begin */
/* mpi-gpu's marshaling, shared by both forms (seismology.h); counted in mpi-gpu's main loop. */
void marshal(const domain *d, float *mirror, int first, int count, int i0, float *buf, int to_buffer) {
    const int ny = d->p->ny, nz = d->p->nz;
    for (int f = 0; f < count; f++) {
        for (int k = 0; k < nz; k++) {
            for (int j = 0; j < ny; j++) {
                float *cell = mirror + (size_t)(first + f) * d->field + ((k + HALO) * d->nyp + j + HALO) * d->nxp + i0;
                float *packed = buf + (((size_t)f * nz + k) * ny + j) * HALO;
                for (int c = 0; c < HALO; c++) to_buffer ? (packed[c] = cell[c]) : (cell[c] = packed[c]);
            }
        }
    }
}
/* main loop: end */

/* The final interior fields on rank 0 (FIELDS x nz x ny x nx, NULL elsewhere), and the traces
 * summed there (a receiver is sampled on one rank, 0 on the others). Host memory only: this
 * is the check, not the application. */
static float *gather(const domain *d, float *traces) {
    const problem *p = d->p;
    const size_t whole = (size_t)FIELDS * d->field, rows = (size_t)FIELDS * p->nz * p->ny;
    const int samples = p->slots * RECEIVERS;
    float *w = malloc(whole * sizeof(float)), *mine = malloc(rows * d->lnx * sizeof(float));
    float *part = malloc((size_t)(samples ? samples : 1) * sizeof(float));
    device_read(d, w, part);
    for (size_t r = 0; r < rows; r++) {
        const size_t f = r / ((size_t)p->nz * p->ny), k = r / p->ny % p->nz, j = r % p->ny;
        memcpy(mine + r * d->lnx, w + f * d->field + ((k + HALO) * d->nyp + j + HALO) * d->nxp + HALO,
               (size_t)d->lnx * sizeof(float));
    }
    free(w);
    MPI_Reduce(part, traces, samples, MPI_FLOAT, MPI_SUM, 0, d->cart);
    free(part);
    if (d->rank != 0) {
        MPI_Send(mine, (int)(rows * d->lnx), MPI_FLOAT, 0, 0, d->cart);
        free(mine);
        return NULL;
    }
    float *all = malloc(rows * p->nx * sizeof(float));
    for (int r = 0; r < d->size; r++) {
        int lnx, x0;
        app_split(p->nx, d->size, r, &lnx, &x0);
        float *slab = mine;
        if (r != 0) {
            slab = malloc(rows * lnx * sizeof(float));
            MPI_Recv(slab, (int)(rows * lnx), MPI_FLOAT, r, 0, d->cart, MPI_STATUS_IGNORE);
        }
        for (size_t row = 0; row < rows; row++)
            memcpy(all + row * p->nx + x0, slab + row * lnx, (size_t)lnx * sizeof(float));
        free(slab);
    }
    return all;
}

static double norm(const float *v, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)v[i] * v[i];
    return sqrt(s);
}

/* The largest |got - want| over n values, relative to the largest |want| (a NaN counts as
 * infinitely far; all-zero `want` as scale 1). */
static double max_rel_diff(const float *got, const float *want, size_t n) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(want[i]));
        diff = fmax(diff, isnan(got[i]) ? INFINITY : fabs((double)got[i] - want[i]));
    }
    return diff / (scale > 0 ? scale : 1);
}

/* What --check found for one variant: relative differences from the reference. */
typedef struct {
    int ok;
    double norm, fields, traces; /* the norm's; the largest over the fields, each to its own scale; the traces' */
    char text[320];
} verdict;

/* Rank 0 compares the gathered wavefield and traces with the reference (computed once). */
static verdict check(const domain *d, float **ref_fields, float **ref_traces) {
    const problem *p = d->p;
    const size_t per_field = (size_t)p->nz * p->ny * p->nx, n = FIELDS * per_field;
    const size_t samples = (size_t)p->slots * RECEIVERS;
    verdict v = {1, 0, 0, 0, ""};
    float *traces = malloc((samples ? samples : 1) * sizeof(float));
    float *fields = gather(d, traces);
    if (d->rank == 0) {
        if (!*ref_fields) {
            *ref_fields = malloc(n * sizeof(float));
            *ref_traces = malloc((samples ? samples : 1) * sizeof(float));
            reference(p, *ref_fields, *ref_traces);
        }
        const double tol = 4 * FLT_EPSILON * (p->steps + 1), ref_norm = norm(*ref_fields, n);
        v.norm = fabs(norm(fields, n) - ref_norm) / (ref_norm > 0 ? ref_norm : 1);
        for (int f = 0; f < FIELDS; f++)
            v.fields = fmax(v.fields, max_rel_diff(fields + f * per_field, *ref_fields + f * per_field, per_field));
        v.traces = max_rel_diff(traces, *ref_traces, samples);
        v.ok = v.norm <= tol && v.fields <= tol && v.traces <= tol && isfinite(ref_norm) && ref_norm > 0;
        snprintf(v.text, sizeof v.text,
                 "check %s: norm %.6g, rel diffs norm %.3g fields %.3g traces %.3g (tolerance %.3g), wavefield fnv1a "
                 "0x%016llx",
                 v.ok ? "OK" : "FAILED", ref_norm, v.norm, v.fields, v.traces, tol,
                 (unsigned long long)app_fnv1a(fields, n));
    }
    free(fields);
    free(traces);
    return v;
}

/* Opens the 1D process grid and finds the slab and its neighbours; 0 (message on rank 0)
 * when the grid cannot be cut that way. */
static int make_domain(const problem *p, domain *d) {
    int size, rank, dims[1] = {0}, periods[1] = {0};
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Dims_create(size, 1, dims);
    const double floats = (double)FIELDS * (p->nx / size + 1 + 2 * HALO) * (p->ny + 2 * HALO) * (p->nz + 2 * HALO);
    if (p->nx < HALO * size || floats > INT_MAX) {
        if (rank == 0)
            fprintf(stderr, "%s: %d columns do not cut into %d slabs of at least %d columns and at most %d floats\n",
                    kProgram, p->nx, size, HALO, INT_MAX);
        return 0;
    }
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &d->cart);
    MPI_Comm_rank(d->cart, &d->rank);
    d->size = size;
    MPI_Cart_shift(d->cart, 0, 1, &d->west, &d->east);
    app_split(p->nx, size, d->rank, &d->lnx, &d->x0);
    d->nxp = d->lnx + 2 * HALO, d->nyp = p->ny + 2 * HALO, d->nzp = p->nz + 2 * HALO;
    d->field = d->nxp * d->nyp * d->nzp;
    d->p = p;
    return 1;
}

static step_times run_variant(domain *d, int v, int steps, int async) {
    device_zero(d);
    d->async = async && v == 2;
    const step_times t = v == 0 ? run_mpi_gpu(d, steps) : v == 1 ? run_mpi_gpu_adv(d, steps) : run_mpi_acc(d, steps);
    device_finish(d);
    return t;
}

/* The largest of each time over the ranks, and of their sum, on rank 0. */
static void most_over_ranks(const domain *d, const step_times *mine, double most[5]) {
    const double t[5] = {mine->compute, mine->marshal, mine->copy, mine->comm,
                         mine->compute + mine->marshal + mine->copy + mine->comm};
    MPI_Reduce(t, most, 5, MPI_DOUBLE, MPI_MAX, 0, d->cart);
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
    problem p = {.nx = o.nx, .ny = o.ny, .nz = o.nz, .steps = o.steps, .every = o.every};
    domain d = {0};
    if (!make_problem(&p)) {
        if (rank == 0) fprintf(stderr, "%s: the grid needs at least 4 x 4 x 6 cells\n", kProgram);
        MPI_Finalize();
        return 2;
    }
    if (!make_domain(&p, &d)) {
        free_problem(&p);
        MPI_Finalize();
        return 2;
    }

    MPI_Comm node;
    int local_rank = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    int where[RECEIVERS], usable = device_find(local_rank), all_usable = 0;
    MPI_Allreduce(&usable, &all_usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_usable) {
        if (rank == 0) printf("%s: no usable %s device on some rank; nothing to show\n", kProgram, kDeviceKind);
        free_problem(&p);
        MPI_Finalize();
        return 77;
    }
    float *damp = slab_inputs(&d, where);
    device_open(&d, damp, where);
    free(damp);

    FILE *csv = NULL;
    char csv_path[4096] = "", lib[MPI_MAX_LIBRARY_VERSION_STRING];
    if (o.csv && d.rank == 0) {
        csv = open_results_csv(o.csv, kProgram, csv_path, sizeof csv_path);
        if (!csv) fprintf(stderr, "%s: cannot write %s\n", kProgram, csv_path);
    }
    if (csv) {
        begin_results_csv(csv, kProgram, argc, argv, lib);
        fprintf(csv,
                "# %s\nvariant,precision,ranks,nx,ny,nz,steps,every,compute_us,marshal_us,copy_us,comm_us,total_us,"
                "check,norm_rel_diff,field_rel_diff,trace_rel_diff\n",
                lib);
    }
    float *ref_fields = NULL, *ref_traces = NULL;
    int failed = 0;
    for (int v = 0; v < 3; v++) {
        if (!(o.variants & (1 << v))) continue;
        /* The first steps build kernels and set up staging on both sides; then a fresh start. */
        if (o.warmup) run_variant(&d, v, o.warmup, o.async);
        MPI_Barrier(d.cart);
        const step_times mine = run_variant(&d, v, o.steps, o.async);
        double most[5];
        most_over_ranks(&d, &mine, most);
        verdict verdict = {1, 0, 0, 0, "check off"};
        if (o.check) verdict = check(&d, &ref_fields, &ref_traces);
        failed |= !verdict.ok;
        if (d.rank == 0) {
            const double us = 1e6 / o.steps;
            const char *name = v == 2 && o.async ? "mpi-acc-async" : kVariants[v];
            printf(
                "%s: %s, %d ranks, %dx%dx%d cells, %d steps: compute %.1f, marshal %.1f, copy %.1f, comm %.1f "
                "us/step, %s\n",
                kProgram, name, size, o.nx, o.ny, o.nz, o.steps, most[0] * us, most[1] * us, most[2] * us, most[3] * us,
                verdict.text);
            if (csv) {
                char diffs[96] = ",,";
                if (o.check)
                    snprintf(diffs, sizeof diffs, "%.3g,%.3g,%.3g", verdict.norm, verdict.fields, verdict.traces);
                fprintf(csv, "%s,float,%d,%d,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%s,%s\n", name, size, o.nx, o.ny,
                        o.nz, o.steps, o.every, most[0] * us, most[1] * us, most[2] * us, most[3] * us, most[4] * us,
                        !o.check     ? "off"
                        : verdict.ok ? "ok"
                                     : "failed",
                        diffs);
            }
            fflush(stdout);
        }
    }
    if (csv) {
        fclose(csv);
        printf("%s: wrote %s\n", kProgram, csv_path);
    }
    free(ref_fields);
    free(ref_traces);
    MPI_Bcast(&failed, 1, MPI_INT, 0, d.cart);
    device_close(&d);
    MPI_Comm_free(&d.cart);
    free_problem(&p);
    MPI_Finalize();
    return failed ? 1 : 0;
}
