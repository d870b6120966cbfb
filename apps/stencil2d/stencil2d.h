/* Stencil2D: what the driver (main.c), the device layer and the two main loops share. The
 * program is built twice from one driver: stencil2d on OpenCL (device_opencl.c, loop_def.c,
 * loop_mpi_acc.c) and, with STENCIL2D_CUDA defined, stencil2d_cuda on CUDA (device_cuda.c,
 * stencil_kernel.cu, loop_def_cuda.c, loop_mpi_acc_cuda.c). Each rank owns an h x w tile of
 * the global grid, stored row-major in device memory (a cl_mem, or a CUDA allocation) with a
 * one-cell halo all round, so one padded row holds `pitch` = w + 2 floats and cell (y, x) of
 * the tile (halo at y = 0, h + 1 and x = 0, w + 1) is element y * pitch + x. */
#ifndef STENCIL2D_H_INCLUDED
#define STENCIL2D_H_INCLUDED

#ifdef STENCIL2D_CUDA
#include <cuda_runtime_api.h>
#else
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif
#include <mpi.h>
#include <stdio.h>

/* SHOC Stencil2D's default weights. */
static const float kCenter = 0.25f, kCardinal = 0.15f, kDiagonal = 0.05f;

/* One tag per direction of travel, so that a receive can only match the face it expects even
 * where one rank is both neighbours. */
enum { TAG_EASTWARD = 1, TAG_WESTWARD, TAG_NORTHWARD, TAG_SOUTHWARD };

typedef struct {
    MPI_Comm cart; /* the 2D process grid, not periodic */
    int rank, size, dims[2], coords[2];
    int north, south, west, east; /* MPI_PROC_NULL at the edge of the grid */
    int h, w, pitch;              /* interior rows and columns; padded row length */
    int row0, col0;               /* global index of the tile's first interior cell */
#ifdef STENCIL2D_CUDA
    cudaStream_t stream; /* the kernel's, and the one MPI-ACC's types name */
    float *cur, *next;   /* the grid now and the one the kernel writes */
#else
    cl_command_queue queue; /* in order: a copy enqueued after the kernel sees its output */
    cl_kernel kernel;
    size_t local[2], global[2]; /* the kernel's NDRange, global rounded up to local */
    cl_mem cur, next;           /* the grid now and the one the kernel writes */
#endif
} tile;

typedef struct {
    double compute, comm; /* seconds, summed over the iterations */
} loop_times;

/* CUDA_CHECK(call) or CL_CHECK(call): every rank stops, with a message naming the call. */
#ifdef STENCIL2D_CUDA
#include "../common/cuda_check.h"
#else
#include "../common/opencl_check.h"
#endif

/* The device layer (device_opencl.c or device_cuda.c). */
extern const char kProgram[];    /* "stencil2d" or "stencil2d_cuda": messages and the CSV's name */
extern const char kDeviceKind[]; /* "OpenCL" or "CUDA" */
extern const char kDeviceHelp[]; /* the usage's lines on how a rank finds its device */
/* 1 when this rank has a device to use (remembered for device_open), 0 when it has none. */
int device_find(int local_rank);
/* The queue or stream, the kernel and both buffers of the tile, on the device found. */
void device_open(tile *t);
/* The whole padded tile, `host`, into both buffers. */
void device_upload(tile *t, const float *host);
/* The interior of t->cur into `interior`, h x w packed. */
void device_download_interior(const tile *t, float *interior);
void device_close(tile *t);

/* One iteration's compute: the stencil from t->cur into t->next, waited for, then the two
 * swapped. Both variants call it, so it counts in both main loops. */
void stencil_step(tile *t);

/* The def variants' host arrays, plain malloc memory as in most such codes (main.c). */
typedef struct {
    float *send_west, *recv_west, *send_east, *recv_east;     /* h floats each */
    float *send_north, *recv_north, *send_south, *recv_south; /* pitch floats each */
} host_halos;
host_halos host_halos_alloc(const tile *t);
void host_halos_free(host_halos *hh);

/* The variants' main loops: `iters` halo exchanges and stencil steps on t->cur. */
loop_times run_def(tile *t, int iters);
loop_times run_mpi_acc(tile *t, int iters);

#endif
