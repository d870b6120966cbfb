/* The layered model, the source, the sponge and the receivers (make_problem), and the serial
 * reference of the whole grid that --check compares with (reference). The reference runs
 * physics.h's cell updates as C, built with -ffp-contract=off as the kernels run them with
 * FP_CONTRACT OFF. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "seismology.h"

#define GLOBAL_MEM
#define SEIS_FN static inline
SEIS_PHYSICS

/* Three horizontal layers, top to bottom, each a third of the depth. */
static const double kVp[3] = {2000, 3000, 4000}, kVs[3] = {1000, 1700, 2300}, kRho[3] = {2000, 2300, 2600};
static const double kSpacing = 10;   /* metres between cells */
static const double kCourant = 0.4;  /* dt = 0.4 h / vp_max; the 4th-order 3D limit is about 0.49 */
static const double kSourcePa = 1e5; /* peak stress increment of the source per step */
/* Sponge (Cerjan et al. 1985): a cell at distance d < width from an edge is multiplied each
 * half step by exp(-(kSpongeStrength * (width - d) / width)^2); width = min(10, n / 4). */
static const double kSpongeStrength = 0.3;

static int layer(int k, int nz) { return k * 3 / nz; }

static void fill_coefficients(problem *p) {
    const double s = p->dt / p->h;
    for (int k = 0; k < p->nz; k++) {
        const int a = layer(k, p->nz), b = layer(k + 1 < p->nz ? k + 1 : k, p->nz);
        const double mu_a = kRho[a] * kVs[a] * kVs[a], mu_b = kRho[b] * kVs[b] * kVs[b];
        const double lam = kRho[a] * kVp[a] * kVp[a] - 2 * mu_a;
        float *c = p->coef + (size_t)k * COEFS;
        c[COEF_B] = (float)(s / kRho[a]);
        c[COEF_BZ] = (float)(s * 2 / (kRho[a] + kRho[b])); /* vz sits between layers k and k + 1 */
        c[COEF_L2M] = (float)(s * (lam + 2 * mu_a));
        c[COEF_LAM] = (float)(s * lam);
        c[COEF_MU] = (float)(s * mu_a);
        c[COEF_MUZ] = (float)(s * 2 * mu_a * mu_b / (mu_a + mu_b));
    }
}

static float *sponge_profile(int n) {
    float *f = malloc((size_t)n * sizeof(float));
    const int width = n / 4 < 10 ? n / 4 : 10;
    for (int i = 0; i < n; i++) {
        const int d = i < n - 1 - i ? i : n - 1 - i;
        const double x = d < width ? kSpongeStrength * (width - d) / width : 0;
        f[i] = (float)exp(-x * x);
    }
    return f;
}

int make_problem(problem *p) {
    if (p->nx < 4 || p->ny < 4 || p->nz < 6) return 0;
    p->h = kSpacing;
    p->dt = kCourant * kSpacing / kVp[2];
    p->slots = p->steps / p->every;
    p->source[0] = p->nx / 2, p->source[1] = p->ny / 2, p->source[2] = p->nz / 4;
    for (int r = 0; r < RECEIVERS; r++) p->receiver_x[r] = p->nx * (r + 1) / (RECEIVERS + 1);
    p->receiver_y = p->ny / 2, p->receiver_z = p->nz / 2;
    p->coef = malloc((size_t)p->nz * COEFS * sizeof(float));
    fill_coefficients(p);
    const int n[3] = {p->nx, p->ny, p->nz};
    for (int a = 0; a < 3; a++) p->sponge[a] = sponge_profile(n[a]);
    /* A Ricker wavelet whose peak frequency keeps 10 cells to the shortest S wavelength. */
    const double f0 = kVs[0] / (10 * kSpacing), t0 = 1.2 / f0, pi = 3.14159265358979323846;
    p->wavelet = malloc((size_t)p->steps * sizeof(float));
    for (int s = 0; s < p->steps; s++) {
        const double a = pi * f0 * ((s + 0.5) * p->dt - t0);
        p->wavelet[s] = (float)(kSourcePa * (1 - 2 * a * a) * exp(-a * a));
    }
    return 1;
}

void free_problem(problem *p) {
    free(p->coef);
    for (int a = 0; a < 3; a++) free(p->sponge[a]);
    free(p->wavelet);
}

void reference(const problem *p, float *fields, float *traces) {
    const int nxp = p->nx + 2 * HALO, nyp = p->ny + 2 * HALO, nzp = p->nz + 2 * HALO;
    const int field = nxp * nyp * nzp, sy = nxp, sz = nxp * nyp;
    float *w = calloc((size_t)FIELDS * field, sizeof(float));
    const float *dx = p->sponge[0], *dy = p->sponge[1], *dz = p->sponge[2];
    const int source = (p->source[2] + HALO) * sz + (p->source[1] + HALO) * sy + p->source[0] + HALO;
    for (int step = 0; step < p->steps; step++) {
        for (int k = 0; k < p->nz; k++)
            for (int j = 0; j < p->ny; j++)
                for (int i = 0; i < p->nx; i++)
                    seis_velocity(w, field, (k + HALO) * sz + (j + HALO) * sy + i + HALO, sy, sz,
                                  p->coef + (size_t)k * COEFS, seis_sponge(dx, dy, dz, i, j, k));
        for (int k = 0; k < p->nz; k++) {
            for (int j = 0; j < p->ny; j++) {
                for (int i = 0; i < p->nx; i++) {
                    const int n = (k + HALO) * sz + (j + HALO) * sy + i + HALO;
                    seis_stress(w, field, n, sy, sz, p->coef + (size_t)k * COEFS, seis_sponge(dx, dy, dz, i, j, k),
                                n == source ? p->wavelet[step] : 0.0f);
                }
            }
        }
        if ((step + 1) % p->every == 0) {
            const int slot = (step + 1) / p->every - 1;
            for (int r = 0; r < RECEIVERS; r++)
                traces[slot * RECEIVERS + r] =
                    w[VZ * field + (p->receiver_z + HALO) * sz + (p->receiver_y + HALO) * sy + p->receiver_x[r] + HALO];
        }
    }
    for (int f = 0; f < FIELDS; f++)
        for (int k = 0; k < p->nz; k++)
            for (int j = 0; j < p->ny; j++)
                memcpy(fields + (((size_t)f * p->nz + k) * p->ny + j) * p->nx,
                       w + (size_t)f * field + (k + HALO) * sz + (j + HALO) * sy + HALO, (size_t)p->nx * sizeof(float));
    free(w);
}
