/* Stencil2D's CUDA kernel (stencil_kernel.cu), callable from C. */
#ifndef STENCIL2D_KERNEL_H_INCLUDED
#define STENCIL2D_KERNEL_H_INCLUDED

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues one step on `stream`: every interior cell of the padded tile `out` (h x w cells,
 * `pitch` floats a row) from its neighbourhood in `in`. Returns the launch's error and does
 * not wait. */
cudaError_t stencil2d_launch(const float *in, float *out, int h, int w, int pitch, float wc, float wn, float wd,
                             cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
