/* The hand-written CUDA kernels bench/datatype holds MPI-ACC's datatype engine to: what a
 * user packs with when the MPI library cannot, written plainly (bench/datatype_kernels.cu).
 * Each call enqueues on `stream` and returns the launch's error; it does not wait. */
#ifndef BENCH_DATATYPE_KERNELS_H_INCLUDED
#define BENCH_DATATYPE_KERNELS_H_INCLUDED

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Row r: len[r] doubles from from + from_off[r] to to + to_off[r] (offsets in doubles; the
 * three arrays in device memory). Packs a vector or an indexed type row by row, or unpacks
 * it with the offsets swapped. */
cudaError_t dtk_copy_rows(const double *from, double *to, long nrows, const long *from_off, const long *to_off,
                          const int *len, cudaStream_t stream);

/* out[c * n + r] = in[r * n + c] for an n x n matrix: the packed form of a transpose type
 * (and, applied to that, the matrix again). */
cudaError_t dtk_transpose(const double *in, double *out, long n, cudaStream_t stream);

/* A box of a 3D array of doubles, dimension 0 the slowest: the layout of an
 * MPI_Type_create_subarray of MPI_ORDER_C. */
typedef struct {
    long dims[3];
    int sub[3], start[3];
} DtkBox;

/* Packs the box of `array` into `packed` (to_packed != 0), or unpacks it back. */
cudaError_t dtk_copy_box(double *array, double *packed, DtkBox box, int to_packed, cudaStream_t stream);

/* p[i] = base + i, for i < n: a value no other element of any rank has (base tells ranks apart). */
cudaError_t dtk_fill(double *p, long n, double base, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
