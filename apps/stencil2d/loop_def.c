/* The def variant: halos staged by hand, as an OpenCL program without a GPU-aware MPI does it.
 * Each face is read from the cl_mem into a host array (columns with clEnqueueReadBufferRect,
 * rows with clEnqueueReadBuffer), exchanged by MPI on host memory, and written back into the
 * halo. */
#include "stencil2d.h"

/* main loop: begin */
/* Interior rows of column `col` between the cl_mem and a packed host array; the copy is left
 * on the queue, so the caller waits for it before the array is used. */
static void column_copy(const tile *t, cl_mem buf, int col, float *host, int to_host) {
    const size_t origin[3] = {(size_t)col * sizeof(float), 1, 0}, host_origin[3] = {0, 0, 0};
    const size_t region[3] = {sizeof(float), (size_t)t->h, 1}, pitch = (size_t)t->pitch * sizeof(float);
    if (to_host)
        CL_CHECK(clEnqueueReadBufferRect(t->queue, buf, CL_FALSE, origin, host_origin, region, pitch, 0, 0, 0, host, 0,
                                         NULL, NULL));
    else
        CL_CHECK(clEnqueueWriteBufferRect(t->queue, buf, CL_FALSE, origin, host_origin, region, pitch, 0, 0, 0, host, 0,
                                          NULL, NULL));
}

/* Padded row `row` (halo columns included) between the cl_mem and a host array. */
static void row_copy(const tile *t, cl_mem buf, int row, float *host, int to_host) {
    const size_t offset = (size_t)row * t->pitch * sizeof(float), bytes = (size_t)t->pitch * sizeof(float);
    if (to_host)
        CL_CHECK(clEnqueueReadBuffer(t->queue, buf, CL_FALSE, offset, bytes, host, 0, NULL, NULL));
    else
        CL_CHECK(clEnqueueWriteBuffer(t->queue, buf, CL_FALSE, offset, bytes, host, 0, NULL, NULL));
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
        CL_CHECK(clFinish(t->queue));
        MPI_Isend(hh.send_east, hn, MPI_FLOAT, t->east, TAG_EASTWARD, t->cart, &req[2]);
        MPI_Isend(hh.send_west, hn, MPI_FLOAT, t->west, TAG_WESTWARD, t->cart, &req[3]);
        MPI_Waitall(4, req, st);
        if (t->west != MPI_PROC_NULL) column_copy(t, t->cur, 0, hh.recv_west, 0);
        if (t->east != MPI_PROC_NULL) column_copy(t, t->cur, t->w + 1, hh.recv_east, 0);
        MPI_Irecv(hh.recv_north, pn, MPI_FLOAT, t->north, TAG_SOUTHWARD, t->cart, &req[0]);
        MPI_Irecv(hh.recv_south, pn, MPI_FLOAT, t->south, TAG_NORTHWARD, t->cart, &req[1]);
        /* The in-order queue puts these reads after the column writes above: corners included. */
        if (t->south != MPI_PROC_NULL) row_copy(t, t->cur, t->h, hh.send_south, 1);
        if (t->north != MPI_PROC_NULL) row_copy(t, t->cur, 1, hh.send_north, 1);
        CL_CHECK(clFinish(t->queue));
        MPI_Isend(hh.send_south, pn, MPI_FLOAT, t->south, TAG_SOUTHWARD, t->cart, &req[2]);
        MPI_Isend(hh.send_north, pn, MPI_FLOAT, t->north, TAG_NORTHWARD, t->cart, &req[3]);
        MPI_Waitall(4, req, st);
        if (t->north != MPI_PROC_NULL) row_copy(t, t->cur, 0, hh.recv_north, 0);
        if (t->south != MPI_PROC_NULL) row_copy(t, t->cur, t->h + 1, hh.recv_south, 0);
        CL_CHECK(clFinish(t->queue)); /* the writes read the host arrays: done before they are reused */
        const double t1 = MPI_Wtime();
        stencil_step(t);
        times.comm += t1 - t0;
        times.compute += MPI_Wtime() - t1;
    }
    /* main loop: end */
    host_halos_free(&hh);
    return times;
}
