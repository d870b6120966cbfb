/* bench/coll's OpenCL kind: cl_mem buffers on the platform whose name contains
 * $MPIACC_OPENCL_PLATFORM (the first with a device when unset), device local_rank % ndev,
 * one in-order queue; staging through CL_MEM_ALLOC_HOST_PTR buffers kept mapped (pinned
 * host memory, as the OpenCL staging anchors of bench/pt2pt_opencl use). */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <mpiacc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_parts.h"

#define CL_CHECK(call)                                                                                            \
    do {                                                                                                          \
        cl_int e_ = (call);                                                                                       \
        if (e_ != CL_SUCCESS) coll_fail("%s:%d: %s failed: OpenCL error %d", __FILE__, __LINE__, #call, (int)e_); \
    } while (0)

enum { MAX_PINNED = 4 };
static cl_context g_ctx;
static cl_command_queue g_queue;
static struct {
    cl_mem mem;
    void *host;
} g_pinned[MAX_PINNED];

static int cl_open(int local_rank, char *desc, size_t desclen, char *id, size_t idlen, char *why, size_t whylen) {
    cl_uint np = 0;
    cl_int e = clGetPlatformIDs(0, NULL, &np);
    if (e != CL_SUCCESS || np == 0) {
        snprintf(why, whylen, "no OpenCL platform (clGetPlatformIDs: %d)", (int)e);
        return 0;
    }
    if (!MPIX_Query_opencl_support()) {
        snprintf(why, whylen, "MPIX_Query_opencl_support() returned 0");
        return 0;
    }
    cl_platform_id plats[16];
    if (np > 16) np = 16;
    CL_CHECK(clGetPlatformIDs(np, plats, NULL));
    const char *want = getenv("MPIACC_OPENCL_PLATFORM");
    cl_device_id dev = NULL;
    cl_platform_id plat = NULL;
    char pname[256] = "";
    for (cl_uint i = 0; i < np && !dev; i++) {
        cl_uint nd = 0;
        cl_device_id devs[16];
        clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
        if (want && *want && !strstr(pname, want)) continue;
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS || nd == 0) continue;
        if (nd > 16) nd = 16;
        dev = devs[(cl_uint)local_rank % nd];
        plat = plats[i];
    }
    if (!dev) {
        snprintf(why, whylen, "no OpenCL platform with a device%s%s%s", want && *want ? " whose name contains \"" : "",
                 want && *want ? want : "", want && *want ? "\" (MPIACC_OPENCL_PLATFORM)" : "");
        return 0;
    }
    char dname[256] = "";
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof dname - 1, dname, NULL);
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
    g_ctx = clCreateContext(props, 1, &dev, NULL, NULL, &e);
    CL_CHECK(e);
    g_queue = clCreateCommandQueue(g_ctx, dev, 0, &e);
    CL_CHECK(e);
    snprintf(desc, desclen, "%.120s on %.120s", dname, pname);
    /* Devices have no bus id in OpenCL 1.2; the name stands in (only NCCL asks, not this kind). */
    snprintf(id, idlen, "%.120s", dname);
    return 1;
}

static void *cl_alloc(size_t bytes) {
    cl_int e;
    cl_mem m = clCreateBuffer(g_ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
    CL_CHECK(e);
    cl_uchar zero = 0;
    CL_CHECK(clEnqueueFillBuffer(g_queue, m, &zero, 1, 0, bytes, 0, NULL, NULL));
    CL_CHECK(clFinish(g_queue));
    return (void *)m;
}
static void cl_release(void *buf) { CL_CHECK(clReleaseMemObject((cl_mem)buf)); }

static void *cl_alloc_pinned(size_t bytes) {
    for (int i = 0; i < MAX_PINNED; i++) {
        if (g_pinned[i].mem) continue;
        cl_int e;
        g_pinned[i].mem = clCreateBuffer(g_ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, &e);
        CL_CHECK(e);
        g_pinned[i].host = clEnqueueMapBuffer(g_queue, g_pinned[i].mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes,
                                              0, NULL, NULL, &e);
        CL_CHECK(e);
        memset(g_pinned[i].host, 0, bytes);
        return g_pinned[i].host;
    }
    coll_fail("more than %d pinned buffers", MAX_PINNED);
}
static void cl_release_pinned(void *p) {
    for (int i = 0; i < MAX_PINNED; i++)
        if (g_pinned[i].host == p && g_pinned[i].mem) {
            CL_CHECK(clEnqueueUnmapMemObject(g_queue, g_pinned[i].mem, p, 0, NULL, NULL));
            CL_CHECK(clFinish(g_queue));
            CL_CHECK(clReleaseMemObject(g_pinned[i].mem));
            g_pinned[i].mem = NULL;
            g_pinned[i].host = NULL;
        }
}

static void cl_to_host(void *host, void *buf, size_t bytes) {
    CL_CHECK(clEnqueueReadBuffer(g_queue, (cl_mem)buf, CL_TRUE, 0, bytes, host, 0, NULL, NULL));
}
static void cl_from_host(void *buf, const void *host, size_t bytes) {
    CL_CHECK(clEnqueueWriteBuffer(g_queue, (cl_mem)buf, CL_TRUE, 0, bytes, host, 0, NULL, NULL));
}

static MPI_Datatype cl_tagged_float(void) {
    MPI_Datatype t;
    if (MPI_Type_dup(MPI_FLOAT, &t) != MPI_SUCCESS ||
        MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(intptr_t)MPIX_ACC_BUF_OPENCL) != MPI_SUCCESS ||
        MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)g_queue) != MPI_SUCCESS)
        coll_fail("cannot tag a float type MPIX_ACC_BUF_OPENCL with a command queue");
    return t;
}

/* Called after MPI_Finalize: MPI-ACC may hold the queue in its cache until then. */
static void cl_close(void) {
    if (!g_queue) return;
    clFinish(g_queue);
    clReleaseCommandQueue(g_queue);
    clReleaseContext(g_ctx);
    g_queue = NULL;
}

const DeviceKind opencl_kind = {
    .name = "opencl",
    .open = cl_open,
    .alloc = cl_alloc,
    .release = cl_release,
    .alloc_pinned = cl_alloc_pinned,
    .release_pinned = cl_release_pinned,
    .to_host = cl_to_host,
    .from_host = cl_from_host,
    .tagged_float = cl_tagged_float,
    .close = cl_close,
};
