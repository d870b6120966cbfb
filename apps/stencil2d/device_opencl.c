/* Stencil2D's OpenCL device layer: the platform and device, the queue, the kernel (built from
 * a string at start-up around stencil_cell.h's arithmetic) and the two cl_mem buffers. */
#include "stencil2d.h"

#include <mpiacc.h>
#include <stdlib.h>
#include <string.h>

#include "../common/opencl_device.h"
#include "stencil_cell.h"

const char kProgram[] = "stencil2d", kDeviceKind[] = "OpenCL";
const char kDeviceHelp[] =
    "  platform: $MPIACC_OPENCL_PLATFORM (substring of the name); device: local rank modulo\n"
    "  the platform's device count\n";

/* FP_CONTRACT OFF: the kernel rounds every product and sum, as the reference does. */
static const char kPrologue[] = "#pragma OPENCL FP_CONTRACT OFF\n#define GLOBAL_MEM __global\n#define STENCIL2D_FN\n";
static const char kKernel[] =
    "__kernel void stencil(__global const float *in, __global float *out, int h, int w, int pitch,\n"
    "                      float wc, float wn, float wd) {\n"
    "    int x = get_global_id(0), y = get_global_id(1);\n"
    "    if (x >= w || y >= h) return;\n"
    "    long i = (long)(y + 1) * pitch + x + 1;\n"
    "    out[i] = stencil2d_cell(in, i, pitch, wc, wn, wd);\n"
    "}\n";

static cl_device_id device;
static cl_context context;

/* The device apps/common/opencl_device.h picks, where MPI-ACC was built with OpenCL. */
int device_find(int local_rank) { return MPIX_Query_opencl_support() && app_opencl_device(local_rank, &device); }

static void build_kernel(tile *t) {
    cl_int err;
    const char *sources[] = {kPrologue, STENCIL2D_XSTR(STENCIL2D_CELL) "\n", kKernel};
    cl_program program = clCreateProgramWithSource(context, 3, sources, NULL, &err);
    CL_CHECK(err);
    if (clBuildProgram(program, 1, &device, NULL, NULL, NULL) != CL_SUCCESS) {
        char log[4096] = "";
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        fprintf(stderr, "stencil2d: the stencil kernel does not build:\n%s\n", log);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    t->kernel = clCreateKernel(program, "stencil", &err);
    CL_CHECK(err);
    clReleaseProgram(program);
    size_t most = 1;
    CL_CHECK(clGetKernelWorkGroupInfo(t->kernel, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof most, &most, NULL));
    t->local[0] = 16, t->local[1] = 16;
    while (t->local[0] * t->local[1] > most) t->local[t->local[1] > 1] /= 2;
    for (int d = 0; d < 2; d++) {
        const size_t n = (size_t)(d == 0 ? t->w : t->h);
        t->global[d] = (n + t->local[d] - 1) / t->local[d] * t->local[d];
    }
}

void device_open(tile *t) {
    cl_int err;
    context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CL_CHECK(err);
    t->queue = clCreateCommandQueue(context, device, 0, &err);
    CL_CHECK(err);
    build_kernel(t);
    const size_t bytes = (size_t)(t->h + 2) * t->pitch * sizeof(float);
    t->cur = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    CL_CHECK(err);
    t->next = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    CL_CHECK(err);
}

void device_close(tile *t) {
    clReleaseMemObject(t->cur);
    clReleaseMemObject(t->next);
    clReleaseKernel(t->kernel);
    clReleaseCommandQueue(t->queue);
    clReleaseContext(context);
}

void stencil_step(tile *t) {
    const cl_float wc = kCenter, wn = kCardinal, wd = kDiagonal;
    CL_CHECK(clSetKernelArg(t->kernel, 0, sizeof(cl_mem), &t->cur));
    CL_CHECK(clSetKernelArg(t->kernel, 1, sizeof(cl_mem), &t->next));
    CL_CHECK(clSetKernelArg(t->kernel, 2, sizeof(cl_int), &t->h));
    CL_CHECK(clSetKernelArg(t->kernel, 3, sizeof(cl_int), &t->w));
    CL_CHECK(clSetKernelArg(t->kernel, 4, sizeof(cl_int), &t->pitch));
    CL_CHECK(clSetKernelArg(t->kernel, 5, sizeof wc, &wc));
    CL_CHECK(clSetKernelArg(t->kernel, 6, sizeof wn, &wn));
    CL_CHECK(clSetKernelArg(t->kernel, 7, sizeof wd, &wd));
    CL_CHECK(clEnqueueNDRangeKernel(t->queue, t->kernel, 2, NULL, t->global, t->local, 0, NULL, NULL));
    /* Waited for here so that the time splits into compute and communication. */
    CL_CHECK(clFinish(t->queue));
    cl_mem swap = t->cur;
    t->cur = t->next;
    t->next = swap;
}

void device_upload(tile *t, const float *host) {
    const size_t bytes = (size_t)(t->h + 2) * (size_t)t->pitch * sizeof(float);
    CL_CHECK(clEnqueueWriteBuffer(t->queue, t->cur, CL_TRUE, 0, bytes, host, 0, NULL, NULL));
    CL_CHECK(clEnqueueWriteBuffer(t->queue, t->next, CL_TRUE, 0, bytes, host, 0, NULL, NULL));
}

void device_download_interior(const tile *t, float *interior) {
    const size_t origin[3] = {sizeof(float), 1, 0}, host_origin[3] = {0, 0, 0};
    const size_t region[3] = {(size_t)t->w * sizeof(float), (size_t)t->h, 1};
    CL_CHECK(clEnqueueReadBufferRect(t->queue, t->cur, CL_TRUE, origin, host_origin, region,
                                     (size_t)t->pitch * sizeof(float), 0, 0, 0, interior, 0, NULL, NULL));
}
