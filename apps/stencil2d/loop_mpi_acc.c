/* The mpi-acc variant: the cl_mem goes to MPI as it is. Each face is a datatype tagged once,
 * at start-up, with the buffer kind, the application's queue (so MPI-ACC orders its copies
 * after the kernel that wrote the face) and the byte offset where the face starts; rows are
 * contiguous runs, columns an MPI_Type_vector whose stride is the padded row. The main loop
 * holds MPI calls and the kernel, and no clEnqueueRead or clEnqueueWrite. */
#include "stencil2d.h"

#include <mpiacc.h>

typedef struct {
    MPI_Datatype send_west, recv_west, send_east, recv_east;
    MPI_Datatype send_north, recv_north, send_south, recv_south;
} halo_types;

/* `base` at tile cell (row, col) of whichever cl_mem the call names: the offset is relative to
 * the buffer, so one set of types serves both buffers of the double buffering. */
static MPI_Datatype face(const tile *t, MPI_Datatype base, int row, int col) {
    MPI_Datatype d;
    MPI_Type_dup(base, &d);
    MPI_Type_set_attr(d, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_OPENCL);
    MPI_Type_set_attr(d, MPIX_ACC_COMMAND_QUEUE, (void *)t->queue);
    MPI_Type_set_attr(d, MPIX_ACC_OFFSET, (void *)(long)(((long)row * t->pitch + col) * (long)sizeof(float)));
    MPI_Type_commit(&d);
    return d;
}

static halo_types make_halo_types(const tile *t) {
    MPI_Datatype column, row;
    MPI_Type_vector(t->h, 1, t->pitch, MPI_FLOAT, &column);
    MPI_Type_contiguous(t->pitch, MPI_FLOAT, &row);
    MPI_Type_commit(&column);
    MPI_Type_commit(&row);
    halo_types ht = {
        .send_west = face(t, column, 1, 1),
        .recv_west = face(t, column, 1, 0),
        .send_east = face(t, column, 1, t->w),
        .recv_east = face(t, column, 1, t->w + 1),
        .send_north = face(t, row, 1, 0),
        .recv_north = face(t, row, 0, 0),
        .send_south = face(t, row, t->h, 0),
        .recv_south = face(t, row, t->h + 1, 0),
    };
    MPI_Type_free(&column);
    MPI_Type_free(&row);
    return ht;
}

static void free_halo_types(halo_types *ht) {
    MPI_Datatype *all[] = {&ht->send_west,  &ht->recv_west,  &ht->send_east,  &ht->recv_east,
                           &ht->send_north, &ht->recv_north, &ht->send_south, &ht->recv_south};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) MPI_Type_free(all[i]);
}

loop_times run_mpi_acc(tile *t, int iters) {
    halo_types ht = make_halo_types(t);
    loop_times times = {0, 0};
    /* main loop: begin */
    for (int it = 0; it < iters; it++) {
        const double t0 = MPI_Wtime();
        MPI_Request req[4];
        MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: GCC takes MPICH's for an empty array */
        /* East and west first, interior rows only; north and south then carry whole padded
         * rows, whose ends are the corners that just arrived from east and west. */
        MPI_Irecv(t->cur, 1, ht.recv_west, t->west, TAG_EASTWARD, t->cart, &req[0]);
        MPI_Irecv(t->cur, 1, ht.recv_east, t->east, TAG_WESTWARD, t->cart, &req[1]);
        MPI_Isend(t->cur, 1, ht.send_east, t->east, TAG_EASTWARD, t->cart, &req[2]);
        MPI_Isend(t->cur, 1, ht.send_west, t->west, TAG_WESTWARD, t->cart, &req[3]);
        MPI_Waitall(4, req, st);
        MPI_Irecv(t->cur, 1, ht.recv_north, t->north, TAG_SOUTHWARD, t->cart, &req[0]);
        MPI_Irecv(t->cur, 1, ht.recv_south, t->south, TAG_NORTHWARD, t->cart, &req[1]);
        MPI_Isend(t->cur, 1, ht.send_south, t->south, TAG_SOUTHWARD, t->cart, &req[2]);
        MPI_Isend(t->cur, 1, ht.send_north, t->north, TAG_NORTHWARD, t->cart, &req[3]);
        MPI_Waitall(4, req, st);
        const double t1 = MPI_Wtime();
        stencil_step(t);
        times.comm += t1 - t0;
        times.compute += MPI_Wtime() - t1;
    }
    /* main loop: end */
    free_halo_types(&ht);
    return times;
}
