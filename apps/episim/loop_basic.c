/* The basic MPI+GPU variant, as the first GPU-EpiSimdemics: fragments land in pageable host
 * memory and are appended to a host visit vector; once the day's visits are all in, one
 * blocking cudaMemcpy moves the vector to the GPU, and the unpack and infection kernels run
 * on the legacy default stream. The GPU idles during the exchange, and the CPU during the
 * unpack. */
#include <stdlib.h>
#include <string.h>

#include "episim.h"

/* main loop: begin */
static void on_fragment(sim *s, void *frags, int slot, int n, int base) {
    memcpy(s->visits + base, (visit_msg *)frags + (size_t)slot * s->frag_visits, (size_t)n * sizeof(visit_msg));
}
/* main loop: end */

day_times run_basic(sim *s, int days) {
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
        device_begin_day(s, 0);
        compute_visits(s, day, recv, on_fragment, frags, &t);
        const double t0 = MPI_Wtime();
        CUDA_CHECK(
            cudaMemcpy(s->gpu.visits, s->visits, (size_t)s->received * sizeof(visit_msg), cudaMemcpyHostToDevice));
        device_unpack(s, s->gpu.visits, s->received, 0, 0);
        CUDA_CHECK(cudaStreamSynchronize(0));
        const double t1 = MPI_Wtime();
        t.unpack += t1 - t0;
        const int infected = device_interactions(s, day, 0, s->ids);
        t.interactions += MPI_Wtime() - t1;
        finish_day(s, day, s->ids, infected, &t);
    }
    /* main loop: end */
    close_receives(s, recv);
    free(recv);
    free(frags);
    return t;
}
