/* GPU-EpiSimdemics' CUDA device layer: the device, the application's stream, the day's
 * rows and location groups, and computeInteractions (grouping, the infection kernel, the
 * infected persons read back), which every GPU variant shares. The kernels are
 * episim_kernels.cu. */
#include "episim.h"
#include "episim_kernels.h"

static int device;

int device_find(int local_rank) { return app_cuda_device(local_rank, &device); }

static void *device_alloc(size_t bytes) {
    void *m = NULL;
    CUDA_CHECK(cudaMalloc(&m, bytes ? bytes : 1));
    return m;
}

void device_open(sim *s) {
    gpu_state *g = &s->gpu;
    CUDA_CHECK(cudaSetDevice(device));
    /* Non-blocking: the work of advanced and mpi-acc on it does not wait for whatever runs
     * on the legacy default stream (basic's copies). */
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    const size_t locs = ((size_t)s->nl + 1) * sizeof(unsigned);
    g->loc_count = device_alloc(locs);
    g->loc_start = device_alloc(locs);
    g->loc_fill = device_alloc(locs);
    /* Room for every visit of a day: how many land here is known only once the last
     * fragment is in, and the rows are written as the fragments arrive. */
    g->capacity = s->persons * EPI_VISITS;
    g->visits = device_alloc((size_t)g->capacity * sizeof(visit_msg));
    g->rows = device_alloc((size_t)g->capacity * sizeof(visit_row));
    g->sorted = device_alloc((size_t)g->capacity * sizeof(visit_row));
    g->infected = device_alloc(((size_t)g->capacity + 1) * sizeof(unsigned));
}

void device_close(sim *s) {
    gpu_state *g = &s->gpu;
    CUDA_CHECK(cudaDeviceSynchronize());
    void *all[] = {g->visits, g->rows, g->sorted, g->infected, g->loc_count, g->loc_start, g->loc_fill};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CUDA_CHECK(cudaFree(all[i]));
    CUDA_CHECK(cudaStreamDestroy(g->stream));
}

void device_begin_day(sim *s, cudaStream_t stream) {
    gpu_state *g = &s->gpu;
    const size_t locs = ((size_t)s->nl + 1) * sizeof(unsigned);
    CUDA_CHECK(cudaMemsetAsync(g->loc_count, 0, locs, stream));
    CUDA_CHECK(cudaMemsetAsync(g->loc_fill, 0, locs, stream));
    CUDA_CHECK(cudaMemsetAsync(g->infected + g->capacity, 0, sizeof(unsigned), stream));
}

void device_unpack(sim *s, const visit_msg *msgs, int n, int base, cudaStream_t stream) {
    CUDA_CHECK(epi_unpack_launch(msgs, n, base, (unsigned)s->l0, s->gpu.rows, s->gpu.loc_count, stream));
}

int device_interactions(sim *s, int day, cudaStream_t stream, unsigned *ids) {
    gpu_state *g = &s->gpu;
    const int n = s->received;
    unsigned found = 0;
    CUDA_CHECK(epi_scan_launch(g->loc_count, g->loc_start, s->nl, stream));
    CUDA_CHECK(epi_scatter_launch(g->rows, n, (unsigned)s->l0, g->loc_start, g->loc_fill, g->sorted, stream));
    CUDA_CHECK(epi_interact_launch(g->sorted, n, (unsigned)s->l0, g->loc_start, g->loc_count, day, s->seed, g->infected,
                                   g->infected + g->capacity, stream));
    CUDA_CHECK(cudaMemcpyAsync(&found, g->infected + g->capacity, sizeof found, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (found) CUDA_CHECK(cudaMemcpyAsync(ids, g->infected, found * sizeof(unsigned), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return (int)found;
}
