// GPU-EpiSimdemics' CUDA kernels: the unpack of visit messages into person-timeline rows,
// the grouping of rows by location (count, scan, scatter) and computeInteractions, one
// thread per susceptible visit, through model.h's integer-only functions.
#include "episim_kernels.h"

namespace {

constexpr int kBlock = 256, kScanBlock = 1024;

int blocks(int n) { return n > 0 ? (n + kBlock - 1) / kBlock : 1; }

__global__ void unpack_kernel(const visit_msg *msgs, int n, int base, unsigned l0, visit_row *rows,
                              unsigned *loc_count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const visit_row r = epi_row(msgs[i]);
    rows[base + i] = r;
    atomicAdd(&loc_count[r.location - l0], 1u);
}

// One block: each thread sums a contiguous run, the block scans the runs' sums, and each
// thread writes its run's prefixes. Once a day over the rank's locations, so one block is enough.
__global__ void scan_kernel(const unsigned *count, unsigned *start, int nl) {
    __shared__ unsigned sums[kScanBlock];
    const int per = (nl + kScanBlock - 1) / kScanBlock, lo = threadIdx.x * per;
    const int hi = lo + per < nl ? lo + per : nl;
    unsigned mine = 0;
    for (int l = lo; l < hi; l++) mine += count[l];
    sums[threadIdx.x] = mine;
    __syncthreads();
    for (int step = 1; step < kScanBlock; step *= 2) {
        const unsigned add = threadIdx.x >= step ? sums[threadIdx.x - step] : 0;
        __syncthreads();
        sums[threadIdx.x] += add;
        __syncthreads();
    }
    unsigned run = sums[threadIdx.x] - mine;
    for (int l = lo; l < hi; l++) {
        start[l] = run;
        run += count[l];
    }
}

__global__ void scatter_kernel(const visit_row *rows, int n, unsigned l0, const unsigned *loc_start, unsigned *loc_fill,
                               visit_row *sorted) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const visit_row r = rows[i];
    const unsigned l = r.location - l0;
    sorted[loc_start[l] + atomicAdd(&loc_fill[l], 1u)] = r;
}

__global__ void interact_kernel(const visit_row *sorted, int n, unsigned l0, const unsigned *loc_start,
                                const unsigned *loc_count, int day, uint64_t seed, unsigned *out, unsigned *out_count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const visit_row me = sorted[i];
    const unsigned l = me.location - l0;
    if (epi_infected(sorted + loc_start[l], (int)loc_count[l], me, day, seed))
        out[atomicAdd(out_count, 1u)] = me.person;
}

}  // namespace

extern "C" cudaError_t epi_unpack_launch(const visit_msg *msgs, int n, int base, unsigned l0, visit_row *rows,
                                         unsigned *loc_count, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    unpack_kernel<<<blocks(n), kBlock, 0, stream>>>(msgs, n, base, l0, rows, loc_count);
    return cudaGetLastError();
}

extern "C" cudaError_t epi_scan_launch(const unsigned *loc_count, unsigned *loc_start, int nl, cudaStream_t stream) {
    if (nl <= 0) return cudaSuccess;
    scan_kernel<<<1, kScanBlock, 0, stream>>>(loc_count, loc_start, nl);
    return cudaGetLastError();
}

extern "C" cudaError_t epi_scatter_launch(const visit_row *rows, int n, unsigned l0, const unsigned *loc_start,
                                          unsigned *loc_fill, visit_row *sorted, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    scatter_kernel<<<blocks(n), kBlock, 0, stream>>>(rows, n, l0, loc_start, loc_fill, sorted);
    return cudaGetLastError();
}

extern "C" cudaError_t epi_interact_launch(const visit_row *sorted, int n, unsigned l0, const unsigned *loc_start,
                                           const unsigned *loc_count, int day, uint64_t seed, unsigned *out,
                                           unsigned *out_count, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    interact_kernel<<<blocks(n), kBlock, 0, stream>>>(sorted, n, l0, loc_start, loc_count, day, seed, out, out_count);
    return cudaGetLastError();
}
