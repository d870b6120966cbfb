/* FDM-Seismology's OpenCL device layer: the platform and device, the context and queue, the
 * kernels (one program built from a string at start-up around physics.h's cell updates), the
 * slab's cl_mem buffers and the compute steps every variant shares. */
#include "seismology.h"

#include <mpiacc.h>
#include <stdlib.h>
#include <string.h>

#include "../common/opencl_device.h"

const char kProgram[] = "seismology", kDeviceKind[] = "OpenCL";
const char kDeviceHelp[] =
    "  platform: $MPIACC_OPENCL_PLATFORM (substring of the name); device: local rank modulo\n"
    "  the platform's device count\n";

static cl_device_id device;

/* The kernels around physics.h's cell updates: one work-item per interior cell (velocity,
 * stress), per receiver (record) or per face element (face: mpi-gpu-adv's marshaling, in the
 * order of the face's subarray: x fastest, then y, z, field). */
static const char *kKernels =
    "__kernel void velocity(__global float *w, __global const float *coef, __global const float *damp, int lnx,\n"
    "                       int ny, int nz, int field) {\n"
    "    int i = get_global_id(0), j = get_global_id(1), k = get_global_id(2);\n"
    "    if (i >= lnx || j >= ny || k >= nz) return;\n"
    "    int sy = lnx + 2 * HALO, sz = sy * (ny + 2 * HALO), n = (k + HALO) * sz + (j + HALO) * sy + i + HALO;\n"
    "    seis_velocity(w, field, n, sy, sz, coef + COEFS * k, seis_sponge(damp, damp + lnx, damp + lnx + ny, i, j, "
    "k));\n"
    "}\n"
    "__kernel void stress(__global float *w, __global const float *coef, __global const float *damp, int lnx,\n"
    "                     int ny, int nz, int field, int source, float amplitude) {\n"
    "    int i = get_global_id(0), j = get_global_id(1), k = get_global_id(2);\n"
    "    if (i >= lnx || j >= ny || k >= nz) return;\n"
    "    int sy = lnx + 2 * HALO, sz = sy * (ny + 2 * HALO), n = (k + HALO) * sz + (j + HALO) * sy + i + HALO;\n"
    "    seis_stress(w, field, n, sy, sz, coef + COEFS * k, seis_sponge(damp, damp + lnx, damp + lnx + ny, i, j, k),\n"
    "                n == source ? amplitude : 0.0f);\n"
    "}\n"
    "__kernel void record(__global const float *w, __global float *traces, __global const int *where, int slot) {\n"
    "    int r = get_global_id(0);\n"
    "    if (where[r] >= 0) traces[slot * RECEIVERS + r] = w[where[r]];\n"
    "}\n"
    "__kernel void face(__global float *w, __global float *buf, int first, int count, int i0, int lnx, int ny,\n"
    "                   int nz, int field, int to_buffer) {\n"
    "    int e = get_global_id(0);\n"
    "    if (e >= count * nz * ny * HALO) return;\n"
    "    int c = e % HALO, j = e / HALO % ny, k = e / (HALO * ny) % nz, f = e / (HALO * ny * nz);\n"
    "    int sy = lnx + 2 * HALO, sz = sy * (ny + 2 * HALO);\n"
    "    int n = (first + f) * field + (k + HALO) * sz + (j + HALO) * sy + i0 + c;\n"
    "    if (to_buffer) buf[e] = w[n]; else w[n] = buf[e];\n"
    "}\n";

/* The device apps/common/opencl_device.h picks, where MPI-ACC was built with OpenCL. */
int device_find(int local_rank) { return MPIX_Query_opencl_support() && app_opencl_device(local_rank, &device); }

static cl_kernel kernel(cl_program program, const char *name) {
    cl_int err;
    cl_kernel k = clCreateKernel(program, name, &err);
    CL_CHECK(err);
    return k;
}

