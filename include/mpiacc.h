/* MPI-ACC public interface: datatype attributes that describe accelerator buffers.
 *
 * MPI-ACC sits in front of MPICH through the profiling interface. A program tags the
 * datatype of a call with the attributes below; the buffer argument is then a CUDA
 * device pointer or an OpenCL cl_mem, and MPI-ACC moves the bytes.
 *
 *   MPI_Datatype t;
 *   MPI_Type_dup(MPI_CHAR, &t);
 *   MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)MPIX_ACC_BUF_OPENCL);
 *   MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)queue);
 *   MPI_Send(cl_mem_buffer, n, t, 1, tag, MPI_COMM_WORLD);
 *
 * Attribute values are passed by value in the void*, and are captured when the call is
 * made: the datatype may be freed while a nonblocking operation is pending. */
#ifndef MPIACC_H_INCLUDED
#define MPIACC_H_INCLUDED

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPIACC_VERSION_MAJOR 0
#define MPIACC_VERSION_MINOR 1

/* Datatype attribute keyvals; valid after MPI_Init / MPI_Init_thread. */
extern int MPIX_ACC_BUF_TYPE;      /* MPIX_ACC_BUF_HOST | _CUDA | _OPENCL */
extern int MPIX_ACC_STREAM;        /* cudaStream_t the data depends on */
extern int MPIX_ACC_COMMAND_QUEUE; /* cl_command_queue (gives context and device) */
extern int MPIX_ACC_EVENT;         /* cudaEvent_t or cl_event the data depends on */
extern int MPIX_ACC_CONTEXT;       /* cl_context, when no queue is given */
extern int MPIX_ACC_DEVICE;        /* cl_device_id, or a CUDA device ordinal */
extern int MPIX_ACC_OFFSET;        /* byte offset into a cl_mem */

enum { MPIX_ACC_BUF_HOST = 1, MPIX_ACC_BUF_CUDA = 2, MPIX_ACC_BUF_OPENCL = 3 };

/* 1 when built with CUDA and a device is usable at run time; overrides MPICH's. */
int MPIX_Query_cuda_support(void);
/* 1 when built with OpenCL and a platform with at least one device is found. */
int MPIX_Query_opencl_support(void);

#ifdef __cplusplus
}
#endif

#endif /* MPIACC_H_INCLUDED */
