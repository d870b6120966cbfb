/* The def variant on CUDA: halos staged by hand, as SHOC's and MVAPICH2's CUDA Stencil2D do it
 * without a GPU-aware MPI. Each face is copied from device memory into a host array (columns
 * with cudaMemcpy2D, rows with cudaMemcpy), exchanged by MPI on host memory, and copied back
 * into the halo. The copies are the synchronous ones, on the legacy default stream; the
 * tile's stream is a blocking one (device_cuda.c), so they run after the kernel that wrote
 * the faces and before the next kernel reads the halo. */
#include "stencil2d.h"

/* main loop: begin */
/* Interior rows of column `col` between device memory and a packed host array. */
static void column_copy(const tile *t, float *buf, int col, float *host, int to_host) {
    const size_t pitch = (size_t)t->pitch * sizeof(float), h = (size_t)t->h;
    float *face = buf + t->pitch + col;
    if (to_host)
        CUDA_CHECK(cudaMemcpy2D(host, sizeof(float), face, pitch, sizeof(float), h, cudaMemcpyDeviceToHost));
    else
        CUDA_CHECK(cudaMemcpy2D(face, pitch, host, sizeof(float), sizeof(float), h, cudaMemcpyHostToDevice));
}

/* Padded row `row` (halo columns included) between device memory and a host array. */
static void row_copy(const tile *t, float *buf, int row, float *host, int to_host) {
    const size_t bytes = (size_t)t->pitch * sizeof(float);
    float *face = buf + (size_t)row * t->pitch;
    if (to_host)
        CUDA_CHECK(cudaMemcpy(host, face, bytes, cudaMemcpyDeviceToHost));
    else
        CUDA_CHECK(cudaMemcpy(face, host, bytes, cudaMemcpyHostToDevice));
}
/* main loop: end */

loop_times run_def(tile *t, int iters) {
    host_halos hh = host_halos_alloc(t);
    const int hn = t->h, pn = t->pitch;
    loop_times times = {0, 0};
    /* main loop: begin */
    for (int it = 0; it < iters; it++) {
        const double t0 = MPI_Wtime();
        MPI_Request req[4];
        MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: GCC takes MPICH's for an empty array */
        /* East and west first, interior rows only; north and south then carry whole padded
         * rows, whose ends are the corners that just arrived from east and west. */
        MPI_Irecv(hh.recv_west, hn, MPI_FLOAT, t->west, TAG_EASTWARD, t->cart, &req[0]);
        MPI_Irecv(hh.recv_east, hn, MPI_FLOAT, t->east, TAG_WESTWARD, t->cart, &req[1]);
        if (t->east != MPI_PROC_NULL) column_copy(t, t->cur, t->w, hh.send_east, 1);
        if (t->west != MPI_PROC_NULL) column_copy(t, t->cur, 1, hh.send_west, 1);
        MPI_Isend(hh.send_east, hn, MPI_FLOAT, t->east, TAG_EASTWARD, t->cart, &req[2]);
        MPI_Isend(hh.send_west, hn, MPI_FLOAT, t->west, TAG_WESTWARD, t->cart, &req[3]);
        MPI_Waitall(4, req, st);
        if (t->west != MPI_PROC_NULL) column_copy(t, t->cur, 0, hh.recv_west, 0);
        if (t->east != MPI_PROC_NULL) column_copy(t, t->cur, t->w + 1, hh.recv_east, 0);
        MPI_Irecv(hh.recv_north, pn, MPI_FLOAT, t->north, TAG_SOUTHWARD, t->cart, &req[0]);
        MPI_Irecv(hh.recv_south, pn, MPI_FLOAT, t->south, TAG_NORTHWARD, t->cart, &req[1]);
        /* The legacy default stream puts these reads after the column writes above: corners included. */
        if (t->south != MPI_PROC_NULL) row_copy(t, t->cur, t->h, hh.send_south, 1);
        if (t->north != MPI_PROC_NULL) row_copy(t, t->cur, 1, hh.send_north, 1);
        MPI_Isend(hh.send_south, pn, MPI_FLOAT, t->south, TAG_SOUTHWARD, t->cart, &req[2]);
        MPI_Isend(hh.send_north, pn, MPI_FLOAT, t->north, TAG_NORTHWARD, t->cart, &req[3]);
        MPI_Waitall(4, req, st);
        if (t->north != MPI_PROC_NULL) row_copy(t, t->cur, 0, hh.recv_north, 0);
        if (t->south != MPI_PROC_NULL) row_copy(t, t->cur, t->h + 1, hh.recv_south, 0);
        const double t1 = MPI_Wtime();
        stencil_step(t);
        times.comm += t1 - t0;
        times.compute += MPI_Wtime() - t1;
    }
    /* main loop: end */
    host_halos_free(&hh);
    return times;
}
