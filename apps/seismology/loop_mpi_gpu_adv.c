/* The mpi-gpu-adv variant: marshaling on the device, as the tuned GPU port of FDM-Seismology.
 * For each exchange the `face` kernel packs each outgoing face of the phase's fields into a
 * contiguous cl_mem staging buffer, only those buffers are read to the host, MPI runs on host
 * memory, the received faces are written into staging buffers and the kernel unpacks them
 * into the halos. */
#include "seismology.h"

typedef struct {
    cl_mem send_west, recv_west, send_east, recv_east; /* device staging, STRESS_FIELDS faces each */
    host_buffers host;                                 /* host staging, main.c's */
} staging;

/* main loop: begin */
/* Enqueues the face kernel between `count` fields' HALO columns from column `i0` of the
 * wavefield and the staging buffer `buf`. */
static void face(const domain *d, cl_mem buf, int first, int count, int i0, int to_buffer) {
    const int args[] = {first, count, i0, d->lnx, d->p->ny, d->p->nz, d->field, to_buffer};
    const size_t global = (size_t)count * d->p->nz * d->p->ny * HALO;
    CL_CHECK(clSetKernelArg(d->face, 0, sizeof(cl_mem), &d->wave));
    CL_CHECK(clSetKernelArg(d->face, 1, sizeof(cl_mem), &buf));
    for (int a = 0; a < 8; a++) CL_CHECK(clSetKernelArg(d->face, 2 + a, sizeof(int), &args[a]));
    CL_CHECK(clEnqueueNDRangeKernel(d->queue, d->face, 1, NULL, &global, NULL, 0, NULL, NULL));
}

static void exchange(const domain *d, staging *s, int first, int count, step_times *t) {
    const int n = count * d->p->nz * d->p->ny * HALO;
    const size_t bytes = (size_t)n * sizeof(float);
    MPI_Request req[4];
    MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: GCC takes MPICH's for an empty array */
    const double t0 = MPI_Wtime();
    if (d->west != MPI_PROC_NULL) face(d, s->send_west, first, count, HALO, 1);
    if (d->east != MPI_PROC_NULL) face(d, s->send_east, first, count, d->lnx, 1);
    CL_CHECK(clFinish(d->queue));
    const double t1 = MPI_Wtime();
    if (d->west != MPI_PROC_NULL)
        CL_CHECK(clEnqueueReadBuffer(d->queue, s->send_west, CL_FALSE, 0, bytes, s->host.send_west, 0, NULL, NULL));
    if (d->east != MPI_PROC_NULL)
        CL_CHECK(clEnqueueReadBuffer(d->queue, s->send_east, CL_FALSE, 0, bytes, s->host.send_east, 0, NULL, NULL));
    CL_CHECK(clFinish(d->queue));
    const double t2 = MPI_Wtime();
    MPI_Irecv(s->host.recv_west, n, MPI_FLOAT, d->west, TAG_EASTWARD, d->cart, &req[0]);
    MPI_Irecv(s->host.recv_east, n, MPI_FLOAT, d->east, TAG_WESTWARD, d->cart, &req[1]);
    MPI_Isend(s->host.send_east, n, MPI_FLOAT, d->east, TAG_EASTWARD, d->cart, &req[2]);
    MPI_Isend(s->host.send_west, n, MPI_FLOAT, d->west, TAG_WESTWARD, d->cart, &req[3]);
    MPI_Waitall(4, req, st);
    const double t3 = MPI_Wtime();
    if (d->west != MPI_PROC_NULL)
        CL_CHECK(clEnqueueWriteBuffer(d->queue, s->recv_west, CL_FALSE, 0, bytes, s->host.recv_west, 0, NULL, NULL));
    if (d->east != MPI_PROC_NULL)
        CL_CHECK(clEnqueueWriteBuffer(d->queue, s->recv_east, CL_FALSE, 0, bytes, s->host.recv_east, 0, NULL, NULL));
    CL_CHECK(clFinish(d->queue));
    const double t4 = MPI_Wtime();
    if (d->west != MPI_PROC_NULL) face(d, s->recv_west, first, count, 0, 0);
    if (d->east != MPI_PROC_NULL) face(d, s->recv_east, first, count, d->lnx + HALO, 0);
    CL_CHECK(clFinish(d->queue));
    const double t5 = MPI_Wtime();
    t->marshal += (t1 - t0) + (t5 - t4);
    t->copy += (t2 - t1) + (t4 - t3);
    t->comm += t3 - t2;
}
/* main loop: end */

static cl_mem staging_buffer(const domain *d, size_t bytes) {
    cl_int err;
    cl_mem m = clCreateBuffer(d->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    CL_CHECK(err);
    return m;
}

step_times run_mpi_gpu_adv(domain *d, int steps) {
    const size_t bytes = (size_t)STRESS_FIELDS * d->p->nz * d->p->ny * HALO * sizeof(float);
    staging s = {
        .send_west = staging_buffer(d, bytes),
        .recv_west = staging_buffer(d, bytes),
        .send_east = staging_buffer(d, bytes),
        .recv_east = staging_buffer(d, bytes),
        .host = host_buffers_alloc(d, 0),
    };
    step_times t = {0, 0, 0, 0};
    /* main loop: begin */
    for (int step = 0; step < steps; step++) {
        velocity_step(d, &t, NULL);
        exchange(d, &s, VX, VELOCITY_FIELDS, &t);
        stress_step(d, step, &t, NULL);
        exchange(d, &s, SXX, STRESS_FIELDS, &t);
        record_step(d, step, &t);
    }
    /* main loop: end */
    cl_mem mems[] = {s.send_west, s.recv_west, s.send_east, s.recv_east};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++) clReleaseMemObject(mems[i]);
    host_buffers_free(&s.host);
    return t;
}
