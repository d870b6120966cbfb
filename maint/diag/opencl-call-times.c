/* LD_PRELOAD shim for the GPU machine: where the time of small OpenCL sends and
 * receives goes. Inside every MPI_Send, MPI_Recv, MPI_Isend and MPI_Irecv of at most
 * TRACE_COUNT elements (default 64), and every MPI_Waitall (a window's completion), it
 * times the OpenCL, PMPI and process_vm_readv calls that libmpiacc makes, and at
 * MPI_Finalize prints per entry point the mean time of one call and, per function, calls
 * and microseconds per entry-point call (rank 0 and 1 each).
 *
 *   $MPICC -shared -fPIC -o /tmp/opencl-call-times.so maint/diag/opencl-call-times.c -ldl
 *   LD_PRELOAD=/tmp/opencl-call-times.so mpiexec -n 2 bench/pt2pt_opencl --sizes 8 ...
 *
 * To time another call, add a WRAP line. */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "call_timer.h"

enum { ENTRY_SEND, ENTRY_RECV, ENTRY_ISEND, ENTRY_IRECV, ENTRY_WAITALL, NENTRIES, MAX_FUNCS = 64 };
static const char *entry_names[NENTRIES] = {"MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Waitall"};
static int inside = -1; /* the entry point being timed, or -1 */
static struct {
    long calls;
    double us;
    const char *func[MAX_FUNCS];
    long func_calls[MAX_FUNCS];
    double func_us[MAX_FUNCS];
    int nfuncs;
} stats[NENTRIES];

static void note(const char *name, double us) {
    if (inside < 0) return;
    int e = inside, i;
    for (i = 0; i < stats[e].nfuncs; i++)
        if (stats[e].func[i] == name) break;
    if (i == stats[e].nfuncs) {
        if (i == MAX_FUNCS) return;
        stats[e].func[i] = name;
        stats[e].nfuncs++;
    }
    stats[e].func_calls[i]++;
    stats[e].func_us[i] += us;
}

WRAP(cl_int, clGetMemObjectInfo, (cl_mem m, cl_mem_info p, size_t n, void *v, size_t *r), (m, p, n, v, r))
WRAP(cl_int, clGetCommandQueueInfo, (cl_command_queue q, cl_command_queue_info p, size_t n, void *v, size_t *r),
     (q, p, n, v, r))
WRAP(cl_int, clGetContextInfo, (cl_context c, cl_context_info p, size_t n, void *v, size_t *r), (c, p, n, v, r))
WRAP(cl_int, clGetDeviceInfo, (cl_device_id d, cl_device_info p, size_t n, void *v, size_t *r), (d, p, n, v, r))
WRAP(cl_int, clGetEventInfo, (cl_event e, cl_event_info p, size_t n, void *v, size_t *r), (e, p, n, v, r))
WRAP(cl_int, clEnqueueMarkerWithWaitList, (cl_command_queue q, cl_uint n, const cl_event *w, cl_event *e),
     (q, n, w, e))
WRAP(cl_int, clEnqueueReadBuffer,
     (cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t n, void *p, cl_uint nw, const cl_event *w, cl_event *e),
     (q, m, b, o, n, p, nw, w, e))
WRAP(cl_int, clEnqueueWriteBuffer,
     (cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t n, const void *p, cl_uint nw, const cl_event *w,
      cl_event *e),
     (q, m, b, o, n, p, nw, w, e))
WRAP(cl_int, clFlush, (cl_command_queue q), (q))
WRAP(cl_int, clFinish, (cl_command_queue q), (q))
WRAP(cl_int, clWaitForEvents, (cl_uint n, const cl_event *e), (n, e))
WRAP(cl_int, clRetainMemObject, (cl_mem m), (m))
WRAP(cl_int, clReleaseMemObject, (cl_mem m), (m))
WRAP(cl_int, clRetainEvent, (cl_event e), (e))
WRAP(cl_int, clReleaseEvent, (cl_event e), (e))
WRAP(cl_int, clRetainCommandQueue, (cl_command_queue q), (q))
WRAP(cl_int, clReleaseCommandQueue, (cl_command_queue q), (q))
WRAP(ssize_t, process_vm_readv,
     (pid_t p, const struct iovec *l, unsigned long nl, const struct iovec *r, unsigned long nr, unsigned long f),
     (p, l, nl, r, nr, f))
