/* The MPI-ACC variant: the persistent receives post straight into GPU memory. The fragments
 * are one cudaMalloc block, received through a datatype tagged with MPIX_ACC_BUF_TYPE = CUDA
 * and MPIX_ACC_STREAM = the application's non-default stream; MPI-ACC stages (or pipelines)
 * the bytes inside the MPI calls. As each fragment completes, a small unpack kernel on that
 * stream turns it into rows, overlapping the fragments still in flight and the visits still
 * being computed, and the slot is restarted at once: MPI-ACC captures the stream at each
 * MPI_Start and writes the slot only after the work queued there, the slot's unpack kernel
 * included. No host visit vector, no cudaMemcpy, no event. */
#include <stdlib.h>

#include <mpiacc.h>

#include "episim.h"

/* main loop: begin */
static void on_fragment(sim *s, void *frags, int slot, int n, int base) {
    device_unpack(s, (visit_msg *)frags + (size_t)slot * s->frag_visits, n, base, s->gpu.stream);
}
/* main loop: end */

day_times run_mpi_acc(sim *s, int days) {
    const size_t frag_bytes = (size_t)s->frag_visits * sizeof(visit_msg), slots = (size_t)s->size * kDepth;
    visit_msg *frags = NULL;
    CUDA_CHECK(cudaMalloc((void **)&frags, slots * frag_bytes));
    MPI_Datatype on_gpu;
    MPI_Type_dup(MPI_BYTE, &on_gpu);
    MPI_Type_set_attr(on_gpu, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    MPI_Type_set_attr(on_gpu, MPIX_ACC_STREAM, (void *)s->gpu.stream);
    MPI_Type_commit(&on_gpu);
    MPI_Request *recv = malloc(slots * sizeof *recv);
    if (!recv) {
        fprintf(stderr, "%s: out of host memory for the fragments\n", kProgram);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    open_receives(s, frags, on_gpu, recv);
    day_times t = {0, 0, 0, 0};
    /* main loop: begin */
    for (int day = 0; day < days; day++) {
        device_begin_day(s, s->gpu.stream);
        compute_visits(s, day, recv, on_fragment, frags, &t);
        /* The stream orders the infection kernel after the last unpack. */
        const double t0 = MPI_Wtime();
        const int infected = device_interactions(s, day, s->gpu.stream, s->ids);
        t.interactions += MPI_Wtime() - t0;
        finish_day(s, day, s->ids, infected, &t);
    }
    /* main loop: end */
    close_receives(s, recv);
    free(recv);
    MPI_Type_free(&on_gpu);
    CUDA_CHECK(cudaFree(frags));
    return t;
}
