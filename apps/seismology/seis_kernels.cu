// FDM-Seismology's CUDA kernels: physics.h's cell updates as device code, one thread per
// interior cell (velocity, stress), per receiver (record) or per face element (face), as the
// OpenCL program in device_opencl.c has them. Built with -fmad=false (Makefile.am), so that
// they round as the reference and the OpenCL kernels do.
#include "seis_kernels.h"

#define GLOBAL_MEM
#define SEIS_FN static __device__ __forceinline__
#include "physics.h"

SEIS_PHYSICS

namespace {

// A warp along x, so that a row's loads are consecutive floats: the OpenCL form's work-group.
constexpr int kBlockX = 32, kBlockY = 4, kBlockZ = 2, kFaceBlock = 256;

// The padded index of interior cell (i, j, k) of a slab lnx cells wide; the strides go to *sy, *sz.
__device__ int cell_index(int i, int j, int k, int lnx, int ny, int *sy, int *sz) {
    *sy = lnx + 2 * HALO;
    *sz = *sy * (ny + 2 * HALO);
    return (k + HALO) * *sz + (j + HALO) * *sy + i + HALO;
}

__global__ void velocity_kernel(float *w, const float *coef, const float *damp, int lnx, int ny, int nz, int field) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
    const int k = blockIdx.z * blockDim.z + threadIdx.z;
    if (i >= lnx || j >= ny || k >= nz) return;
    int sy, sz;
    const int n = cell_index(i, j, k, lnx, ny, &sy, &sz);
    seis_velocity(w, field, n, sy, sz, coef + COEFS * k, seis_sponge(damp, damp + lnx, damp + lnx + ny, i, j, k));
}

__global__ void stress_kernel(float *w, const float *coef, const float *damp, int lnx, int ny, int nz, int field,
                              int source, float amplitude) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
    const int k = blockIdx.z * blockDim.z + threadIdx.z;
    if (i >= lnx || j >= ny || k >= nz) return;
    int sy, sz;
    const int n = cell_index(i, j, k, lnx, ny, &sy, &sz);
    seis_stress(w, field, n, sy, sz, coef + COEFS * k, seis_sponge(damp, damp + lnx, damp + lnx + ny, i, j, k),
                n == source ? amplitude : 0.0f);
}

__global__ void record_kernel(const float *w, float *traces, const int *where, int slot) {
    const int r = threadIdx.x;
    if (r < RECEIVERS && where[r] >= 0) traces[slot * RECEIVERS + r] = w[where[r]];
}

__global__ void face_kernel(float *w, float *buf, int first, int count, int i0, int lnx, int ny, int nz, int field,
                            int to_buffer) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= count * nz * ny * HALO) return;
    const int c = e % HALO, j = e / HALO % ny, k = e / (HALO * ny) % nz, f = e / (HALO * ny * nz);
    int sy, sz;
    const int n = (first + f) * field + cell_index(i0 - HALO + c, j, k, lnx, ny, &sy, &sz);
    if (to_buffer)
        buf[e] = w[n];
    else
        w[n] = buf[e];
}

dim3 cells_grid(int lnx, int ny, int nz) {
    return dim3((lnx + kBlockX - 1) / kBlockX, (ny + kBlockY - 1) / kBlockY, (nz + kBlockZ - 1) / kBlockZ);
}

}  // namespace

extern "C" cudaError_t seis_velocity_launch(float *w, const float *coef, const float *damp, int lnx, int ny, int nz,
                                            int field, cudaStream_t stream) {
    velocity_kernel<<<cells_grid(lnx, ny, nz), dim3(kBlockX, kBlockY, kBlockZ), 0, stream>>>(w, coef, damp, lnx, ny, nz,
                                                                                             field);
    return cudaGetLastError();
}

extern "C" cudaError_t seis_stress_launch(float *w, const float *coef, const float *damp, int lnx, int ny, int nz,
                                          int field, int source, float amplitude, cudaStream_t stream) {
    stress_kernel<<<cells_grid(lnx, ny, nz), dim3(kBlockX, kBlockY, kBlockZ), 0, stream>>>(w, coef, damp, lnx, ny, nz,
                                                                                           field, source, amplitude);
    return cudaGetLastError();
}

extern "C" cudaError_t seis_record_launch(const float *w, float *traces, const int *where, int slot,
                                          cudaStream_t stream) {
    record_kernel<<<1, RECEIVERS, 0, stream>>>(w, traces, where, slot);
    return cudaGetLastError();
}

extern "C" cudaError_t seis_face_launch(float *w, float *buf, int first, int count, int i0, int lnx, int ny, int nz,
                                        int field, int to_buffer, cudaStream_t stream) {
    const int elements = count * nz * ny * HALO;
    face_kernel<<<(elements + kFaceBlock - 1) / kFaceBlock, kFaceBlock, 0, stream>>>(w, buf, first, count, i0, lnx, ny,
                                                                                     nz, field, to_buffer);
    return cudaGetLastError();
}
