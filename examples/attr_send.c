/* The README's demo, after the dissertation's Fig. 4.1b: the datatype says where the
 * buffer lives, and MPI-ACC moves the bytes.
 *
 * Rank 0 sends host memory with a datatype tagged BUF_TYPE_HOST. Rank 1 receives into
 * an OpenCL cl_mem (platform 0, device 0) when MPIX_Query_opencl_support() says 1,
 * else into host memory; it checks every byte and prints
 *   attr_send: host -> opencl 1048576 bytes OK
 *
 *   mpiexec -n 2 ./examples/attr_send
 */
#ifdef HAVE_CONFIG_H /* in the MPI-ACC tree: OpenCL only when configure found it */
#include "config.h"
#define ATTR_SEND_OPENCL MPIACC_HAVE_OPENCL
#elif __has_include(<CL/cl.h>)
#define ATTR_SEND_OPENCL 1
#endif
#if ATTR_SEND_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif

#include <mpiacc_compat.h> /* the paper's names: BUF_TYPE, BUF_TYPE_OPENCL, COMMAND_QUEUE */
#include <stdio.h>
#include <stdlib.h>

enum { N = 1 << 20, TAG = 7 };

static unsigned char pattern(int i) { return (unsigned char)(i * 7 + 3); }

#if ATTR_SEND_OPENCL
/* Receive into a cl_mem on the first OpenCL device, then read it back for checking. */
static int recv_opencl(unsigned char *out) {
    cl_platform_id platform;
    cl_device_id device;
    cl_int err = clGetPlatformIDs(1, &platform, NULL);
    if (err == CL_SUCCESS) err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context ctx = err == CL_SUCCESS ? clCreateContext(NULL, 1, &device, NULL, NULL, &err) : NULL;
    cl_command_queue queue = err == CL_SUCCESS ? clCreateCommandQueue(ctx, device, 0, &err) : NULL;
    cl_mem buf = err == CL_SUCCESS ? clCreateBuffer(ctx, CL_MEM_READ_WRITE, N, NULL, &err) : NULL;
    if (err != CL_SUCCESS) { /* rank 0's send would wait forever: take the job down */
        fprintf(stderr, "attr_send: OpenCL setup failed (error %d)\n", (int)err);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    MPI_Datatype type;
    MPI_Type_dup(MPI_CHAR, &type);
    MPI_Type_set_attr(type, BUF_TYPE, BUF_TYPE_OPENCL);
    MPI_Type_set_attr(type, COMMAND_QUEUE, (void *)queue); /* gives context and device */
    MPI_Recv(buf, N, type, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Type_free(&type);

    err = clEnqueueReadBuffer(queue, buf, CL_TRUE, 0, N, out, 0, NULL, NULL);
    clReleaseMemObject(buf);
    clReleaseCommandQueue(queue);
    clReleaseContext(ctx);
    return err == CL_SUCCESS;
}
#endif

int main(int argc, char **argv) {
    int rank, ok = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    unsigned char *host = malloc(N);

    if (rank == 0) {
        for (int i = 0; i < N; i++) host[i] = pattern(i);
        MPI_Datatype type;
        MPI_Type_dup(MPI_CHAR, &type);
        MPI_Type_set_attr(type, BUF_TYPE, BUF_TYPE_HOST);
        MPI_Send(host, N, type, 1, TAG, MPI_COMM_WORLD);
        MPI_Type_free(&type);
    } else if (rank == 1) {
        const char *kind = "host";
#if ATTR_SEND_OPENCL
        if (MPIX_Query_opencl_support()) {
            kind = "opencl";
            ok = recv_opencl(host);
        } else
#endif
        {
            MPI_Recv(host, N, MPI_CHAR, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        for (int i = 0; ok && i < N; i++) {
            if (host[i] != pattern(i)) {
                fprintf(stderr, "attr_send: byte %d is %d, expected %d\n", i, host[i], pattern(i));
                ok = 0;
            }
        }
        printf("attr_send: host -> %s %d bytes %s\n", kind, N, ok ? "OK" : "FAILED");
    }

    free(host);
    MPI_Finalize();
    return ok ? 0 : 1;
}
