/* OpenCL set-up shared by the OpenCL MPI tests: one platform (MPIACC_OPENCL_PLATFORM
 * substring, else the first with a device), the device rank % ndev, a context and an
 * in-order queue; datatypes tagged for cl_mem buffers; host<->cl_mem helpers. */
#ifndef OPENCL_UTIL_H_INCLUDED
#define OPENCL_UTIL_H_INCLUDED

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include "mpiacc.h"
#include "p2p_util.h"

typedef struct {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    int ok;
} ocl_env;

/* The first platform with a device whose name contains MPIACC_OPENCL_PLATFORM (any, when
 * unset), asked of the OpenCL loader alone; null when there is none. *ndevices gets its
 * device count (at most 16). */
static inline cl_platform_id ocl_matching_platform(cl_uint *ndevices) {
    cl_uint np = 0;
    cl_platform_id ps[16];
    if (clGetPlatformIDs(16, ps, &np) != CL_SUCCESS || np == 0) return NULL;
    const char *want = getenv("MPIACC_OPENCL_PLATFORM");
    for (cl_uint i = 0; i < np; ++i) {
        char name[256] = {0};
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
        cl_uint nd = 0;
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
        if (want && *want && !strstr(name, want)) continue;
        *ndevices = nd > 16 ? 16 : nd;
        return ps[i];
    }
    return NULL;
}

static inline ocl_env ocl_setup(void) {
    ocl_env e;
    memset(&e, 0, sizeof e);
    if (!MPIX_Query_opencl_support()) return e;
    cl_uint nd = 0;
    e.platform = ocl_matching_platform(&nd);
    if (!e.platform) return e;
    cl_device_id ds[16];
    clGetDeviceIDs(e.platform, CL_DEVICE_TYPE_ALL, nd, ds, NULL);
    e.device = ds[mt_rank % nd];
    cl_int err;
    e.context = clCreateContext(NULL, 1, &e.device, NULL, NULL, &err);
    if (err != CL_SUCCESS) return e;
    e.queue = clCreateCommandQueueWithProperties(e.context, e.device, NULL, &err);
    if (err != CL_SUCCESS) return e;
    e.ok = 1;
    return e;
}

static inline void ocl_teardown(ocl_env *e) {
    if (e->queue) clReleaseCommandQueue(e->queue);
    if (e->context) clReleaseContext(e->context);
}

static inline cl_mem ocl_alloc(ocl_env *e, size_t n) {
    cl_int err;
    cl_mem m = clCreateBuffer(e->context, CL_MEM_READ_WRITE, n ? n : 1, NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "# [rank %d] clCreateBuffer(%zu) failed: %d\n", mt_rank, n, err);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return m;
}

static inline void ocl_write(ocl_env *e, cl_mem m, size_t off, const void *src, size_t n) {
    if (n) clEnqueueWriteBuffer(e->queue, m, CL_TRUE, off, n, src, 0, NULL, NULL);
}
static inline void ocl_read(ocl_env *e, cl_mem m, size_t off, void *dst, size_t n) {
    if (n) clEnqueueReadBuffer(e->queue, m, CL_TRUE, off, n, dst, 0, NULL, NULL);
}
static inline void ocl_fill(ocl_env *e, cl_mem m, size_t n, unsigned char byte) {
    unsigned char *tmp = (unsigned char *)p2p_alloc(n); /* a cast C++ tests need */
    memset(tmp, byte, n);
    ocl_write(e, m, 0, tmp, n);
    free(tmp);
}

/* MPI_BYTE tagged as an OpenCL buffer on the queue (the dissertation's Fig. 4.1). */
static inline MPI_Datatype ocl_type(ocl_env *e) {
    MPI_Datatype t;
    MPI_Type_dup(MPI_BYTE, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_OPENCL);
    MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)e->queue);
    return t;
}

/* Every rank agrees whether OpenCL is usable; otherwise all cases skip by name. */
static inline int ocl_all_ok(const ocl_env *e) {
    int ok = e->ok, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

/* The OpenCL environment for one case of a program whose other cases need none: 1 when
 * every rank has one, else 0 and the case is reported skipped, by name. */
static inline int ocl_setup_for_case(ocl_env *e, const char *name) {
    *e = ocl_setup();
    if (ocl_all_ok(e)) return 1;
    mt_skip(name, "no usable OpenCL platform");
    return 0;
}

/* The OpenCL environment for a program whose cases all need one on every rank. Where a
 * rank has none (no platform, or none matching MPIACC_OPENCL_PLATFORM), every case is
 * reported skipped, by name, and the program ends there. */
static inline ocl_env ocl_setup_or_skip(const char *const *cases, int ncases) {
    ocl_env e = ocl_setup();
    if (!ocl_all_ok(&e)) {
        for (int i = 0; i < ncases; ++i) mt_skip(cases[i], "no usable OpenCL platform");
        ocl_teardown(&e);
        exit(mt_finalize());
    }
    return e;
}

#endif
