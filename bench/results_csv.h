/* Where a benchmark writes its CSV: --csv FILE, or NAME-<date>.csv in the folder --csv
 * names (an existing directory, or a path ending in '/', created when missing), or in the
 * current directory. Never a fixed path: bench/results/ in the source tree holds the
 * reference runs, and a run's own output is not one of them. Shared by every benchmark. */
#ifndef BENCH_RESULTS_CSV_H_INCLUDED
#define BENCH_RESULTS_CSV_H_INCLUDED

#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static FILE *open_results_csv(const char *explicit_path, const char *name, char *path, size_t len) {
    struct stat st;
    const size_t n = explicit_path ? strlen(explicit_path) : 0;
    const int folder = explicit_path && ((n > 0 && explicit_path[n - 1] == '/') ||
                                         (stat(explicit_path, &st) == 0 && S_ISDIR(st.st_mode)));
    if (explicit_path && !folder) {
        snprintf(path, len, "%s", explicit_path);
    } else {
        char stamp[32];
        time_t now = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
        if (folder) {
            mkdir(explicit_path, 0777);
            snprintf(path, len, "%s%s%s-%s.csv", explicit_path, explicit_path[n - 1] == '/' ? "" : "/", name, stamp);
        } else {
            snprintf(path, len, "%s-%s.csv", name, stamp);
        }
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
