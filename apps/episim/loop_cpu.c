/* A test aid, not one of the paper's variants: basic's exchange (the same computeVisits,
 * count message, persistent fragments and infection messages), with computeInteractions on
 * the CPU (host_interactions, the reference's own code). It needs no GPU, so that the
 * distributed path can be checked against the serial reference on any machine. */
#include <stdlib.h>
#include <string.h>

#include "episim.h"

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
        compute_visits(s, day, recv, &t);
        for (int got = 0; got < s->total_fragments; got++) {
            int n, i = next_fragment(s, recv, &n, &t);
            const double t0 = MPI_Wtime();
            memcpy(s->visits + s->received - n, frags + (size_t)i * s->frag_visits, (size_t)n * sizeof(visit_msg));
            t.unpack += MPI_Wtime() - t0;
            restart_fragment(s, recv, i, &t);
        }
        const double t1 = MPI_Wtime();
        const int infected = host_interactions(s->visits, s->received, s->l0, s->nl, day, s->seed, s->ids);
        t.interactions += MPI_Wtime() - t1;
        finish_day(s, day, s->ids, infected, &t);
    }
    /* main loop: end */
    close_receives(s, recv);
    free(recv);
    free(frags);
    return t;
}
