/* GPU-EpiSimdemics' CUDA kernels (episim_kernels.cu), callable from C. Each enqueues its
 * kernel on `stream` (0: the legacy default stream), returns the launch's error and does
 * not wait. Locations are global indices; `l0` is the rank's first. */
#ifndef EPISIM_KERNELS_H_INCLUDED
#define EPISIM_KERNELS_H_INCLUDED

#include <cuda_runtime_api.h>

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rows[base + i] = the person-timeline row of msgs[i], i < n, and one more visit counted
 * for its location in loc_count. */
cudaError_t epi_unpack_launch(const visit_msg *msgs, int n, int base, unsigned l0, visit_row *rows, unsigned *loc_count,
                              cudaStream_t stream);
/* loc_start = the exclusive prefix sum of loc_count's nl values. */
cudaError_t epi_scan_launch(const unsigned *loc_count, unsigned *loc_start, int nl, cudaStream_t stream);
/* Rows grouped by location into `sorted` (in any order within a location); loc_fill starts at 0. */
cudaError_t epi_scatter_launch(const visit_row *rows, int n, unsigned l0, const unsigned *loc_start, unsigned *loc_fill,
                               visit_row *sorted, cudaStream_t stream);
/* computeInteractions: each infected susceptible visit appends its person to `out`, whose
 * length is *out_count (which starts at 0). */
cudaError_t epi_interact_launch(const visit_row *sorted, int n, unsigned l0, const unsigned *loc_start,
                                const unsigned *loc_count, int day, uint64_t seed, unsigned *out, unsigned *out_count,
                                cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
