/* FDM-Seismology: what the driver (main.c), the model and serial reference (reference.c), the
 * device layer and the three main loops share. The program is built twice from one driver:
 * seismology on OpenCL (device_opencl.c, loop_mpi_gpu.c, loop_mpi_gpu_adv.c, loop_mpi_acc.c)
 * and, with SEISMOLOGY_CUDA defined, seismology_cuda on CUDA (device_cuda.c, seis_kernels.cu,
 * the loop_*_cuda.c files).
 *
 * The global grid is nx x ny x nz cells (z is depth), cut along x into one slab per rank on
 * a 1D, non-periodic process grid. A rank keeps its nine fields in one device buffer (a
 * cl_mem, or a CUDA allocation), each field an (nz + 4) x (ny + 4) x (lnx + 4) block, x
 * fastest: two cells of halo (x) or of zero edge (y, z) on every side, as the 4th-order
 * stencil reaches two cells. Cell (i, j, k) of the slab's interior is element
 * ((k + 2) * nyp + j + 2) * nxp + i + 2 of its field. */
#ifndef SEISMOLOGY_H_INCLUDED
#define SEISMOLOGY_H_INCLUDED

#ifdef SEISMOLOGY_CUDA
#include <cuda_runtime_api.h>
#else
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif
#include <mpi.h>
#include <stdio.h>

#include "physics.h"

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
#ifdef SEISMOLOGY_CUDA
    cudaStream_t stream; /* every kernel's, and the one MPI-ACC's types name */
    float *wave;         /* FIELDS fields */
    float *coef, *damp;  /* p->coef; the slab's sponge factors, x then y then z */
    int *receivers;      /* RECEIVERS ints: index of the sampled vz in `wave`, -1 elsewhere */
    float *traces;       /* slots x RECEIVERS floats, 0 where not sampled here */
#else
    cl_context context;
    cl_command_queue queue; /* in order: a copy enqueued after the kernel sees its output */
    cl_kernel velocity, stress, record, face;
    size_t local[3], global[3]; /* the stencil kernels' NDRange, global rounded up to local */
    cl_mem wave;                /* FIELDS fields */
    cl_mem coef, damp;          /* p->coef; the slab's sponge factors, x then y then z */
    cl_mem receivers;           /* RECEIVERS ints: index of the sampled vz in `wave`, -1 elsewhere */
    cl_mem traces;              /* slots x RECEIVERS floats, 0 where not sampled here */
#endif
    int source; /* index of the source cell in a field, -1 when not in the slab */
    int async;  /* --async, while mpi-acc runs: the compute steps do not wait */
} domain;

typedef struct {
    double compute, marshal, copy, comm; /* seconds, summed over the steps */
} step_times;

/* CUDA_CHECK(call) or CL_CHECK(call): every rank stops, with a message naming the call. */
#ifdef SEISMOLOGY_CUDA
#include "../common/cuda_check.h"
#else
#include "../common/opencl_check.h"
#endif

/* The device layer (device_opencl.c or device_cuda.c). */
extern const char kProgram[];    /* "seismology" or "seismology_cuda": messages and the CSV's name */
extern const char kDeviceKind[]; /* "OpenCL" or "CUDA" */
extern const char kDeviceHelp[]; /* the usage's lines on how a rank finds its device */
/* 1 when this rank has a device to use (remembered for device_open), 0 when it has none. */
int device_find(int local_rank);
/* The queue or stream, the kernels and the slab's buffers on the device found, with the
 * model's coefficients, the sponge factors `damp` (lnx, then ny, then nz floats) and the
 * receivers' indices `where` (RECEIVERS ints) in them; d->source is set before. */
void device_open(domain *d, const float *damp, const int *where);
/* Every field and trace at zero, waited for: the start of every run. */
void device_zero(domain *d);
/* Waits for all the work enqueued (--async leaves the last kernels queued). */
void device_finish(domain *d);
/* The whole wavefield (FIELDS x field floats, halos included) and the slots x RECEIVERS
 * samples into host memory. */
void device_read(const domain *d, float *wave, float *traces);
void device_close(domain *d);

/* The shared compute steps, each waited for so that the time splits (unless d->async),
 * added to t->compute. On OpenCL `done` (NULL for none) gets the kernel's event, which the
 * caller releases; on CUDA the stream orders what follows. */
#ifdef SEISMOLOGY_CUDA
void velocity_step(domain *d, step_times *t);
void stress_step(domain *d, int step, step_times *t);
#else
void velocity_step(domain *d, step_times *t, cl_event *done);
void stress_step(domain *d, int step, step_times *t, cl_event *done);
#endif
/* Samples the receivers after step `step` when a sample is due. */
void record_step(domain *d, int step, step_times *t);

/* Host memory of the variants that stage through it (main.c): the four faces, STRESS_FIELDS
 * each, and for mpi-gpu a mirror of the whole wavefield (NULL otherwise). */
typedef struct {
    float *mirror;
    float *send_west, *recv_west, *send_east, *recv_east;
} host_buffers;
host_buffers host_buffers_alloc(const domain *d, int mirror);
void host_buffers_free(host_buffers *hb);
/* mpi-gpu's CPU marshaling (main.c), between `count` fields' HALO columns from column `i0`
 * of the host mirror and a contiguous buffer, x fastest, then y, z and field (the order of
 * mpi-acc's subarray and of mpi-gpu-adv's face kernel). */
void marshal(const domain *d, float *mirror, int first, int count, int i0, float *buf, int to_buffer);

/* mpi-acc's four faces of a phase (main.c): HALO columns of `count` fields, interior rows
 * only, each a subarray of the phase's fields; `tag` sets a type's MPI-ACC attributes (the
 * phase starts at field `first`) before it is committed. */
typedef struct {
    MPI_Datatype send_west, recv_west, send_east, recv_east;
} face_types;
face_types make_face_types(const domain *d, int first, int count,
                           void (*tag)(const domain *d, int first, MPI_Datatype t));
void free_face_types(face_types *ft);

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
