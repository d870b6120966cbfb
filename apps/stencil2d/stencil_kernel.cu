// Stencil2D's CUDA kernel: a thread per interior cell, stencil_cell.h's arithmetic. Built
// with -fmad=false (Makefile.am), so that it rounds as the reference does.
#include "stencil_kernel.h"

#define GLOBAL_MEM
#define STENCIL2D_FN static __device__ __forceinline__
#include "stencil_cell.h"

STENCIL2D_CELL

namespace {

// A warp along a row: the loads of a row of cells are consecutive floats.
constexpr int kBlockX = 32, kBlockY = 8;

__global__ void stencil_kernel(const float *__restrict__ in, float *__restrict__ out, int h, int w, int pitch, float wc,
                               float wn, float wd) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    const long i = static_cast<long>(y + 1) * pitch + x + 1;
    out[i] = stencil2d_cell(in, i, pitch, wc, wn, wd);
}

}  // namespace

extern "C" cudaError_t stencil2d_launch(const float *in, float *out, int h, int w, int pitch, float wc, float wn,
                                        float wd, cudaStream_t stream) {
    const dim3 block(kBlockX, kBlockY), grid((w + kBlockX - 1) / kBlockX, (h + kBlockY - 1) / kBlockY);
    stencil_kernel<<<grid, block, 0, stream>>>(in, out, h, w, pitch, wc, wn, wd);
    return cudaGetLastError();
}
