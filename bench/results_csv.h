/* Where a benchmark writes its CSV: the --csv path, or bench/results/NAME-<date>.csv
 * relative to the working directory (created when missing). Shared by every benchmark. */
#ifndef BENCH_RESULTS_CSV_H_INCLUDED
#define BENCH_RESULTS_CSV_H_INCLUDED

#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

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

#endif
