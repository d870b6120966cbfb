/* The mpi-acc variant on CUDA: the device pointers go to MPI as they are. Rows are contiguous
 * runs and columns an MPI_Type_vector whose stride is the padded row; each type is tagged
 * once, at start-up, with the buffer kind and the application's stream, so that MPI-ACC
 * orders its copies after the kernel that wrote the face. A face's address is where it starts
 * in whichever buffer is current, so two types serve all eight faces of both buffers. The
 * main loop holds MPI calls and the kernel, and no cudaMemcpy. */
#include <mpiacc.h>

#include "stencil2d.h"

/* `base` in CUDA memory, ordered on the tile's stream. */
static MPI_Datatype on_stream(const tile *t, MPI_Datatype base) {
    MPI_Datatype d;
    MPI_Type_dup(base, &d);
    MPI_Type_set_attr(d, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    MPI_Type_set_attr(d, MPIX_ACC_STREAM, (void *)t->stream);
    MPI_Type_commit(&d);
    return d;
}

loop_times run_mpi_acc(tile *t, int iters) {
    MPI_Datatype vector, contiguous;
    MPI_Type_vector(t->h, 1, t->pitch, MPI_FLOAT, &vector);
    MPI_Type_contiguous(t->pitch, MPI_FLOAT, &contiguous);
    MPI_Datatype column = on_stream(t, vector), row = on_stream(t, contiguous);
    MPI_Type_free(&vector);
    MPI_Type_free(&contiguous);
    const size_t p = (size_t)t->pitch, h = (size_t)t->h, w = (size_t)t->w;
    loop_times times = {0, 0};
    /* main loop: begin */
    for (int it = 0; it < iters; it++) {
        const double t0 = MPI_Wtime();
        MPI_Request req[4];
        MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: GCC takes MPICH's for an empty array */
        float *g = t->cur;
        /* East and west first, interior rows only (from padded row 1); north and south then
         * carry whole padded rows, whose ends are the corners that just arrived. */
        MPI_Irecv(g + p, 1, column, t->west, TAG_EASTWARD, t->cart, &req[0]);
        MPI_Irecv(g + p + w + 1, 1, column, t->east, TAG_WESTWARD, t->cart, &req[1]);
        MPI_Isend(g + p + w, 1, column, t->east, TAG_EASTWARD, t->cart, &req[2]);
        MPI_Isend(g + p + 1, 1, column, t->west, TAG_WESTWARD, t->cart, &req[3]);
        MPI_Waitall(4, req, st);
        MPI_Irecv(g, 1, row, t->north, TAG_SOUTHWARD, t->cart, &req[0]);
        MPI_Irecv(g + (h + 1) * p, 1, row, t->south, TAG_NORTHWARD, t->cart, &req[1]);
        MPI_Isend(g + h * p, 1, row, t->south, TAG_SOUTHWARD, t->cart, &req[2]);
        MPI_Isend(g + p, 1, row, t->north, TAG_NORTHWARD, t->cart, &req[3]);
        MPI_Waitall(4, req, st);
        const double t1 = MPI_Wtime();
        stencil_step(t);
        times.comm += t1 - t0;
        times.compute += MPI_Wtime() - t1;
    }
    /* main loop: end */
    MPI_Type_free(&column);
    MPI_Type_free(&row);
    return times;
}
