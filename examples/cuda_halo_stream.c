/* A stream-ordered halo exchange on CUDA device arrays, on a 1D ring of ranks.
 *
 * Each rank owns N interior doubles in device memory, with one halo cell at each end:
 *   [ halo_left | interior 0 .. N-1 | halo_right ]
 * Every step it rewrites its interior on its own CUDA stream (cudaMemsetAsync: every byte
 * of it becomes this rank's and this step's mark), and sends its first and last interior cells to
 * its left and right neighbours with MPI_Isend, receiving theirs into its halos with
 * MPI_Irecv. The datatypes carry MPIX_ACC_STREAM: MPI-ACC orders the sends after the work
 * queued on that stream, so there is no cudaStreamSynchronize before the MPI calls. The
 * program checks every halo against what the neighbour wrote and prints
 *   cuda_halo_stream: 4 ranks, 10 steps OK
 *
 *   mpiexec -n 4 ./examples/cuda_halo_stream
 *
 * Without a usable CUDA device (MPIX_Query_cuda_support() == 0 on any rank) it says so
 * and exits with 77, the "skipped" status of automake's test harness.
 */
#include <cuda_runtime_api.h>
#include <mpiacc.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 1 << 16, STEPS = 10, TO_LEFT = 1, TO_RIGHT = 2 };

/* The byte `rank` writes over its interior at `step`: each names its origin. */
static unsigned char mark(int rank, int step) { return (unsigned char)(rank * 31 + step * 7 + 1); }

#define CUDA_OK(call)                                                                     \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "cuda_halo_stream: %s: %s\n", #call, cudaGetErrorString(e_)); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

int main(int argc, char **argv) {
    int rank, size, usable, all_usable;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    usable = MPIX_Query_cuda_support();
    MPI_Allreduce(&usable, &all_usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_usable) {
        if (rank == 0) printf("cuda_halo_stream: no usable CUDA device on some rank; nothing to show\n");
        MPI_Finalize();
        return 77;
    }
    int ndev = 1;
    CUDA_OK(cudaGetDeviceCount(&ndev));
    CUDA_OK(cudaSetDevice(rank % ndev));

    const int left = (rank + size - 1) % size, right = (rank + 1) % size;
    double *field; /* N + 2 cells of device memory */
    cudaStream_t stream;
    CUDA_OK(cudaMalloc((void **)&field, (N + 2) * sizeof(double)));
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    /* All work on the field goes on `stream`, which the datatype names below: a plain
     * cudaMemset would go on the default stream, which a non-blocking stream does not
     * wait for. */
    CUDA_OK(cudaMemsetAsync(field, 0, (N + 2) * sizeof(double), stream));

    /* One datatype for all four calls: a double in CUDA memory, ordered on `stream`. */
    MPI_Datatype cell;
    MPI_Type_dup(MPI_DOUBLE, &cell);
    MPI_Type_set_attr(cell, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    MPI_Type_set_attr(cell, MPIX_ACC_STREAM, (void *)stream);

    int ok = 1;
    for (int step = 0; step < STEPS; step++) { /* every step on every rank: its peers wait for it */
        /* This step's work, queued on the stream and not waited for. */
        CUDA_OK(cudaMemsetAsync(field + 1, mark(rank, step), N * sizeof(double), stream));

        MPI_Request reqs[4];
        MPI_Irecv(field, 1, cell, left, TO_RIGHT, MPI_COMM_WORLD, &reqs[0]);
        MPI_Irecv(field + N + 1, 1, cell, right, TO_LEFT, MPI_COMM_WORLD, &reqs[1]);
        MPI_Isend(field + 1, 1, cell, left, TO_LEFT, MPI_COMM_WORLD, &reqs[2]);
        MPI_Isend(field + N, 1, cell, right, TO_RIGHT, MPI_COMM_WORLD, &reqs[3]);
        MPI_Status statuses[4];
        MPI_Waitall(4, reqs, statuses);

        /* The halos hold the neighbours' boundary cells of this very step (read on the
         * stream too: the receives are complete, and the stream orders the read). */
        unsigned char halo[2][sizeof(double)];
        CUDA_OK(cudaMemcpyAsync(halo[0], field, sizeof(double), cudaMemcpyDeviceToHost, stream));
        CUDA_OK(cudaMemcpyAsync(halo[1], field + N + 1, sizeof(double), cudaMemcpyDeviceToHost, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        const unsigned char want[2] = {mark(left, step), mark(right, step)};
        for (int h = 0; h < 2; h++) {
            for (size_t b = 0; b < sizeof(double); b++) {
                if (halo[h][b] != want[h]) {
                    fprintf(stderr, "cuda_halo_stream: rank %d step %d: %s halo byte %zu is %d, expected %d\n", rank,
                            step, h ? "right" : "left", b, halo[h][b], want[h]);
                    ok = 0;
                    break;
                }
            }
        }
    }

    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) printf("cuda_halo_stream: %d ranks, %d steps %s\n", size, STEPS, all_ok ? "OK" : "FAILED");
    MPI_Type_free(&cell);
    CUDA_OK(cudaStreamDestroy(stream));
    CUDA_OK(cudaFree(field));
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
