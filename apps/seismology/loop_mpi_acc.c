/* The mpi-acc variant: the cl_mem goes to MPI as it is. Each face of a phase (HALO columns of
 * the three velocities or of the six stresses, interior rows only) is one subarray of the
 * wavefield, a datatype tagged once, at start-up, with the buffer kind, the application's
 * queue (it names the context and device) and the byte offset of the phase's first field.
 * In the main loop each send type also gets the event of the kernel that wrote its face, so
 * MPI-ACC reads the face only after that kernel, whatever the host waited for. The main loop
 * holds MPI calls and the kernels, and no clEnqueueRead or clEnqueueWrite. main.c builds the
 * subarrays, shared with the CUDA form; tag() here gives them their attributes. */
#include "seismology.h"

#include <mpiacc.h>

/* The buffer kind, the application's queue (it names the context and device) and the byte
 * offset of the phase's first field in the cl_mem. */
static void tag(const domain *d, int first, MPI_Datatype t) {
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_OPENCL);
    MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)d->queue);
    MPI_Type_set_attr(t, MPIX_ACC_OFFSET, (void *)(long)((long)first * d->field * (long)sizeof(float)));
}

/* main loop: begin */
static void exchange(const domain *d, const face_types *ft, cl_event written, step_times *t) {
    MPI_Request req[4];
    MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: GCC takes MPICH's for an empty array */
    const double t0 = MPI_Wtime();
    MPI_Type_set_attr(ft->send_west, MPIX_ACC_EVENT, (void *)written);
    MPI_Type_set_attr(ft->send_east, MPIX_ACC_EVENT, (void *)written);
    MPI_Irecv(d->wave, 1, ft->recv_west, d->west, TAG_EASTWARD, d->cart, &req[0]);
    MPI_Irecv(d->wave, 1, ft->recv_east, d->east, TAG_WESTWARD, d->cart, &req[1]);
    MPI_Isend(d->wave, 1, ft->send_east, d->east, TAG_EASTWARD, d->cart, &req[2]);
    MPI_Isend(d->wave, 1, ft->send_west, d->west, TAG_WESTWARD, d->cart, &req[3]);
    MPI_Waitall(4, req, st);
    t->comm += MPI_Wtime() - t0;
}
/* main loop: end */

step_times run_mpi_acc(domain *d, int steps) {
    face_types velocity = make_face_types(d, VX, VELOCITY_FIELDS, tag),
               stress = make_face_types(d, SXX, STRESS_FIELDS, tag);
    step_times t = {0, 0, 0, 0};
    cl_event done;
    /* main loop: begin */
    for (int step = 0; step < steps; step++) {
        velocity_step(d, &t, &done);
        exchange(d, &velocity, done, &t);
        CL_CHECK(clReleaseEvent(done));
        stress_step(d, step, &t, &done);
        exchange(d, &stress, done, &t);
        CL_CHECK(clReleaseEvent(done));
        record_step(d, step, &t);
    }
    /* main loop: end */
    free_face_types(&velocity);
    free_face_types(&stress);
    return t;
}
