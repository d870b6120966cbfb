/* Stencil2D's CUDA device layer: the device, the application's stream (every kernel, copy and
 * MPI-ACC datatype of the tile names it) and the two buffers; the kernel is stencil_kernel.cu. */
#include <mpiacc.h>

#include "stencil2d.h"
#include "stencil_kernel.h"

const char kProgram[] = "stencil2d_cuda", kDeviceKind[] = "CUDA";
const char kDeviceHelp[] = "  device: local rank modulo the node's CUDA device count\n";

static int device;

int device_find(int local_rank) { return app_cuda_device(local_rank, &device); }

void device_open(tile *t) {
    const size_t bytes = (size_t)(t->h + 2) * (size_t)t->pitch * sizeof(float);
    CUDA_CHECK(cudaSetDevice(device));
    /* A blocking stream: the def variant's cudaMemcpy calls run on the legacy default stream,
     * which orders them against this stream's kernels both ways. */
    CUDA_CHECK(cudaStreamCreate(&t->stream));
    CUDA_CHECK(cudaMalloc((void **)&t->cur, bytes));
    CUDA_CHECK(cudaMalloc((void **)&t->next, bytes));
}

void device_close(tile *t) {
    CUDA_CHECK(cudaFree(t->cur));
    CUDA_CHECK(cudaFree(t->next));
    CUDA_CHECK(cudaStreamDestroy(t->stream));
}

void stencil_step(tile *t) {
    CUDA_CHECK(stencil2d_launch(t->cur, t->next, t->h, t->w, t->pitch, kCenter, kCardinal, kDiagonal, t->stream));
    /* Waited for here so that the time splits into compute and communication. */
    CUDA_CHECK(cudaStreamSynchronize(t->stream));
    float *swap = t->cur;
    t->cur = t->next;
    t->next = swap;
}

void device_upload(tile *t, const float *host) {
    const size_t bytes = (size_t)(t->h + 2) * (size_t)t->pitch * sizeof(float);
    CUDA_CHECK(cudaMemcpyAsync(t->cur, host, bytes, cudaMemcpyHostToDevice, t->stream));
    CUDA_CHECK(cudaMemcpyAsync(t->next, host, bytes, cudaMemcpyHostToDevice, t->stream));
    /* The caller frees `host` next; MPI sees the buffers after this too. */
    CUDA_CHECK(cudaStreamSynchronize(t->stream));
}

void device_download_interior(const tile *t, float *interior) {
    const size_t pitch = (size_t)t->pitch * sizeof(float), row = (size_t)t->w * sizeof(float);
    CUDA_CHECK(cudaMemcpy2DAsync(interior, row, t->cur + t->pitch + 1, pitch, row, (size_t)t->h, cudaMemcpyDeviceToHost,
                                 t->stream));
    CUDA_CHECK(cudaStreamSynchronize(t->stream));
}
