/* LD_PRELOAD shim for the GPU machine, which has no debugger: SIGUSR2 to a process makes
 * every thread of it print its backtrace to stderr.
 *
 *   gcc -shared -fPIC -o /tmp/backtraces.so maint/diag/backtraces.c
 *   LD_PRELOAD=/tmp/backtraces.so mpiexec -n 2 PROGRAM &     # then, once it hangs:
 *   kill -USR2 PID                                           # the program's, not mpiexec's
 *
 * Frames in libmpiacc without a symbol name show as (+0xOFFSET); addr2line -f -C -e
 * .libs/libmpiacc.so 0xOFFSET names them. Found the lost update of the in-flight count
 * (4cffc65). backtrace() is not async-signal-safe; this is a diagnosis tool only. */
#define _GNU_SOURCE
#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static void print_own_backtrace(int sig) {
    (void)sig;
    void *frames[40];
    int n = backtrace(frames, 40);
    char header[96];
    int len = snprintf(header, sizeof header, "--- pid %d tid %ld\n", getpid(), (long)syscall(SYS_gettid));
    if (write(2, header, (size_t)len) < 0) return;
    backtrace_symbols_fd(frames, n, 2);
}

/* Signals each thread in turn (SIGUSR1), pausing so their outputs do not interleave. */
static void print_all_backtraces(int sig) {
    (void)sig;
    DIR *tasks = opendir("/proc/self/task");
    if (!tasks) return;
    const long self = syscall(SYS_gettid);
    struct dirent *e;
    while ((e = readdir(tasks))) {
        const long tid = atol(e->d_name);
        if (tid <= 0) continue;
        if (tid == self) {
            print_own_backtrace(0);
        } else {
            syscall(SYS_tgkill, getpid(), tid, SIGUSR1);
            usleep(20000);
        }
    }
    closedir(tasks);
}

__attribute__((constructor)) static void install(void) {
    void *frames[2];
    backtrace(frames, 2); /* loads libgcc now, not inside a signal handler */
    signal(SIGUSR1, print_own_backtrace);
    signal(SIGUSR2, print_all_backtraces);
}
