/* The advanced MPI+GPU variant, staged by hand: fragments land in pinned host memory (one
 * cudaMallocHost block, kept for the run), and as each arrives a cudaMemcpyAsync moves it to
 * the GPU's visit vector and an unpack kernel follows it, both on the application's
 * non-default stream, overlapping the fragments still in flight. A slot is restarted only
 * once its copy is done (an event per slot). */
#include <stdlib.h>

#include "episim.h"

day_times run_advanced(sim *s, int days) {
    const size_t frag_bytes = (size_t)s->frag_visits * sizeof(visit_msg), slots = (size_t)s->size * kDepth;
    const cudaStream_t stream = s->gpu.stream;
    visit_msg *frags = NULL;
    CUDA_CHECK(cudaMallocHost((void **)&frags, slots * frag_bytes));
    MPI_Request *recv = malloc(slots * sizeof *recv);
    cudaEvent_t *copied = malloc(slots * sizeof *copied);
    if (!recv || !copied) {
        fprintf(stderr, "%s: out of host memory for the fragments\n", kProgram);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < slots; i++) CUDA_CHECK(cudaEventCreateWithFlags(&copied[i], cudaEventDisableTiming));
    open_receives(s, frags, MPI_BYTE, recv);
    day_times t = {0, 0, 0, 0};
    /* main loop: begin */
    for (int day = 0; day < days; day++) {
        compute_visits(s, day, recv, &t);
        device_begin_day(s, s->due, stream);
        for (int got = 0; got < s->total_fragments; got++) {
            int n, i = next_fragment(s, recv, &n, &t);
            const double t0 = MPI_Wtime();
            visit_msg *to = s->gpu.visits + s->received - n;
            CUDA_CHECK(cudaMemcpyAsync(to, frags + (size_t)i * s->frag_visits, (size_t)n * sizeof(visit_msg),
                                       cudaMemcpyHostToDevice, stream));
            CUDA_CHECK(cudaEventRecord(copied[i], stream));
            device_unpack(s, to, n, s->received - n, stream);
            if (slot_reused(s, i)) CUDA_CHECK(cudaEventSynchronize(copied[i]));
            t.unpack += MPI_Wtime() - t0;
            restart_fragment(s, recv, i, &t);
        }
        /* The stream orders the infection kernel after the last unpack, and the next day's
         * receives after every copy (device_interactions waits for the stream). */
        const double t1 = MPI_Wtime();
        const int infected = device_interactions(s, day, stream, s->ids);
        t.interactions += MPI_Wtime() - t1;
        finish_day(s, day, s->ids, infected, &t);
    }
    /* main loop: end */
    close_receives(s, recv);
    for (size_t i = 0; i < slots; i++) CUDA_CHECK(cudaEventDestroy(copied[i]));
    free(copied);
    free(recv);
    CUDA_CHECK(cudaFreeHost(frags));
    return t;
}
