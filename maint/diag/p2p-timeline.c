/* LD_PRELOAD shim for the GPU machine: records, for a window of MPI_Send and MPI_Recv
 * calls, when each CUDA runtime and PMPI call that libmpiacc makes inside them starts and
 * how long it takes, on the machine's monotonic clock (shared by the processes of one
 * host, so the two ranks' records line up). maint/diag/p2p-timeline.py turns the two
 * files into a one-way timeline: sender capture, envelope, match, pull, completion, FIN.
 *
 *   $MPICC -shared -fPIC -I/usr/local/cuda/include -o /tmp/p2p-timeline.so \
 *       maint/diag/p2p-timeline.c -ldl
 *   TIMELINE_DIR=/tmp/tl LD_PRELOAD=/tmp/p2p-timeline.so mpiexec -n 2 bench/pt2pt \
 *       --sizes 8 --dirs 'D->D' --configs mpiacc
 *   python3 maint/diag/p2p-timeline.py /tmp/tl/timeline.0.tsv /tmp/tl/timeline.1.tsv
 *
 * ($MPICC: MPICH's wrapper, which .device/env.sh sets; a plain mpicc on the GPU machine
 * may belong to another MPI, whose MPI_COMM_WORLD means nothing to MPICH.)
 * TIMELINE_SKIP (default 1000) top-level calls are let through unrecorded (warm-up), then
 * TIMELINE_CALLS (default 400) are recorded. Each line of timeline.RANK.tsv is
 *     seq  name  start_us  duration_us  aux
 * where seq numbers the top-level calls, a top-level call's own line has aux -1, and aux is
 * the flag of a test or probe, or 1 when a cudaEventQuery/cudaStreamQuery found the work
 * done, or for "involuntary_ctxsw" how often the thread was switched out in that call.
 * TIMELINE_SWITCHES=1 also prints each rank's count of those for the whole run at
 * MPI_Finalize, and TIMELINE_THREADS=1 each thread's time on a CPU and involuntary switches.
 * The shim adds about 50 ns to each call it wraps.
 *
 * TIMELINE_SLOW_US=T keeps, of every top-level call after the warm-up, only those that took
 * at least T us (TIMELINE_CALLS is then ignored): for stalls that come once in thousands of
 * messages, such as the 5-48 ms ones seen in host-to-device ping-pongs of 16-32 KiB.
 * Read them with p2p-timeline.py --each, which lists every kept call's events. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include "call_timer.h"

typedef struct {
    const char *name;
    double start, dur;
    int seq, aux;
} Record;

enum { MAX_RECORDS = 1 << 18 };
static Record records[MAX_RECORDS];
static int nrecords = 0, depth = 0, seq = 0, skip = -1, window = 400;
static double slow_us = -1; /* TIMELINE_SLOW_US; < 0: a window of calls */
static long slow_kept = 0, records_lost = 0;

static int recording(void) {
    if (skip < 0) {
        const char *s = getenv("TIMELINE_SKIP"), *w = getenv("TIMELINE_CALLS"), *t = getenv("TIMELINE_SLOW_US");
        skip = s ? atoi(s) : 1000;
        if (w) window = atoi(w);
        if (t) slow_us = atof(t);
    }
    return seq >= skip && (slow_us >= 0 || seq < skip + window);
}

static void add(const char *name, double start, double dur, int aux) {
    if (depth > 0 && recording()) {
        if (nrecords == MAX_RECORDS) {
            records_lost++;
            return;
        }
        Record *r = &records[nrecords++];
        r->name = name, r->start = start, r->dur = dur, r->seq = seq, r->aux = aux;
    }
}

/* WRAP's hook (call_timer.h): start = end - duration. */
static void note(const char *name, double us) { add(name, now_us() - us, us, 0); }
#include "cuda_calls.h"

/* Calls whose result the timeline needs: WRAP_FLAG stores *flag, WRAP_QUERY whether the
 * work was done. */
