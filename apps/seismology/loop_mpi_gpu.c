/* The mpi-gpu variant: bulk copies, as the first GPU port of FDM-Seismology. For each
 * exchange the whole fields of the phase (three velocities or six stresses) are read from
 * the cl_mem into a host mirror with clEnqueueReadBuffer, the faces are marshaled on the CPU
 * into contiguous send buffers, MPI runs on host memory, the received faces are unmarshaled
 * into the mirror's halos, and the whole fields are written back. The marshaling and the
 * host buffers are main.c's, shared with the CUDA form. */
#include "seismology.h"

/* main loop: begin */
static void exchange(const domain *d, host_buffers *hb, int first, int count, step_times *t) {
    const size_t offset = (size_t)first * d->field, floats = (size_t)count * d->field;
    const int face = count * d->p->nz * d->p->ny * HALO;
    MPI_Request req[4];
    MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: GCC takes MPICH's for an empty array */
    const double t0 = MPI_Wtime();
    CL_CHECK(clEnqueueReadBuffer(d->queue, d->wave, CL_TRUE, offset * sizeof(float), floats * sizeof(float),
                                 hb->mirror + offset, 0, NULL, NULL));
    const double t1 = MPI_Wtime();
    if (d->west != MPI_PROC_NULL) marshal(d, hb->mirror, first, count, HALO, hb->send_west, 1);
    if (d->east != MPI_PROC_NULL) marshal(d, hb->mirror, first, count, d->lnx, hb->send_east, 1);
    const double t2 = MPI_Wtime();
    MPI_Irecv(hb->recv_west, face, MPI_FLOAT, d->west, TAG_EASTWARD, d->cart, &req[0]);
    MPI_Irecv(hb->recv_east, face, MPI_FLOAT, d->east, TAG_WESTWARD, d->cart, &req[1]);
    MPI_Isend(hb->send_east, face, MPI_FLOAT, d->east, TAG_EASTWARD, d->cart, &req[2]);
    MPI_Isend(hb->send_west, face, MPI_FLOAT, d->west, TAG_WESTWARD, d->cart, &req[3]);
    MPI_Waitall(4, req, st);
    const double t3 = MPI_Wtime();
    if (d->west != MPI_PROC_NULL) marshal(d, hb->mirror, first, count, 0, hb->recv_west, 0);
    if (d->east != MPI_PROC_NULL) marshal(d, hb->mirror, first, count, d->lnx + HALO, hb->recv_east, 0);
    const double t4 = MPI_Wtime();
    CL_CHECK(clEnqueueWriteBuffer(d->queue, d->wave, CL_TRUE, offset * sizeof(float), floats * sizeof(float),
                                  hb->mirror + offset, 0, NULL, NULL));
    const double t5 = MPI_Wtime();
    t->copy += (t1 - t0) + (t5 - t4);
    t->marshal += (t2 - t1) + (t4 - t3);
    t->comm += t3 - t2;
}
/* main loop: end */

step_times run_mpi_gpu(domain *d, int steps) {
    host_buffers hb = host_buffers_alloc(d, 1);
    step_times t = {0, 0, 0, 0};
    /* main loop: begin */
    for (int step = 0; step < steps; step++) {
        velocity_step(d, &t, NULL);
        exchange(d, &hb, VX, VELOCITY_FIELDS, &t);
        stress_step(d, step, &t, NULL);
        exchange(d, &hb, SXX, STRESS_FIELDS, &t);
        record_step(d, step, &t);
    }
    /* main loop: end */
    host_buffers_free(&hb);
    return t;
}