/* The program: FP_CONTRACT OFF, the constants, physics.h's cell updates, the kernels. */
static void build_kernels(domain *d) {
    char prologue[256];
    snprintf(prologue, sizeof prologue,
             "#pragma OPENCL FP_CONTRACT OFF\n#define GLOBAL_MEM __global\n#define SEIS_FN\n"
             "#define HALO %d\n#define COEFS %d\n#define RECEIVERS %d\n",
             HALO, COEFS, RECEIVERS);
    const char *sources[] = {prologue, SEIS_XSTR(SEIS_PHYSICS), "\n", kKernels};
    cl_int err;
    cl_program program = clCreateProgramWithSource(d->context, 4, sources, NULL, &err);
    CL_CHECK(err);
    if (clBuildProgram(program, 1, &device, NULL, NULL, NULL) != CL_SUCCESS) {
        char log[8192] = "";
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        fprintf(stderr, "seismology: the kernels do not build:\n%s\n", log);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    d->velocity = kernel(program, "velocity");
    d->stress = kernel(program, "stress");
    d->record = kernel(program, "record");
    d->face = kernel(program, "face");
    clReleaseProgram(program);
    size_t most = 1, velocity_most = 1;
    CL_CHECK(clGetKernelWorkGroupInfo(d->stress, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof most, &most, NULL));
    CL_CHECK(clGetKernelWorkGroupInfo(d->velocity, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof velocity_most,
                                      &velocity_most, NULL));
    if (velocity_most < most) most = velocity_most;
    d->local[0] = 32, d->local[1] = 4, d->local[2] = 2;
    while (d->local[0] * d->local[1] * d->local[2] > most) d->local[d->local[2] > 1 ? 2 : d->local[1] > 1 ? 1 : 0] /= 2;
    const int n[3] = {d->lnx, d->p->ny, d->p->nz};
    for (int a = 0; a < 3; a++) d->global[a] = ((size_t)n[a] + d->local[a] - 1) / d->local[a] * d->local[a];
    /* Arguments fixed for the run; the source's amplitude (stress, 8) and the sample's slot
     * (record, 3) are set per step. */
    cl_kernel both[2] = {d->velocity, d->stress};
    for (int i = 0; i < 2; i++) {
        CL_CHECK(clSetKernelArg(both[i], 0, sizeof(cl_mem), &d->wave));
        CL_CHECK(clSetKernelArg(both[i], 1, sizeof(cl_mem), &d->coef));
        CL_CHECK(clSetKernelArg(both[i], 2, sizeof(cl_mem), &d->damp));
        CL_CHECK(clSetKernelArg(both[i], 3, sizeof(int), &d->lnx));
        CL_CHECK(clSetKernelArg(both[i], 4, sizeof(int), &d->p->ny));
        CL_CHECK(clSetKernelArg(both[i], 5, sizeof(int), &d->p->nz));
        CL_CHECK(clSetKernelArg(both[i], 6, sizeof(int), &d->field));
    }
    CL_CHECK(clSetKernelArg(d->stress, 7, sizeof(int), &d->source));
    CL_CHECK(clSetKernelArg(d->record, 0, sizeof(cl_mem), &d->wave));
    CL_CHECK(clSetKernelArg(d->record, 1, sizeof(cl_mem), &d->traces));
    CL_CHECK(clSetKernelArg(d->record, 2, sizeof(cl_mem), &d->receivers));
}

/* Enqueues `k` over the interior and waits for it (not under --async), so that the time
 * splits into compute and the rest; the event goes to *done when asked for. */
static void run_kernel(domain *d, cl_kernel k, step_times *t, cl_event *done) {
    const double t0 = MPI_Wtime();
    cl_event event;
    CL_CHECK(clEnqueueNDRangeKernel(d->queue, k, 3, NULL, d->global, d->local, 0, NULL, &event));
    if (d->async)
        CL_CHECK(clFlush(d->queue));
    else
        CL_CHECK(clWaitForEvents(1, &event));
    if (done)
        *done = event;
    else
        CL_CHECK(clReleaseEvent(event));
    t->compute += MPI_Wtime() - t0;
}

void velocity_step(domain *d, step_times *t, cl_event *done) { run_kernel(d, d->velocity, t, done); }

void stress_step(domain *d, int step, step_times *t, cl_event *done) {
    CL_CHECK(clSetKernelArg(d->stress, 8, sizeof(float), &d->p->wavelet[step]));
    run_kernel(d, d->stress, t, done);
}

void record_step(domain *d, int step, step_times *t) {
    const int slot = (step + 1) / d->p->every - 1;
    if ((step + 1) % d->p->every || slot >= d->p->slots) return;
    const double t0 = MPI_Wtime();
    const size_t global = RECEIVERS;
    CL_CHECK(clSetKernelArg(d->record, 3, sizeof(int), &slot));
    CL_CHECK(clEnqueueNDRangeKernel(d->queue, d->record, 1, NULL, &global, NULL, 0, NULL, NULL));
    if (!d->async) CL_CHECK(clFinish(d->queue));
    t->compute += MPI_Wtime() - t0;
}

static cl_mem make_buffer(const domain *d, size_t bytes, void *host) {
    cl_int err;
    cl_mem m = clCreateBuffer(d->context, CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes, host, &err);
    CL_CHECK(err);
    return m;
}

/* The slab's buffers: the model's coefficients, the sponge along its columns, where its
 * receivers sit. */
static void make_buffers(domain *d, const float *damp, const int *where) {
    const problem *p = d->p;
    d->wave = make_buffer(d, (size_t)FIELDS * d->field * sizeof(float), NULL);
    d->coef = make_buffer(d, (size_t)p->nz * COEFS * sizeof(float), p->coef);
    d->damp = make_buffer(d, (size_t)(d->lnx + p->ny + p->nz) * sizeof(float), (void *)damp);
    d->receivers = make_buffer(d, RECEIVERS * sizeof(int), (void *)where);
    d->traces = make_buffer(d, (size_t)(p->slots ? p->slots : 1) * RECEIVERS * sizeof(float), NULL);
}

/* Every field and trace at zero: the start of every run. */
void device_zero(domain *d) {
    const float zero = 0;
    CL_CHECK(clEnqueueFillBuffer(d->queue, d->wave, &zero, sizeof zero, 0, (size_t)FIELDS * d->field * sizeof(float), 0,
                                 NULL, NULL));
    CL_CHECK(clEnqueueFillBuffer(d->queue, d->traces, &zero, sizeof zero, 0,
                                 (size_t)(d->p->slots ? d->p->slots : 1) * RECEIVERS * sizeof(float), 0, NULL, NULL));
    CL_CHECK(clFinish(d->queue));
}

void device_open(domain *d, const float *damp, const int *where) {
    cl_int err;
    d->context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CL_CHECK(err);
    d->queue = clCreateCommandQueue(d->context, device, 0, &err);
    CL_CHECK(err);
    make_buffers(d, damp, where);
    build_kernels(d);
}

void device_finish(domain *d) { CL_CHECK(clFinish(d->queue)); }

void device_read(const domain *d, float *wave, float *traces) {
    const size_t samples = (size_t)d->p->slots * RECEIVERS;
    CL_CHECK(clEnqueueReadBuffer(d->queue, d->wave, CL_TRUE, 0, (size_t)FIELDS * d->field * sizeof(float), wave, 0,
                                 NULL, NULL));
    if (samples)
        CL_CHECK(clEnqueueReadBuffer(d->queue, d->traces, CL_TRUE, 0, samples * sizeof(float), traces, 0, NULL, NULL));
}

void device_close(domain *d) {
    cl_mem mems[] = {d->wave, d->coef, d->damp, d->receivers, d->traces};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++) clReleaseMemObject(mems[i]);
    cl_kernel kernels[] = {d->velocity, d->stress, d->record, d->face};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) clReleaseKernel(kernels[i]);
    clReleaseCommandQueue(d->queue);
    clReleaseContext(d->context);
}
