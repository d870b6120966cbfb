// The hand pack kernels of bench/datatype (datatype_kernels.h): each is the plain, good
// kernel for its one layout, with every warp reading and writing consecutive doubles
// wherever the layout has any.
#include "datatype_kernels.h"

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1 << 16;  // grid-stride loops cover the rest
constexpr int kTile = 32, kTileRows = 8;

int blocks_for(long items, int per_block) {
    const long b = (items + per_block - 1) / per_block;
    return b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : static_cast<int>(b));
}

// A block per row, its threads along the row.
__global__ void copy_rows_kernel(const double *__restrict__ from, double *__restrict__ to, long nrows,
                                 const long *__restrict__ from_off, const long *__restrict__ to_off,
                                 const int *__restrict__ len) {
    for (long r = blockIdx.x; r < nrows; r += gridDim.x) {
        const double *f = from + from_off[r];
        double *t = to + to_off[r];
        const int n = len[r];
        for (int i = threadIdx.x; i < n; i += blockDim.x) t[i] = f[i];
    }
}

// A 32 x 32 tile goes through shared memory, so that reads of `in` and writes of `out` are
// both along rows; the extra column keeps the tile's column reads free of bank conflicts.
__global__ void transpose_kernel(const double *__restrict__ in, double *__restrict__ out, long n) {
    __shared__ double tile[kTile][kTile + 1];
    const long in_col = static_cast<long>(blockIdx.x) * kTile + threadIdx.x;
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
        const long in_row = static_cast<long>(blockIdx.y) * kTile + j;
        if (in_row < n && in_col < n) tile[j][threadIdx.x] = in[in_row * n + in_col];
    }
    __syncthreads();
    const long out_col = static_cast<long>(blockIdx.y) * kTile + threadIdx.x;
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
        const long out_row = static_cast<long>(blockIdx.x) * kTile + j;
        if (out_row < n && out_col < n) out[out_row * n + out_col] = tile[threadIdx.x][j];
    }
}

// A thread per element of the box; neighbouring threads take neighbouring elements of the
// fastest dimension (one element per row on a face across it, which no kernel coalesces).
__global__ void copy_box_kernel(double *__restrict__ array, double *__restrict__ packed, DtkBox box, int to_packed) {
    const unsigned s1 = box.sub[1], s2 = box.sub[2];
    const unsigned total = static_cast<unsigned>(box.sub[0]) * s1 * s2;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const unsigned c = i % s2, t = i / s2, b = t % s1, a = t / s1;
        const long at = ((box.start[0] + a) * box.dims[1] + box.start[1] + b) * box.dims[2] + box.start[2] + c;
        if (to_packed)
            packed[i] = array[at];
        else
            array[at] = packed[i];
    }
}

__global__ void fill_kernel(double *p, long n, double base) {
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long>(gridDim.x) * blockDim.x)
        p[i] = base + static_cast<double>(i);
}

}  // namespace

extern "C" {

cudaError_t dtk_copy_rows(const double *from, double *to, long nrows, const long *from_off, const long *to_off,
                          const int *len, cudaStream_t stream) {
    if (nrows <= 0) return cudaSuccess;
    copy_rows_kernel<<<blocks_for(nrows, 1), kThreads, 0, stream>>>(from, to, nrows, from_off, to_off, len);
    return cudaGetLastError();
}

cudaError_t dtk_transpose(const double *in, double *out, long n, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    const unsigned tiles = static_cast<unsigned>((n + kTile - 1) / kTile);
    transpose_kernel<<<dim3(tiles, tiles), dim3(kTile, kTileRows), 0, stream>>>(in, out, n);
    return cudaGetLastError();
}

cudaError_t dtk_copy_box(double *array, double *packed, DtkBox box, int to_packed, cudaStream_t stream) {
    const long total = static_cast<long>(box.sub[0]) * box.sub[1] * box.sub[2];
    if (total <= 0) return cudaSuccess;
    if (total > 0xffffffffL) return cudaErrorInvalidValue;  // the kernel counts elements in 32 bits
    copy_box_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(array, packed, box, to_packed);
    return cudaGetLastError();
}

cudaError_t dtk_fill(double *p, long n, double base, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    fill_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(p, n, base);
    return cudaGetLastError();
}

}  // extern "C"
