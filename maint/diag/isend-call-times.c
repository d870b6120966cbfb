/* LD_PRELOAD shim for the GPU machine: times the CUDA runtime and PMPI calls that
 * libmpiacc makes inside each MPI_Isend, and prints the breakdown of every MPI_Isend
 * slower than TRACE_US microseconds (default 20) to stderr.
 *
 *   $MPICC -shared -fPIC -I/usr/local/cuda/include -o /tmp/isend-call-times.so \
 *       maint/diag/isend-call-times.c -ldl
 *   LD_PRELOAD=/tmp/isend-call-times.so TRACE_US=15 mpiexec -n 2 test/gpu/cuda_stream
 *
 * Calls under 1 us are counted but not listed. To time another call, add a WRAP line. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "call_timer.h"
#include "cuda_calls.h"

enum { MAX_CALLS = 256 };
static int inside = 0, ncalls = 0;
static struct {
    const char *name;
    double us;
} calls[MAX_CALLS];

static void note(const char *name, double us) {
    if (inside && ncalls < MAX_CALLS) {
        calls[ncalls].name = name;
        calls[ncalls].us = us;
        ncalls++;
    }
}

WRAP(cudaError_t, cudaEventQuery, (cudaEvent_t e), (e))
WRAP(cudaError_t, cudaEventCreateWithFlags, (cudaEvent_t * e, unsigned f), (e, f))
WRAP(int, PMPI_Test, (MPI_Request * r, int *f, MPI_Status *s), (r, f, s))
WRAP(int, PMPI_Improbe, (int s, int t, MPI_Comm c, int *f, MPI_Message *m, MPI_Status *st), (s, t, c, f, m, st))
WRAP(int, PMPI_Grequest_start,
     (MPI_Grequest_query_function * q, MPI_Grequest_free_function *f, MPI_Grequest_cancel_function *c, void *x,
      MPI_Request *r),
     (q, f, c, x, r))

int MPI_Isend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r) {
    static int (*real)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    if (!real) real = (int (*)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *))dlsym(RTLD_NEXT, "MPI_Isend");
    ncalls = 0;
    inside = 1;
    const double t0 = now_us();
    const int rc = real(b, c, t, d, tag, comm, r);
    const double dt = now_us() - t0;
    inside = 0;
    const char *limit = getenv("TRACE_US");
    if (dt > (limit ? atof(limit) : 20.0)) {
        double sum = 0;
        for (int i = 0; i < ncalls; i++) sum += calls[i].us;
        fprintf(stderr, "[isend-call-times] MPI_Isend %d elements: %.1f us, %d calls took %.1f us:", c, dt, ncalls,
                sum);
        for (int i = 0; i < ncalls; i++)
            if (calls[i].us >= 1.0) fprintf(stderr, " %s %.1f", calls[i].name, calls[i].us);
        fprintf(stderr, "\n");
    }
    return rc;
}