#define WRAP_FLAG(name, params, args, flagp)                          \
    int name params {                                                 \
        static int(*real) params;                                     \
        if (!real) real = (int(*) params)dlsym(RTLD_NEXT, #name);     \
        double t0_ = now_us();                                        \
        int rv_ = real args;                                          \
        add(#name, t0_, now_us() - t0_, *(flagp));                    \
        return rv_;                                                   \
    }
#define WRAP_QUERY(name, type)                                                  \
    cudaError_t name(type x) {                                                  \
        static cudaError_t (*real)(type);                                       \
        if (!real) real = (cudaError_t(*)(type))dlsym(RTLD_NEXT, #name);        \
        double t0_ = now_us();                                                  \
        cudaError_t rv_ = real(x);                                              \
        add(#name, t0_, now_us() - t0_, rv_ == cudaSuccess);                    \
        return rv_;                                                             \
    }

WRAP(cudaError_t, cudaLaunchKernel, (const void *f, dim3 g, dim3 b, void **a, size_t m, cudaStream_t s), (f, g, b, a, m, s))
WRAP_QUERY(cudaEventQuery, cudaEvent_t)
WRAP_QUERY(cudaStreamQuery, cudaStream_t)
WRAP(cudaError_t, cudaStreamSynchronize, (cudaStream_t s), (s))
WRAP(cudaError_t, cudaEventSynchronize, (cudaEvent_t e), (e))
WRAP(int, PMPI_Irecv, (void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Request *r),
     (b, c, t, s, tag, comm, r))
WRAP(int, PMPI_Recv, (void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Status *st),
     (b, c, t, s, tag, comm, st))
WRAP(int, PMPI_Send, (const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm), (b, c, t, d, tag, comm))
WRAP(int, PMPI_Mrecv, (void *b, int c, MPI_Datatype t, MPI_Message *m, MPI_Status *st), (b, c, t, m, st))
WRAP(int, PMPI_Wait, (MPI_Request * r, MPI_Status *s), (r, s))
WRAP(int, PMPI_Request_free, (MPI_Request * r), (r))
WRAP_FLAG(PMPI_Test, (MPI_Request * r, int *f, MPI_Status *s), (r, f, s), f)
WRAP_FLAG(PMPI_Request_get_status, (MPI_Request r, int *f, MPI_Status *s), (r, f, s), f)
WRAP_FLAG(PMPI_Improbe, (int s, int t, MPI_Comm c, int *f, MPI_Message *m, MPI_Status *st), (s, t, c, f, m, st), f)
WRAP_FLAG(PMPI_Iprobe, (int s, int t, MPI_Comm c, int *f, MPI_Status *st), (s, t, c, f, st), f)
WRAP_FLAG(PMPI_Testsome, (int n, MPI_Request *r, int *out, int *idx, MPI_Status *s), (n, r, out, idx, s), out)

/* TIMELINE_TOPS (comma separated; default MPI_Send,MPI_Recv) names the top-level calls
 * recorded; the others pass straight through. MPI_Isend,MPI_Irecv,MPI_Waitall breaks a
 * windowed bandwidth run down instead of a ping-pong (the timeline section then prints
 * nothing; the per-call breakdown does). */
static int top_enabled(const char *name) {
    const char *tops = getenv("TIMELINE_TOPS");
    if (!tops) tops = "MPI_Send,MPI_Recv";
    size_t n = strlen(name);
    for (const char *p = strstr(tops, name); p; p = strstr(p + 1, name))
        if ((p == tops || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

/* Involuntary context switches of the calling thread so far: a rank the kernel took off
 * its CPU inside a call (another runnable thread there, a host that steals the vCPU) waits
 * a scheduler tick or more, which no wrapped call accounts for. */
static long involuntary_switches(void) {
    struct rusage r;
    return getrusage(RUSAGE_THREAD, &r) == 0 ? r.ru_nivcsw : 0;
}

/* Threads of this process now (from /proc/self/status; 0 when unreadable): whether a
 * thread of our own (CUDA's, MPICH's, a progress thread) was there to take the CPU. */
static int process_threads(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    fclose(f);
    return n;
}

/* The top-level calls: each gets a sequence number and a record of its own, and a
 * recorded one in which the thread was switched out involuntarily gets an
 * "involuntary_ctxsw" record too (aux: how many times). One that ended on another CPU than
 * it started on gets "cpu_from" and "cpu_to" records (aux: the CPUs), and with
 * TIMELINE_SLOW_US a kept call gets "process_threads" (aux: how many). */
#define TOP(name, params, args)                                              \
    int name params {                                                        \
        static int(*real) params;                                            \
        static int enabled = -1;                                             \
        if (!real) real = (int(*) params)dlsym(RTLD_NEXT, #name);            \
        if (enabled < 0) enabled = top_enabled(#name);                       \
        if (!enabled || depth > 0) return real args;                         \
        const long sw0_ = recording() ? involuntary_switches() : 0;          \
        const int cpu0_ = recording() ? sched_getcpu() : -1;                 \
        const int mark_ = nrecords;                                          \
        double t0_ = now_us();                                               \
        depth++;                                                             \
        int rv_ = real args;                                                 \
        const double t1_ = now_us();                                         \
        if (recording()) {                                                   \
            const long sw_ = involuntary_switches() - sw0_;                  \
            if (sw_ > 0) add("involuntary_ctxsw", t0_, t1_ - t0_, (int)sw_); \
            const int cpu1_ = sched_getcpu();                                \
            if (cpu1_ != cpu0_) {                                            \
                add("cpu_from", t0_, 0, cpu0_);                              \
                add("cpu_to", t1_, 0, cpu1_);                                \
            }                                                                \
        }                                                                    \
        add(#name, t0_, t1_ - t0_, -1);                                      \
        if (slow_us >= 0 && recording()) {                                   \
            if (t1_ - t0_ < slow_us)                                         \
                nrecords = mark_; /* fast: its records go */                 \
            else {                                                           \
                slow_kept++;                                                 \
                add("process_threads", t1_, 0, process_threads());           \
            }                                                                \
        }                                                                    \
        if (--depth == 0) seq++;                                             \
        return rv_;                                                          \
    }

TOP(MPI_Send, (const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm), (b, c, t, d, tag, comm))
TOP(MPI_Recv, (void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Status *st),
    (b, c, t, s, tag, comm, st))
TOP(MPI_Isend, (const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r),
    (b, c, t, d, tag, comm, r))
TOP(MPI_Irecv, (void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Request *r),
    (b, c, t, s, tag, comm, r))
TOP(MPI_Waitall, (int n, MPI_Request *r, MPI_Status *st), (n, r, st))

/* TIMELINE_THREADS=1: at MPI_Finalize, each thread of the process with its name, time on
 * a CPU, involuntary switches and last CPU, to tell whether one of our own threads (the
 * CUDA driver's, MPICH's) ran enough to take a rank's CPU from it. */
static void print_threads(int rank) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[512], comm[64] = "?", line[256];
        unsigned long long run_ns = 0;
        long nvcsw = -1;
        int cpu = -1;
        FILE *f;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        if ((f = fopen(path, "r"))) {
            if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = '\0';
            fclose(f);
        }
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%llu", &run_ns) != 1) run_ns = 0;
            fclose(f);
        }
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        if ((f = fopen(path, "r"))) {
            while (fgets(line, sizeof line, f))
                if (sscanf(line, "nonvoluntary_ctxt_switches: %ld", &nvcsw) == 1) break;
            fclose(f);
        }
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        if ((f = fopen(path, "r"))) {
            /* Field 39 is the CPU last run on; the name (field 2) may hold spaces, so count
             * from its closing parenthesis. */
            if (fgets(line, sizeof line, f)) {
                const char *p = strrchr(line, ')');
                for (int field = 2; p && field < 39; field++) p = strchr(p + 1, ' ');
                if (p) cpu = atoi(p + 1);
            }
            fclose(f);
        }
        fprintf(stderr, "[p2p-timeline] rank %d thread %s (%s): %.1f ms on a CPU, %ld involuntary switches, last on CPU %d\n",
                rank, e->d_name, comm, run_ns / 1e6, nvcsw, cpu);
    }
    closedir(d);
}

int MPI_Finalize(void) {
    static int (*real)(void);
    if (!real) real = (int (*)(void))dlsym(RTLD_NEXT, "MPI_Finalize");
    int rank = 0;
    const char *dir = getenv("TIMELINE_DIR");
    char path[4096];
    /* Built against another MPI's mpi.h, MPI_COMM_WORLD means something else to MPICH,
     * and both ranks write timeline.0.tsv over each other. */
    const char *pmi_rank = getenv("PMI_RANK");
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || (pmi_rank && atoi(pmi_rank) != rank)) {
        fprintf(stderr, "[p2p-timeline] MPI_COMM_WORLD rank %d, PMI_RANK %s: build the shim with MPICH's $MPICC\n",
                rank, pmi_rank ? pmi_rank : "unset");
        snprintf(path, sizeof path, "%s/timeline.pid%d.tsv", dir ? dir : ".", (int)getpid());
    } else {
        snprintf(path, sizeof path, "%s/timeline.%d.tsv", dir ? dir : ".", rank);
    }
    FILE *f = fopen(path, "w");
    if (f) {
        for (int i = 0; i < nrecords; i++)
            fprintf(f, "%d\t%s\t%.3f\t%.3f\t%d\n", records[i].seq, records[i].name, records[i].start, records[i].dur,
                    records[i].aux);
        fclose(f);
    } else {
        fprintf(stderr, "[p2p-timeline] cannot write %s\n", path);
    }
    if (slow_us >= 0)
        fprintf(stderr, "[p2p-timeline] rank %d: %ld of %d top-level calls took at least %.0f us%s\n", rank, slow_kept,
                seq > skip ? seq - skip : 0, slow_us, records_lost ? " (records ran out)" : "");
    else if (records_lost)
        fprintf(stderr, "[p2p-timeline] rank %d: %ld records did not fit\n", rank, records_lost);
    /* For runs whose calls are not recorded (PMPI_ directly, as staging by hand does). */
    if (getenv("TIMELINE_SWITCHES"))
        fprintf(stderr, "[p2p-timeline] rank %d: main thread switched out involuntarily %ld times in the run\n", rank,
                involuntary_switches());
    if (getenv("TIMELINE_THREADS")) print_threads(rank);
    return real();
}