WRAP(int, PMPI_Send, (const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm), (b, c, t, d, tag, comm))
WRAP(int, PMPI_Isend, (const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r),
     (b, c, t, d, tag, comm, r))
WRAP(int, PMPI_Recv, (void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Status *st),
     (b, c, t, s, tag, comm, st))
WRAP(int, PMPI_Irecv, (void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Request *r),
     (b, c, t, s, tag, comm, r))
WRAP(int, PMPI_Test, (MPI_Request * r, int *f, MPI_Status *s), (r, f, s))
WRAP(int, PMPI_Wait, (MPI_Request * r, MPI_Status *s), (r, s))
WRAP(int, PMPI_Testsome, (int n, MPI_Request *r, int *o, int *i, MPI_Status *s), (n, r, o, i, s))
WRAP(int, PMPI_Testall, (int n, MPI_Request *r, int *f, MPI_Status *s), (n, r, f, s))
WRAP(int, PMPI_Request_get_status, (MPI_Request r, int *f, MPI_Status *s), (r, f, s))
WRAP(int, PMPI_Improbe, (int s, int t, MPI_Comm c, int *f, MPI_Message *m, MPI_Status *st), (s, t, c, f, m, st))
WRAP(int, PMPI_Type_get_attr, (MPI_Datatype t, int k, void *v, int *f), (t, k, v, f))

static int limit(void) {
    const char *l = getenv("TRACE_COUNT");
    return l ? atoi(l) : 64;
}

static void entered(int e, double us) {
    stats[e].calls++;
    note(entry_names[e], us); /* the entry point's own total, as one more row */
}

/* Defines entry point `name`, timed as entry `e` (with every wrapped call inside it) when
 * `timed` holds and no other entry point is being timed. */
#define ENTRY(e, name, params, args, timed)                       \
    int name params {                                             \
        static int(*real) params;                                 \
        if (!real) real = (int(*) params)dlsym(RTLD_NEXT, #name); \
        if (!(timed) || inside >= 0) return real args;            \
        inside = e;                                               \
        double t0 = now_us();                                     \
        int rc = real args;                                       \
        entered(e, now_us() - t0);                                \
        inside = -1;                                              \
        return rc;                                                \
    }

ENTRY(ENTRY_SEND, MPI_Send, (const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm),
      (b, c, t, d, tag, comm), c <= limit())
ENTRY(ENTRY_RECV, MPI_Recv, (void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Status *st),
      (b, c, t, s, tag, comm, st), c <= limit())
ENTRY(ENTRY_ISEND, MPI_Isend, (const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r),
      (b, c, t, d, tag, comm, r), c <= limit())
ENTRY(ENTRY_IRECV, MPI_Irecv, (void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Request *r),
      (b, c, t, s, tag, comm, r), c <= limit())
ENTRY(ENTRY_WAITALL, MPI_Waitall, (int n, MPI_Request *r, MPI_Status *st), (n, r, st), 1)

int MPI_Finalize(void) {
    static int (*real)(void);
    if (!real) real = (int (*)(void))dlsym(RTLD_NEXT, "MPI_Finalize");
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int e = 0; e < NENTRIES; e++) {
        if (!stats[e].calls) continue;
        if (e == ENTRY_WAITALL)
            fprintf(stderr, "[opencl-call-times %d] %s: %ld calls; per call:\n", rank, entry_names[e], stats[e].calls);
        else
            fprintf(stderr, "[opencl-call-times %d] %s: %ld calls of <= %d elements; per call:\n", rank, entry_names[e],
                    stats[e].calls, limit());
        for (int i = 0; i < stats[e].nfuncs; i++)
            fprintf(stderr, "[opencl-call-times %d]   %-30s %8.2f calls %9.2f us\n", rank, stats[e].func[i],
                    (double)stats[e].func_calls[i] / stats[e].calls, stats[e].func_us[i] / stats[e].calls);
    }
    return real();
}
