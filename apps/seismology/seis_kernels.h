/* FDM-Seismology's CUDA kernels (seis_kernels.cu), callable from C. Each enqueues its kernel
 * on `stream`, returns the launch's error and does not wait. `w` is the slab's wavefield
 * (FIELDS fields of `field` floats, lnx x ny x nz interior cells each, seismology.h). */
#ifndef SEISMOLOGY_SEIS_KERNELS_H_INCLUDED
#define SEISMOLOGY_SEIS_KERNELS_H_INCLUDED

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The velocities of every interior cell; `coef` COEFS floats a layer, `damp` the slab's
 * sponge factors (lnx, then ny, then nz floats). */
cudaError_t seis_velocity_launch(float *w, const float *coef, const float *damp, int lnx, int ny, int nz, int field,
                                 cudaStream_t stream);
/* The stresses of every interior cell, `amplitude` added to the normal stresses at field
 * index `source` (-1: not in this slab). */
cudaError_t seis_stress_launch(float *w, const float *coef, const float *damp, int lnx, int ny, int nz, int field,
                               int source, float amplitude, cudaStream_t stream);
/* traces[slot * RECEIVERS + r] = w[where[r]] for each receiver r with where[r] >= 0. */
cudaError_t seis_record_launch(const float *w, float *traces, const int *where, int slot, cudaStream_t stream);
/* Between `count` fields' HALO columns from column `i0` (interior rows only) and the
 * contiguous `buf`, x fastest, then y, z and field: mpi-gpu-adv's marshaling. */
cudaError_t seis_face_launch(float *w, float *buf, int first, int count, int i0, int lnx, int ny, int nz, int field,
                             int to_buffer, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
