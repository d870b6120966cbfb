/* LD_PRELOAD sampling profiler for the GPU machine, which has no perf: a timer samples
 * the calling thread's stack every SAMPLE_US microseconds of wall time, only while it is
 * inside one of the MPI calls named by SAMPLE_IN (comma-separated; default MPI_Waitall),
 * after the first SAMPLE_SKIP of those calls (default 0: the first message's one-time
 * set-up, a hwloc topology load and the staging pool's growth, otherwise fills the
 * buffer under short ticks).
 * Ranks busy-poll, so wall time is CPU time there. At exit each process writes
 * $SAMPLE_DIR/samples.<rank>.<pid>: its /proc/self/maps, then one line of return
 * addresses per sample; maint/diag/sampler-report.py turns them into self and inclusive
 * profiles on a machine that has the same library builds (carry a libmpiacc built there
 * and preload it after this shim, so that its symbols are at hand).
 *
 *   $MPICC -O2 -shared -fPIC -o /tmp/sampler.so maint/diag/sampler.c -ldl -lrt
 *   SAMPLE_US=20 SAMPLE_IN=MPI_Waitall SAMPLE_DIR=/tmp/s mpiexec -n 2 \
 *       env LD_PRELOAD=/tmp/sampler.so:$PWD/libmpiacc.so.0 bench/.libs/pt2pt ...
 *   maint/diag/sampler-report.py /tmp/s/samples.1.* DIR-WITH-THE-LIBRARIES
 *
 * The timer is armed on entry to a sampled call and disarmed on exit, so the rest of the
 * program runs undisturbed; inside, each tick costs a signal and an unwind (1-2 us), so
 * the profile says where the time goes, not how much there is: 20 us ticks cut a window
 * of 256 KiB IPC pulls from 29.5 to 6.7 GB/s (two H100s, 2026-11-25). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

enum { DEPTH = 14, MAX_SAMPLES = 400000 };
static void **samples; /* MAX_SAMPLES rows of DEPTH addresses, 0-terminated */
static int nsamples;
static volatile sig_atomic_t sampling;
static int enabled, inside, rank = -1;
static timer_t timer;
static struct itimerspec period;
static char sample_in[512] = ",MPI_Waitall,";
static long skip_calls; /* SAMPLE_SKIP: sampled calls let through first (start-up, warm-up) */

static void on_tick(int sig, siginfo_t *si, void *uc_) {
    (void)sig, (void)si;
    if (!sampling || nsamples >= MAX_SAMPLES) return;
    void **row = samples + (size_t)nsamples * DEPTH;
    void *bt[DEPTH + 3];
    /* bt[0] this handler, bt[1] the signal trampoline, bt[2] the interrupted pc (taken
     * from the context instead, exactly), then its callers. */
    int n = backtrace(bt, DEPTH + 2);
    memset(row, 0, sizeof(void *) * DEPTH);
    row[0] = (void *)((ucontext_t *)uc_)->uc_mcontext.gregs[REG_RIP];
    for (int i = 3, k = 1; i < n && k < DEPTH - 1; i++) row[k++] = bt[i];
    nsamples++;
}

__attribute__((constructor)) static void start(void) {
    const char *us = getenv("SAMPLE_US");
    if (!us || atol(us) <= 0) return;
    if (getenv("SAMPLE_IN")) snprintf(sample_in, sizeof sample_in, ",%s,", getenv("SAMPLE_IN"));
    if (getenv("SAMPLE_SKIP")) skip_calls = atol(getenv("SAMPLE_SKIP"));
    samples = calloc((size_t)MAX_SAMPLES * DEPTH, sizeof(void *));
    if (!samples) return;
    void *warm[2];
    backtrace(warm, 2); /* loads the unwinder now, not inside the first signal */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_tick;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid); /* the main thread: MPI calls' */
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0) return;
    long v = atol(us);
    period.it_value.tv_sec = period.it_interval.tv_sec = v / 1000000;
    period.it_value.tv_nsec = period.it_interval.tv_nsec = (v % 1000000) * 1000;
    enabled = 1;
}

__attribute__((destructor)) static void finish(void) {
    if (!enabled) return;
    sampling = 0;
    struct itimerspec off;
    memset(&off, 0, sizeof off);
    timer_settime(timer, 0, &off, NULL);
    char path[1024];
    snprintf(path, sizeof path, "%s/samples.%d.%d", getenv("SAMPLE_DIR") ? getenv("SAMPLE_DIR") : ".", rank,
             (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return;
    FILE *m = fopen("/proc/self/maps", "r");
    char line[1024];
    while (m && fgets(line, sizeof line, m)) fprintf(f, "M %s", line);
    if (m) fclose(m);
    for (int i = 0; i < nsamples; i++) {
        fputc('S', f);
        for (int k = 0; k < DEPTH && samples[(size_t)i * DEPTH + k]; k++)
            fprintf(f, " %lx", (unsigned long)samples[(size_t)i * DEPTH + k]);
        fputc('\n', f);
    }
    fclose(f);
}

static int enter(const char *name) {
    if (!enabled || inside) return 0;
    char key[128];
    snprintf(key, sizeof key, ",%s,", name);
    if (!strstr(sample_in, key)) return 0;
    if (skip_calls > 0) {
        skip_calls--;
        return 0;
    }
    if (rank < 0) PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    inside = 1;
    sampling = 1;
    timer_settime(timer, 0, &period, NULL);
    return 1;
}

static void leave(int entered) {
    if (!entered) return;
    struct itimerspec off;
    memset(&off, 0, sizeof off);
    timer_settime(timer, 0, &off, NULL);
    sampling = 0;
    inside = 0;
}

/* The calls that can be sampled; add one with another SAMPLED line. */
#define SAMPLED(name, params, args)                                \
    int name params {                                              \
        static int(*real) params;                                  \
        if (!real) real = (int(*) params)dlsym(RTLD_NEXT, #name);  \
        int entered_ = enter(#name);                               \
        int rv_ = real args;                                       \
        leave(entered_);                                           \
        return rv_;                                                \
    }

SAMPLED(MPI_Isend, (const void *b, int c, MPI_Datatype t, int d, int tg, MPI_Comm cm, MPI_Request *r),
        (b, c, t, d, tg, cm, r))
SAMPLED(MPI_Irecv, (void *b, int c, MPI_Datatype t, int s, int tg, MPI_Comm cm, MPI_Request *r),
        (b, c, t, s, tg, cm, r))
SAMPLED(MPI_Send, (const void *b, int c, MPI_Datatype t, int d, int tg, MPI_Comm cm), (b, c, t, d, tg, cm))
SAMPLED(MPI_Recv, (void *b, int c, MPI_Datatype t, int s, int tg, MPI_Comm cm, MPI_Status *st),
        (b, c, t, s, tg, cm, st))
SAMPLED(MPI_Wait, (MPI_Request * r, MPI_Status *s), (r, s))
SAMPLED(MPI_Waitall, (int n, MPI_Request *r, MPI_Status *s), (n, r, s))
