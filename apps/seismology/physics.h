/* The arithmetic of one cell of the velocity-stress scheme, written once for the three places
 * that run it: the OpenCL program gets it as text (SEIS_PHYSICS stringified, with GLOBAL_MEM =
 * __global and SEIS_FN empty), the CUDA kernels as device code (seis_kernels.cu, SEIS_FN
 * __device__) and reference.c as C (GLOBAL_MEM empty, SEIS_FN static inline). Each is built
 * without contraction (FP_CONTRACT OFF, nvcc -fmad=false, -ffp-contract=off), so all three
 * round the same operations in the same order, and --check can expect the same bits.
 *
 * Staggering (Virieux): normal stresses at the cell (i, j, k); vx at i + 1/2, vy at j + 1/2,
 * vz at k + 1/2; sxy at (i + 1/2, j + 1/2), sxz at (i + 1/2, k + 1/2), syz at (j + 1/2,
 * k + 1/2), each stored at index (i, j, k). The nine fields lie one after another in one
 * array `w`, `field` floats apart, in the order of the first enum below. Derivatives are
 * 4th order, (9/8, -1/24) over two cells on each side; the per-layer coefficients `c` (six
 * floats, see the COEF_ enum) carry dt / h. `damp` is the sponge's factor at the cell. */
#ifndef SEISMOLOGY_PHYSICS_H_INCLUDED
#define SEISMOLOGY_PHYSICS_H_INCLUDED

/* The fields in the order they lie in `w`, and the sizes the kernels and the reference share. */
enum { VX, VY, VZ, SXX, SYY, SZZ, SXY, SXZ, SYZ, FIELDS };
enum { VELOCITY_FIELDS = 3, STRESS_FIELDS = 6, HALO = 2, RECEIVERS = 4 };
/* The six per-layer coefficients of the cell updates, each times dt / h: buoyancy at the cell and
 * at k + 1/2, lambda + 2 mu, lambda, mu at the cell and its harmonic mean at k + 1/2. */
enum { COEF_B, COEF_BZ, COEF_L2M, COEF_LAM, COEF_MU, COEF_MUZ, COEFS };

#define SEIS_STR(...) #__VA_ARGS__
#define SEIS_XSTR(...) SEIS_STR(__VA_ARGS__)

#define SEIS_PHYSICS                                                                                                   \
    SEIS_FN float seis_forward(const GLOBAL_MEM float *f, int n, int s) {                                              \
        return 1.125f * (f[n + s] - f[n]) - 0.0416666679f * (f[n + 2 * s] - f[n - s]);                                 \
    }                                                                                                                  \
    SEIS_FN float seis_backward(const GLOBAL_MEM float *f, int n, int s) {                                             \
        return 1.125f * (f[n] - f[n - s]) - 0.0416666679f * (f[n + s] - f[n - 2 * s]);                                 \
    }                                                                                                                  \
    SEIS_FN float seis_sponge(const GLOBAL_MEM float *dx, const GLOBAL_MEM float *dy, const GLOBAL_MEM float *dz,      \
                              int i, int j, int k) {                                                                   \
        return (dx[i] * dy[j]) * dz[k];                                                                                \
    }                                                                                                                  \
    SEIS_FN void seis_velocity(GLOBAL_MEM float *w, int field, int n, int sy, int sz, const GLOBAL_MEM float *c,       \
                               float damp) {                                                                           \
        GLOBAL_MEM float *vx = w, *vy = w + field, *vz = w + 2 * field;                                                \
        const GLOBAL_MEM float *sxx = w + 3 * field, *syy = w + 4 * field, *szz = w + 5 * field;                       \
        const GLOBAL_MEM float *sxy = w + 6 * field, *sxz = w + 7 * field, *syz = w + 8 * field;                       \
        vx[n] = (vx[n] + c[0] * ((seis_forward(sxx, n, 1) + seis_backward(sxy, n, sy)) + seis_backward(sxz, n, sz))) * \
                damp;                                                                                                  \
        vy[n] = (vy[n] + c[0] * ((seis_backward(sxy, n, 1) + seis_forward(syy, n, sy)) + seis_backward(syz, n, sz))) * \
                damp;                                                                                                  \
        vz[n] = (vz[n] + c[1] * ((seis_backward(sxz, n, 1) + seis_backward(syz, n, sy)) + seis_forward(szz, n, sz))) * \
                damp;                                                                                                  \
    }                                                                                                                  \
    SEIS_FN void seis_stress(GLOBAL_MEM float *w, int field, int n, int sy, int sz, const GLOBAL_MEM float *c,         \
                             float damp, float source) {                                                               \
        const GLOBAL_MEM float *vx = w, *vy = w + field, *vz = w + 2 * field;                                          \
        GLOBAL_MEM float *sxx = w + 3 * field, *syy = w + 4 * field, *szz = w + 5 * field;                             \
        GLOBAL_MEM float *sxy = w + 6 * field, *sxz = w + 7 * field, *syz = w + 8 * field;                             \
        const float exx = seis_backward(vx, n, 1), eyy = seis_backward(vy, n, sy), ezz = seis_backward(vz, n, sz);     \
        sxx[n] = ((sxx[n] + (c[2] * exx + c[3] * (eyy + ezz))) + source) * damp;                                       \
        syy[n] = ((syy[n] + (c[2] * eyy + c[3] * (exx + ezz))) + source) * damp;                                       \
        szz[n] = ((szz[n] + (c[2] * ezz + c[3] * (exx + eyy))) + source) * damp;                                       \
        sxy[n] = (sxy[n] + c[4] * (seis_forward(vx, n, sy) + seis_forward(vy, n, 1))) * damp;                          \
        sxz[n] = (sxz[n] + c[5] * (seis_forward(vx, n, sz) + seis_forward(vz, n, 1))) * damp;                          \
        syz[n] = (syz[n] + c[5] * (seis_forward(vy, n, sz) + seis_forward(vz, n, sy))) * damp;                         \
    }

#endif
