/* A pipeline of OpenCL buffers between two ranks, ordered by OpenCL events.
 *
 * Rank 0 enqueues a small kernel on its command queue for each of MESSAGES buffers (it
 * fills the buffer with that message's pattern) and, without waiting for it, passes the
 * buffer to MPI_Isend. The datatype names the queue (MPIX_ACC_COMMAND_QUEUE: context and
 * device) and the kernel's cl_event (MPIX_ACC_EVENT): MPI-ACC reads the buffer only once
 * that event has completed. Attribute values are captured at the call, so one datatype
 * serves every message, its event attribute reset before each send. Rank 1 receives into
 * cl_mem buffers with MPI_Irecv, reads them back and checks every byte. It prints
 *   opencl_pipeline: 8 messages of 1048576 bytes OK
 *
 *   mpiexec -n 2 ./examples/opencl_pipeline
 *
 * MPIACC_OPENCL_PLATFORM (a substring of a platform name) picks the platform, as for
 * MPI-ACC. Without a usable OpenCL device on both ranks it says so and exits with 77, the
 * "skipped" status of automake's test harness.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <mpiacc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MESSAGES = 8, BYTES = 1 << 20, TAG = 11 };

static const char *kSource =
    "__kernel void fill(__global uchar *buf, uint message) {\n"
    "    size_t i = get_global_id(0);\n"
    "    buf[i] = (uchar)(i * 13 + message * 29 + 5);\n"
    "}\n";

static unsigned char expected(size_t i, unsigned message) { return (unsigned char)(i * 13 + message * 29 + 5); }

/* The first device of the first platform whose name contains MPIACC_OPENCL_PLATFORM. */
static int find_device(cl_device_id *device) {
    cl_platform_id platforms[16];
    cl_uint n = 0;
    if (clGetPlatformIDs(16, platforms, &n) != CL_SUCCESS) return 0;
    const char *want = getenv("MPIACC_OPENCL_PLATFORM");
    for (cl_uint p = 0; p < n; p++) {
        char name[256] = "";
        clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
        if (want && *want && !strstr(name, want)) continue;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 1, device, NULL) == CL_SUCCESS) return 1;
    }
    return 0;
}

static void check(cl_int err, const char *what) {
    if (err != CL_SUCCESS) {
        fprintf(stderr, "opencl_pipeline: %s failed (error %d)\n", what, (int)err);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cl_device_id device;
    int usable = MPIX_Query_opencl_support() && find_device(&device), all_usable = 0;
    MPI_Allreduce(&usable, &all_usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (size != 2 || !all_usable) {
        if (rank == 0)
            printf("opencl_pipeline: %s; nothing to show\n",
                   size != 2 ? "needs exactly 2 ranks" : "no usable OpenCL device on some rank");
        MPI_Finalize();
        return size != 2 ? 2 : 77;
    }

    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    check(err, "clCreateContext");
    cl_command_queue queue = clCreateCommandQueue(ctx, device, 0, &err);
    check(err, "clCreateCommandQueue");
    cl_mem bufs[MESSAGES];
    for (int m = 0; m < MESSAGES; m++) {
        bufs[m] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, BYTES, NULL, &err);
        check(err, "clCreateBuffer");
    }

    MPI_Datatype type;
    MPI_Type_dup(MPI_BYTE, &type);
    MPI_Type_set_attr(type, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_OPENCL);
    MPI_Type_set_attr(type, MPIX_ACC_COMMAND_QUEUE, (void *)queue);
    MPI_Request reqs[MESSAGES];
    int ok = 1;

    if (rank == 0) {
        cl_program program = clCreateProgramWithSource(ctx, 1, &kSource, NULL, &err);
        check(err, "clCreateProgramWithSource");
        check(clBuildProgram(program, 1, &device, NULL, NULL, NULL), "clBuildProgram");
        cl_kernel fill = clCreateKernel(program, "fill", &err);
        check(err, "clCreateKernel");
        cl_event filled[MESSAGES];
        const size_t global = BYTES;
        for (int m = 0; m < MESSAGES; m++) {
            cl_uint message = (cl_uint)m;
            check(clSetKernelArg(fill, 0, sizeof(cl_mem), &bufs[m]), "clSetKernelArg");
            check(clSetKernelArg(fill, 1, sizeof message, &message), "clSetKernelArg");
            check(clEnqueueNDRangeKernel(queue, fill, 1, NULL, &global, NULL, 0, NULL, &filled[m]),
                  "clEnqueueNDRangeKernel");
            /* The send waits for this kernel, not the program: no clFinish, no clWaitForEvents. */
            MPI_Type_set_attr(type, MPIX_ACC_EVENT, (void *)filled[m]);
            MPI_Isend(bufs[m], BYTES, type, 1, TAG, MPI_COMM_WORLD, &reqs[m]);
        }
        MPI_Status statuses[MESSAGES];
        MPI_Waitall(MESSAGES, reqs, statuses);
        for (int m = 0; m < MESSAGES; m++) clReleaseEvent(filled[m]);
        clReleaseKernel(fill);
        clReleaseProgram(program);
    } else {
        for (int m = 0; m < MESSAGES; m++) MPI_Irecv(bufs[m], BYTES, type, 0, TAG, MPI_COMM_WORLD, &reqs[m]);
        MPI_Status statuses[MESSAGES];
        MPI_Waitall(MESSAGES, reqs, statuses);
        unsigned char *host = malloc(BYTES);
        for (int m = 0; m < MESSAGES && ok; m++) {
            int count = -1;
            MPI_Get_count(&statuses[m], MPI_BYTE, &count);
            check(clEnqueueReadBuffer(queue, bufs[m], CL_TRUE, 0, BYTES, host, 0, NULL, NULL), "clEnqueueReadBuffer");
            /* Same source and tag: MPI keeps the order, so message m landed in bufs[m]. */
            for (size_t i = 0; i < BYTES && ok; i++) {
                if (host[i] != expected(i, (unsigned)m)) {
                    fprintf(stderr, "opencl_pipeline: message %d byte %zu is %d, expected %d\n", m, i, host[i],
                            expected(i, (unsigned)m));
                    ok = 0;
                }
            }
            if (count != BYTES) {
                fprintf(stderr, "opencl_pipeline: message %d: count %d, expected %d\n", m, count, BYTES);
                ok = 0;
            }
        }
        free(host);
        printf("opencl_pipeline: %d messages of %d bytes %s\n", MESSAGES, BYTES, ok ? "OK" : "FAILED");
    }

    MPI_Type_free(&type);
    for (int m = 0; m < MESSAGES; m++) clReleaseMemObject(bufs[m]);
    clReleaseCommandQueue(queue);
    clReleaseContext(ctx);
    MPI_Bcast(&ok, 1, MPI_INT, 1, MPI_COMM_WORLD);
    MPI_Finalize();
    return ok ? 0 : 1;
}
