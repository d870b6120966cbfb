/* How the applications stop on a failed OpenCL call: every rank ends, after a message naming
 * the program (kProgram, which each application defines), the call, its error and the place. */
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <mpi.h>
#include <stdio.h>

static inline void app_cl_fail(const char *program, cl_int err, const char *call, const char *file, int line) {
    fprintf(stderr, "%s: %s failed with OpenCL error %d (%s:%d)\n", program, call, (int)err, file, line);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#define CL_CHECK(call)                                                                                    \
    do {                                                                                                  \
        cl_int cl_check_err_ = (call);                                                                    \
        if (cl_check_err_ != CL_SUCCESS) app_cl_fail(kProgram, cl_check_err_, #call, __FILE__, __LINE__); \
    } while (0)
