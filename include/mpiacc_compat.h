/* The names used in the MPI-ACC dissertation (Aji, 2015, ch. 4), so that code written
 * after the paper compiles unchanged. They are macros over the MPIX_ACC_* names. */
#ifndef MPIACC_COMPAT_H_INCLUDED
#define MPIACC_COMPAT_H_INCLUDED

#include <mpiacc.h>

#define BUF_TYPE MPIX_ACC_BUF_TYPE
#define BUF_TYPE_HOST ((void *)(long)MPIX_ACC_BUF_HOST)
#define BUF_TYPE_CUDA ((void *)(long)MPIX_ACC_BUF_CUDA)
#define BUF_TYPE_OPENCL ((void *)(long)MPIX_ACC_BUF_OPENCL)
#define BUF_TYPE_OCL BUF_TYPE_OPENCL
#define STREAM_TYPE MPIX_ACC_STREAM
#define COMMAND_QUEUE MPIX_ACC_COMMAND_QUEUE
#define EVENT MPIX_ACC_EVENT

#endif /* MPIACC_COMPAT_H_INCLUDED */
