/* The mpi-acc variant: the cl_mem goes to MPI as it is. Each face of a phase (HALO columns of
 * the three velocities or of the six stresses, interior rows only) is one subarray of the
 * wavefield, a datatype tagged once, at start-up, with the buffer kind, the application's
 * queue (it names the context and device) and the byte offset of the phase's first field.
 * In the main loop each send type also gets the event of the kernel that wrote its face, so
 * MPI-ACC reads the face only after that kernel, whatever the host waited for. The main loop
 * holds MPI calls and the kernels, and no clEnqueueRead or clEnqueueWrite. */
#include "seismology.h"

#include <mpiacc.h>

typedef struct {
    MPI_Datatype send_west, recv_west, send_east, recv_east;
} face_types;

/* HALO columns from column `i0` of `count` fields, interior rows only; the offset takes the
 * subarray to the phase's first field. */
static MPI_Datatype face(const domain *d, int first, int count, int i0) {
    const int sizes[4] = {count, d->nzp, d->nyp, d->nxp}, subsizes[4] = {count, d->p->nz, d->p->ny, HALO};
    const int starts[4] = {0, HALO, HALO, i0};
    MPI_Datatype t;
    MPI_Type_create_subarray(4, sizes, subsizes, starts, MPI_ORDER_C, MPI_FLOAT, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_OPENCL);
    MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)d->queue);
    MPI_Type_set_attr(t, MPIX_ACC_OFFSET, (void *)(long)((long)first * d->field * (long)sizeof(float)));
    MPI_Type_commit(&t);
    return t;
}

static face_types make_face_types(const domain *d, int first, int count) {
    return (face_types){
        .send_west = face(d, first, count, HALO),
        .recv_west = face(d, first, count, 0),
        .send_east = face(d, first, count, d->lnx),
        .recv_east = face(d, first, count, d->lnx + HALO),
    };
}

static void free_face_types(face_types *ft) {
    MPI_Datatype *all[] = {&ft->send_west, &ft->recv_west, &ft->send_east, &ft->recv_east};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) MPI_Type_free(all[i]);
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
    face_types velocity = make_face_types(d, VX, VELOCITY_FIELDS), stress = make_face_types(d, SXX, STRESS_FIELDS);
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
