/* The mpi-acc variant on CUDA: the device pointer goes to MPI as it is. Each face of a phase
 * (HALO columns of the three velocities or of the six stresses, interior rows only) is one
 * subarray of the phase's fields (main.c builds them, shared with the OpenCL form), a
 * datatype tagged once, at start-up, with the buffer kind and the application's stream, so
 * that MPI-ACC reads a face only after the kernel that wrote it on that stream, whatever the
 * host waited for (--async waits for nothing). A send or receive names the phase's first
 * field as its buffer. The main loop holds MPI calls and the kernels, and no cudaMemcpy. */
#include "seismology.h"

#include <mpiacc.h>

/* CUDA memory, ordered on the application's stream; the phase's start is in the address. */
static void tag(const domain *d, int first, MPI_Datatype t) {
    (void)first;
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    MPI_Type_set_attr(t, MPIX_ACC_STREAM, (void *)d->stream);
}

/* main loop: begin */
static void exchange(const domain *d, const face_types *ft, int first, step_times *t) {
    float *phase = d->wave + (size_t)first * d->field;
    MPI_Request req[4];
    MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: GCC takes MPICH's for an empty array */
    const double t0 = MPI_Wtime();
    MPI_Irecv(phase, 1, ft->recv_west, d->west, TAG_EASTWARD, d->cart, &req[0]);
    MPI_Irecv(phase, 1, ft->recv_east, d->east, TAG_WESTWARD, d->cart, &req[1]);
    MPI_Isend(phase, 1, ft->send_east, d->east, TAG_EASTWARD, d->cart, &req[2]);
    MPI_Isend(phase, 1, ft->send_west, d->west, TAG_WESTWARD, d->cart, &req[3]);
    MPI_Waitall(4, req, st);
    t->comm += MPI_Wtime() - t0;
}
/* main loop: end */

step_times run_mpi_acc(domain *d, int steps) {
    face_types velocity = make_face_types(d, VX, VELOCITY_FIELDS, tag),
               stress = make_face_types(d, SXX, STRESS_FIELDS, tag);
    step_times t = {0, 0, 0, 0};
    /* main loop: begin */
    for (int step = 0; step < steps; step++) {
        velocity_step(d, &t);
        exchange(d, &velocity, VX, &t);
        stress_step(d, step, &t);
        exchange(d, &stress, SXX, &t);
        record_step(d, step, &t);
    }
    /* main loop: end */
    free_face_types(&velocity);
    free_face_types(&stress);
    return t;
}
