/* A test aid, not one of the paper's variants: basic's exchange (the same computeVisits,
 * persistent fragments and infection messages), with computeInteractions on the CPU
 * (host_interactions, the reference's own code). It needs no GPU, so that the distributed
 * path can be checked against the serial reference on any machine. */
#include <stdlib.h>
#include <string.h>

#include "episim.h"

/* main loop: begin */
static void on_fragment(sim *s, void *frags, int slot, int n, int base) {
    memcpy(s->visits + base, (visit_msg *)frags + (size_t)slot * s->frag_visits, (size_t)n * sizeof(visit_msg));
}
/* main loop: end */

day_times run_cpu(sim *s, int days) {
    const size_t frag_bytes = (size_t)s->frag_visits * sizeof(visit_msg), slots = (size_t)s->size * kDepth;
    visit_msg *frags = malloc(slots * frag_bytes);
    MPI_Request *recv = malloc(slots * sizeof *recv);
    if (!frags || !recv) {
        fprintf(stderr, "%s: out of host memory for the fragments\n", kProgram);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    open_receives(s, frags, MPI_BYTE, recv);
    day_times t = {0, 0, 0, 0};
    /* main loop: begin */
    for (int day = 0; day < days; day++) {
        compute_visits(s, day, recv, on_fragment, frags, &t);
        const double t0 = MPI_Wtime();
        const int infected = host_interactions(s->visits, s->received, s->l0, s->nl, day, s->seed, s->ids);
        t.interactions += MPI_Wtime() - t0;
        finish_day(s, day, s->ids, infected, &t);
    }
    /* main loop: end */
    close_receives(s, recv);
    free(recv);
    free(frags);
    return t;
}
