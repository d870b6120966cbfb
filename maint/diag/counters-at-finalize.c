/* LD_PRELOAD shim: at MPI_Finalize, each rank prints the libmpiacc counters that
 * COUNTERS names (comma separated), as "[counters] rank R name=value ...". The library
 * keeps named event counters (util/counters.h: protocol modes chosen, cache hits, hints)
 * but prints none of them; this shows which protocol path a benchmark's messages took.
 *
 *   $MPICC -shared -fPIC -o /tmp/counters.so maint/diag/counters-at-finalize.c -ldl
 *   COUNTERS=protocol.send.ipc,protocol.send.ipc_declined mpiexec -n 2 \
 *       env LD_PRELOAD=/tmp/counters.so bench/pt2pt --sizes 8 --dirs 'D->H' --configs mpiacc
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int MPI_Finalize(void) {
    static int (*real)(void);
    if (!real) real = (int (*)(void))dlsym(RTLD_NEXT, "MPI_Finalize");
    long long (*value)(const char *) = (long long (*)(const char *))dlsym(RTLD_DEFAULT, "mpiacc_counter_value");
    const char *names = getenv("COUNTERS");
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (names && value) {
        char line[8192];
        int n = snprintf(line, sizeof line, "[counters] rank %d", rank);
        char *copy = strdup(names);
        for (char *save = NULL, *name = strtok_r(copy, ",", &save); name && n < (int)sizeof line;
             name = strtok_r(NULL, ",", &save))
            n += snprintf(line + n, sizeof line - n, " %s=%lld", name, value(name));
        free(copy);
        fprintf(stderr, "%s\n", line);
    } else if (names) {
        fprintf(stderr, "[counters] rank %d: mpiacc_counter_value not found (libmpiacc not loaded?)\n", rank);
    }
    return real();
}
