/* The mpi-gpu-adv variant on CUDA: marshaling on the device, as the tuned GPU port of
 * FDM-Seismology. For each exchange the face kernel (seis_kernels.cu) packs each outgoing
 * face of the phase's fields into a contiguous device staging buffer, only those buffers are
 * copied to the host with cudaMemcpy, MPI runs on host memory, the received faces are copied
 * into staging buffers and the kernel unpacks them into the halos. The copies run on the
 * legacy default stream, which the blocking application stream (device_cuda.c) orders
 * against the face kernels both ways. */
#include "seismology.h"
#include "seis_kernels.h"

typedef struct {
    float *send_west, *recv_west, *send_east, *recv_east; /* device staging, STRESS_FIELDS faces each */
    host_buffers host;                                    /* host staging, main.c's */
} staging;

/* main loop: begin */
/* Launches the face kernel between `count` fields' HALO columns from column `i0` of the
 * wavefield and the staging buffer `buf`. */
static void face(const domain *d, float *buf, int first, int count, int i0, int to_buffer) {
    CUDA_CHECK(
        seis_face_launch(d->wave, buf, first, count, i0, d->lnx, d->p->ny, d->p->nz, d->field, to_buffer, d->stream));
}

static void exchange(const domain *d, staging *s, int first, int count, step_times *t) {
    const int n = count * d->p->nz * d->p->ny * HALO;
    const size_t bytes = (size_t)n * sizeof(float);
    MPI_Request req[4];
    MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: GCC takes MPICH's for an empty array */
    const double t0 = MPI_Wtime();
    if (d->west != MPI_PROC_NULL) face(d, s->send_west, first, count, HALO, 1);
    if (d->east != MPI_PROC_NULL) face(d, s->send_east, first, count, d->lnx, 1);
    CUDA_CHECK(cudaStreamSynchronize(d->stream));
    const double t1 = MPI_Wtime();
    if (d->west != MPI_PROC_NULL)
        CUDA_CHECK(cudaMemcpy(s->host.send_west, s->send_west, bytes, cudaMemcpyDeviceToHost));
    if (d->east != MPI_PROC_NULL)
        CUDA_CHECK(cudaMemcpy(s->host.send_east, s->send_east, bytes, cudaMemcpyDeviceToHost));
    const double t2 = MPI_Wtime();
    MPI_Irecv(s->host.recv_west, n, MPI_FLOAT, d->west, TAG_EASTWARD, d->cart, &req[0]);
    MPI_Irecv(s->host.recv_east, n, MPI_FLOAT, d->east, TAG_WESTWARD, d->cart, &req[1]);
    MPI_Isend(s->host.send_east, n, MPI_FLOAT, d->east, TAG_EASTWARD, d->cart, &req[2]);
    MPI_Isend(s->host.send_west, n, MPI_FLOAT, d->west, TAG_WESTWARD, d->cart, &req[3]);
    MPI_Waitall(4, req, st);
    const double t3 = MPI_Wtime();
    /* From pageable memory these may return before their bytes land; the unpacking kernels
     * below wait for them all the same (the stream is a blocking one). */
    if (d->west != MPI_PROC_NULL)
        CUDA_CHECK(cudaMemcpy(s->recv_west, s->host.recv_west, bytes, cudaMemcpyHostToDevice));
    if (d->east != MPI_PROC_NULL)
        CUDA_CHECK(cudaMemcpy(s->recv_east, s->host.recv_east, bytes, cudaMemcpyHostToDevice));
    const double t4 = MPI_Wtime();
    if (d->west != MPI_PROC_NULL) face(d, s->recv_west, first, count, 0, 0);
    if (d->east != MPI_PROC_NULL) face(d, s->recv_east, first, count, d->lnx + HALO, 0);
    CUDA_CHECK(cudaStreamSynchronize(d->stream));
    const double t5 = MPI_Wtime();
    t->marshal += (t1 - t0) + (t5 - t4);
    t->copy += (t2 - t1) + (t4 - t3);
    t->comm += t3 - t2;
}
/* main loop: end */

static float *staging_buffer(size_t bytes) {
    float *m = NULL;
    CUDA_CHECK(cudaMalloc((void **)&m, bytes));
    return m;
}

step_times run_mpi_gpu_adv(domain *d, int steps) {
    const size_t bytes = (size_t)STRESS_FIELDS * d->p->nz * d->p->ny * HALO * sizeof(float);
    staging s = {
        .send_west = staging_buffer(bytes),
        .recv_west = staging_buffer(bytes),
        .send_east = staging_buffer(bytes),
        .recv_east = staging_buffer(bytes),
        .host = host_buffers_alloc(d, 0),
    };
    step_times t = {0, 0, 0, 0};
    /* main loop: begin */
    for (int step = 0; step < steps; step++) {
        velocity_step(d, &t);
        exchange(d, &s, VX, VELOCITY_FIELDS, &t);
        stress_step(d, step, &t);
        exchange(d, &s, SXX, STRESS_FIELDS, &t);
        record_step(d, step, &t);
    }
    /* main loop: end */
    float *mems[] = {s.send_west, s.recv_west, s.send_east, s.recv_east};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++) CUDA_CHECK(cudaFree(mems[i]));
    host_buffers_free(&s.host);
    return t;
}
