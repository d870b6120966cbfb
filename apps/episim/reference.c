/* The serial reference that --check compares with: the whole population on one process,
 * no MPI and no fragments, computeInteractions on the CPU through the same model.h
 * functions that the kernels run. */
#include <stdlib.h>
#include <string.h>

#include "episim.h"

void reference(int persons, int locations, int days, uint64_t seed, long long (*counts)[EPI_STATES]) {
    const size_t n = (size_t)persons * EPI_VISITS;
    uint8_t *state = malloc((size_t)persons), *infected = malloc((size_t)persons);
    int *until = malloc((size_t)persons * sizeof(int));
    visit_msg *visits = malloc(n * sizeof *visits);
    unsigned *ids = malloc(n * sizeof *ids);
    if (!state || !infected || !until || !visits || !ids) {
        fprintf(stderr, "%s: out of host memory for the reference\n", kProgram);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int p = 0; p < persons; p++) epi_initial(seed, (uint32_t)p, &state[p], &until[p]);
    memset(counts, 0, (size_t)days * sizeof *counts);
    for (int day = 0; day < days; day++) {
        for (int p = 0; p < persons; p++)
            for (int k = 0; k < EPI_VISITS; k++)
                visits[(size_t)p * EPI_VISITS + k] =
                    epi_visit(seed, day, (uint32_t)p, k, (uint32_t)locations, state[p]);
        const int m = host_interactions(visits, (int)n, 0, locations, day, seed, ids);
        memset(infected, 0, (size_t)persons);
        for (int i = 0; i < m; i++) infected[ids[i]] = 1;
        for (int p = 0; p < persons; p++) {
            epi_advance(seed, (uint32_t)p, day, infected[p], &state[p], &until[p]);
            counts[day][state[p]]++;
        }
    }
    free(state);
    free(infected);
    free(until);
    free(visits);
    free(ids);
}
