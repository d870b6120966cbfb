/* Where a benchmark writes its CSV: the --csv path, or bench/results/NAME-<date>.csv
 * relative to the working directory (created when missing). Shared by every benchmark. */
#ifndef BENCH_RESULTS_CSV_H_INCLUDED
#define BENCH_RESULTS_CSV_H_INCLUDED

#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static FILE *open_results_csv(const char *explicit_path, const char *name, char *path, size_t len) {
    if (explicit_path) {
        snprintf(path, len, "%s", explicit_path);
    } else {
        char stamp[32];
        time_t now = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
        mkdir("bench", 0777);
        mkdir("bench/results", 0777);
        snprintf(path, len, "bench/results/%s-%s.csv", name, stamp);
    }
    return fopen(path, "w");
}

/* The CSV's first line, "# NAME date=... host=... command=...", and MPI's library version
 * (first line only) into lib[MPI_MAX_LIBRARY_VERSION_STRING] for the caller's second. */
static void begin_results_csv(FILE *f, const char *name, int argc, char **argv, char *lib) {
    char host[256] = "unknown", date[64];
    int liblen = 0;
    time_t now = time(NULL);
    gethostname(host, sizeof host - 1);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
    PMPI_Get_library_version(lib, &liblen);
    lib[strcspn(lib, "\n")] = '\0';
    fprintf(f, "# %s date=%s host=%s command=", name, date, host);
    for (int i = 0; i < argc; i++) fprintf(f, "%s%s", i ? " " : "", argv[i]);
    fputc('\n', f);
}

#endif
