/* Shared by the standalone OpenCL tools in maint/diag (no MPI): CL_CHECK(call), which
 * names a failed call and its error and exits, the pick of a platform by name, and the
 * context, queue and device buffer the tools run on. */
#ifndef MPIACC_DIAG_OCL_CHECK_H
#define MPIACC_DIAG_OCL_CHECK_H
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CL_CHECK(call)                                                                   \
    do {                                                                                 \
        cl_int e_ = (call);                                                              \
        if (e_ != CL_SUCCESS) {                                                          \
            fprintf(stderr, "%s:%d %s: error %d\n", __FILE__, __LINE__, #call, (int)e_); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* The first platform whose name contains `want`, its name in name[len]; NULL when none
 * does (name then holds the first platform's name, or "" when there is none). */
static cl_platform_id ocl_platform_named(const char *want, char *name, size_t len) {
    cl_uint np = 0;
    cl_platform_id plats[8];
    name[0] = '\0';
    if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS || np == 0) return NULL;
    for (cl_uint i = 0; i < np && i < 8; i++) {
        clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, len, name, NULL);
        if (strstr(name, want)) return plats[i];
    }
    clGetPlatformInfo(plats[0], CL_PLATFORM_NAME, len, name, NULL);
    return NULL;
}

/* The first device of `type` on `plat`, a context and an in-order queue on it, and a
 * device buffer of `bytes`; exits on failure. */
static void ocl_open(cl_platform_id plat, cl_device_type type, size_t bytes, cl_context *ctx, cl_command_queue *q,
                     cl_mem *dev) {
    cl_device_id d;
    CL_CHECK(clGetDeviceIDs(plat, type, 1, &d, NULL));
    cl_int err;
    *ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    CL_CHECK(err);
    *q = clCreateCommandQueueWithProperties(*ctx, d, NULL, &err);
    CL_CHECK(err);
    *dev = clCreateBuffer(*ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    CL_CHECK(err);
}

#endif
