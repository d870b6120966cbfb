/* The OpenCL device an application rank takes: on the platform $MPIACC_OPENCL_PLATFORM names
 * (a substring; unset, the first with a device), the local rank's device modulo the count,
 * so that the ranks of one node spread over its GPUs. */
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stdlib.h>
#include <string.h>

static inline int app_opencl_device(int local_rank, cl_device_id *device) {
    cl_platform_id platforms[16];
    cl_uint n = 0;
    if (clGetPlatformIDs(16, platforms, &n) != CL_SUCCESS) return 0;
    const char *want = getenv("MPIACC_OPENCL_PLATFORM");
    for (cl_uint p = 0; p < n; p++) {
        char name[256] = "";
        cl_device_id devices[64];
        cl_uint count = 0;
        clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
        if (want && *want && !strstr(name, want)) continue;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 64, devices, &count) != CL_SUCCESS || count == 0) continue;
        *device = devices[(cl_uint)local_rank % count];
        return 1;
    }
    return 0;
}
