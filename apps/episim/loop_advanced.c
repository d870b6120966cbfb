/* The advanced MPI+GPU variant, staged by hand: fragments land in pinned host memory (one
 * cudaMallocHost block, kept for the run), and as each arrives a cudaMemcpyAsync moves it
 * into the GPU's visit vector and an unpack kernel follows it, both on the application's
 * non-default stream, overlapping the fragments still in flight and the visits still being
 * computed. The slot is restarted once its copy is done (an event). */
#include <stdlib.h>

#include "episim.h"

typedef struct {
    visit_msg *frags; /* pinned */
    cudaEvent_t copied;
} staging;

/* main loop: begin */
static void on_fragment(sim *s, void *ctx, int slot, int n, int base) {
    const staging *st = ctx;
    CUDA_CHECK(cudaMemcpyAsync(s->gpu.visits + base, st->frags + (size_t)slot * s->frag_visits,
                               (size_t)n * sizeof(visit_msg), cudaMemcpyHostToDevice, s->gpu.stream));
    CUDA_CHECK(cudaEventRecord(st->copied, s->gpu.stream));
    device_unpack(s, s->gpu.visits + base, n, base, s->gpu.stream);
    CUDA_CHECK(cudaEventSynchronize(st->copied)); /* the slot is restarted on return */
}
/* main loop: end */

day_times run_advanced(sim *s, int days) {
    const size_t frag_bytes = (size_t)s->frag_visits * sizeof(visit_msg), slots = (size_t)s->size * kDepth;
    staging st;
    CUDA_CHECK(cudaMallocHost((void **)&st.frags, slots * frag_bytes));
    CUDA_CHECK(cudaEventCreateWithFlags(&st.copied, cudaEventDisableTiming));
    MPI_Request *recv = malloc(slots * sizeof *recv);
    if (!recv) {
        fprintf(stderr, "%s: out of host memory for the fragments\n", kProgram);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    open_receives(s, st.frags, MPI_BYTE, recv);
    day_times t = {0, 0, 0, 0};
    /* main loop: begin */
    for (int day = 0; day < days; day++) {
        device_begin_day(s, s->gpu.stream);
        compute_visits(s, day, recv, on_fragment, &st, &t);
        /* The stream orders the infection kernel after the last unpack. */
        const double t0 = MPI_Wtime();
        const int infected = device_interactions(s, day, s->gpu.stream, s->ids);
        t.interactions += MPI_Wtime() - t0;
        finish_day(s, day, s->ids, infected, &t);
    }
    /* main loop: end */
    close_receives(s, recv);
    free(recv);
    CUDA_CHECK(cudaEventDestroy(st.copied));
    CUDA_CHECK(cudaFreeHost(st.frags));
    return t;
}
