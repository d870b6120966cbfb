/* The arithmetic of one cell of the 9-point stencil, written once for the three places that
 * run it: the OpenCL program gets it as text (STENCIL2D_CELL stringified, with GLOBAL_MEM =
 * __global and STENCIL2D_FN empty), the CUDA kernel as device code (STENCIL2D_FN __device__)
 * and the serial reference as C (STENCIL2D_FN static inline, GLOBAL_MEM empty). Each is built
 * without contraction (FP_CONTRACT OFF, nvcc -fmad=false, -ffp-contract=off), so all three
 * round the same operations in the same order, and --check can expect the same bits. `i` is
 * the padded index of the cell, `pitch` the padded row length. */
#ifndef STENCIL2D_CELL_H_INCLUDED
#define STENCIL2D_CELL_H_INCLUDED

#define STENCIL2D_STR(...) #__VA_ARGS__
#define STENCIL2D_XSTR(...) STENCIL2D_STR(__VA_ARGS__)

#define STENCIL2D_CELL                                                                                                \
    STENCIL2D_FN float stencil2d_cell(const GLOBAL_MEM float *in, long i, long pitch, float wc, float wn, float wd) { \
        const float card = (in[i - pitch] + in[i + pitch]) + (in[i - 1] + in[i + 1]);                                 \
        const float diag = (in[i - pitch - 1] + in[i - pitch + 1]) + (in[i + pitch - 1] + in[i + pitch + 1]);         \
        return wc * in[i] + wn * card + wd * diag;                                                                    \
    }

#endif
