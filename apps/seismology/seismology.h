/* FDM-Seismology on OpenCL: what the driver (main.c), the model and serial reference
 * (reference.c) and the three main loops (loop_mpi_gpu.c, loop_mpi_gpu_adv.c,
 * loop_mpi_acc.c) share.
 *
 * The global grid is nx x ny x nz cells (z is depth), cut along x into one slab per rank on
 * a 1D, non-periodic process grid. A rank keeps its nine fields in one cl_mem, each field an
 * (nz + 4) x (ny + 4) x (lnx + 4) block, x fastest: two cells of halo (x) or of zero edge (y,
 * z) on every side, as the 4th-order stencil reaches two cells. Cell (i, j, k) of the slab's
 * interior is element ((k + 2) * nyp + j + 2) * nxp + i + 2 of its field. */
#ifndef SEISMOLOGY_H_INCLUDED
#define SEISMOLOGY_H_INCLUDED

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <mpi.h>
#include <stdio.h>

#include "physics.h"

enum { VX, VY, VZ, SXX, SYY, SZZ, SXY, SXZ, SYZ, FIELDS };
enum { VELOCITY_FIELDS = 3, STRESS_FIELDS = 6, HALO = 2, RECEIVERS = 4 };
/* The six per-layer coefficients of physics.h, each times dt / h: buoyancy at the cell and
 * at k + 1/2, lambda + 2 mu, lambda, mu at the cell and its harmonic mean at k + 1/2. */
enum { COEF_B, COEF_BZ, COEF_L2M, COEF_LAM, COEF_MU, COEF_MUZ, COEFS };

/* One tag per direction of travel, so that a receive matches only the face it expects. */
enum { TAG_EASTWARD = 1, TAG_WESTWARD };

/* The whole run's inputs, the same on every rank and for the reference. */
typedef struct {
    int nx, ny, nz, steps, every; /* every: a trace sample each `every` steps */
    int slots;                    /* trace samples: steps / every */
    double dt, h;                 /* seconds, metres */
    int source[3];                /* global cell of the explosive source (adds to the normal stresses) */
    int receiver_x[RECEIVERS], receiver_y, receiver_z; /* vz is sampled there */
    float *coef;                                       /* COEFS per layer k of nz */
    float *sponge[3];                                  /* damping factor along x, y, z (global index) */
    float *wavelet;                                    /* the source's stress increment at each step */
} problem;

typedef struct {
    MPI_Comm cart; /* the 1D process grid, not periodic */
    int rank, size, west, east;
    int lnx, x0;       /* interior columns of the slab, global index of the first */
    int nxp, nyp, nzp; /* padded extents */
    int field;         /* floats per field */
    const problem *p;
    cl_context context;
    cl_command_queue queue; /* in order: a copy enqueued after the kernel sees its output */
    cl_kernel velocity, stress, record, face;
    size_t local[3], global[3]; /* the stencil kernels' NDRange, global rounded up to local */
    cl_mem wave;                /* FIELDS fields */
    cl_mem coef, damp;          /* p->coef; the slab's sponge factors, x then y then z */
    cl_mem receivers;           /* RECEIVERS ints: index of the sampled vz in `wave`, -1 elsewhere */
    cl_mem traces;              /* slots x RECEIVERS floats, 0 where not sampled here */
    int source;                 /* index of the source cell in a field, -1 when not in the slab */
    int async;                  /* --async, while mpi-acc runs: the compute steps do not wait */
} domain;

typedef struct {
    double compute, marshal, copy, comm; /* seconds, summed over the steps */
} step_times;

/* Stops every rank with a message naming the OpenCL call, its error and the place. */
void cl_fail(cl_int err, const char *call, const char *file, int line);
#define CL_CHECK(call)                                                                      \
    do {                                                                                    \
        cl_int cl_check_err_ = (call);                                                      \
        if (cl_check_err_ != CL_SUCCESS) cl_fail(cl_check_err_, #call, __FILE__, __LINE__); \
    } while (0)

/* The shared compute steps, each waited for so that the time splits (unless d->async),
 * added to t->compute. `done` (NULL for none) gets the kernel's event, which the caller
 * releases. */
void velocity_step(domain *d, step_times *t, cl_event *done);
void stress_step(domain *d, int step, step_times *t, cl_event *done);
/* Samples the receivers after step `step` when a sample is due. */
void record_step(domain *d, int step, step_times *t);

/* The variants' main loops: `steps` time steps from the current state. */
step_times run_mpi_gpu(domain *d, int steps);
step_times run_mpi_gpu_adv(domain *d, int steps);
step_times run_mpi_acc(domain *d, int steps);

/* reference.c: the model, and the serial reference of the whole grid. */
int make_problem(problem *p); /* 0 when the grid is too small for the model */
void free_problem(problem *p);
/* The final interior fields (FIELDS x nz x ny x nx, x fastest) and the traces (slots x
 * RECEIVERS), as the kernels compute them on one rank. */
void reference(const problem *p, float *fields, float *traces);

#endif
