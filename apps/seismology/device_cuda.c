/* FDM-Seismology's CUDA device layer: the device, the application's stream (every kernel and
 * MPI-ACC datatype of the slab names it), the slab's buffers and the compute steps every
 * variant shares; the kernels are seis_kernels.cu. */
#include "seismology.h"

#include <mpiacc.h>

#include "seis_kernels.h"

const char kProgram[] = "seismology_cuda", kDeviceKind[] = "CUDA";
const char kDeviceHelp[] = "  device: local rank modulo the node's CUDA device count\n";

static int device;

int device_find(int local_rank) { return app_cuda_device(local_rank, &device); }

static size_t trace_bytes(const domain *d) {
    return (size_t)(d->p->slots ? d->p->slots : 1) * RECEIVERS * sizeof(float);
}

/* `bytes` of device memory, with `host`'s bytes in it unless NULL. */
static void *device_buffer(size_t bytes, const void *host) {
    void *m = NULL;
    CUDA_CHECK(cudaMalloc(&m, bytes));
    if (host) CUDA_CHECK(cudaMemcpy(m, host, bytes, cudaMemcpyHostToDevice));
    return m;
}

void device_open(domain *d, const float *damp, const int *where) {
    const problem *p = d->p;
    CUDA_CHECK(cudaSetDevice(device));
    /* A blocking stream: the cudaMemcpy calls of mpi-gpu and mpi-gpu-adv run on the legacy
     * default stream, which orders them against this stream's kernels both ways. */
    CUDA_CHECK(cudaStreamCreate(&d->stream));
    d->wave = device_buffer((size_t)FIELDS * d->field * sizeof(float), NULL);
    d->coef = device_buffer((size_t)p->nz * COEFS * sizeof(float), p->coef);
    d->damp = device_buffer((size_t)(d->lnx + p->ny + p->nz) * sizeof(float), damp);
    d->receivers = device_buffer(RECEIVERS * sizeof(int), where);
    d->traces = device_buffer(trace_bytes(d), NULL);
}

void device_close(domain *d) {
    void *all[] = {d->wave, d->coef, d->damp, d->receivers, d->traces};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CUDA_CHECK(cudaFree(all[i]));
    CUDA_CHECK(cudaStreamDestroy(d->stream));
}

void device_zero(domain *d) {
    CUDA_CHECK(cudaMemsetAsync(d->wave, 0, (size_t)FIELDS * d->field * sizeof(float), d->stream));
    CUDA_CHECK(cudaMemsetAsync(d->traces, 0, trace_bytes(d), d->stream));
    CUDA_CHECK(cudaStreamSynchronize(d->stream));
}

void device_finish(domain *d) { CUDA_CHECK(cudaStreamSynchronize(d->stream)); }

void device_read(const domain *d, float *wave, float *traces) {
    const size_t samples = (size_t)d->p->slots * RECEIVERS;
    CUDA_CHECK(
        cudaMemcpyAsync(wave, d->wave, (size_t)FIELDS * d->field * sizeof(float), cudaMemcpyDeviceToHost, d->stream));
    if (samples)
        CUDA_CHECK(cudaMemcpyAsync(traces, d->traces, samples * sizeof(float), cudaMemcpyDeviceToHost, d->stream));
    CUDA_CHECK(cudaStreamSynchronize(d->stream));
}

/* Ends a compute step launched at t0: waits for its kernel (not under --async, where the
 * stream orders what follows) so that the time splits into compute and the rest. */
static void end_step(domain *d, double t0, step_times *t) {
    if (!d->async) CUDA_CHECK(cudaStreamSynchronize(d->stream));
    t->compute += MPI_Wtime() - t0;
}

void velocity_step(domain *d, step_times *t) {
    const double t0 = MPI_Wtime();
    CUDA_CHECK(seis_velocity_launch(d->wave, d->coef, d->damp, d->lnx, d->p->ny, d->p->nz, d->field, d->stream));
    end_step(d, t0, t);
}

void stress_step(domain *d, int step, step_times *t) {
    const double t0 = MPI_Wtime();
    CUDA_CHECK(seis_stress_launch(d->wave, d->coef, d->damp, d->lnx, d->p->ny, d->p->nz, d->field, d->source,
                                  d->p->wavelet[step], d->stream));
    end_step(d, t0, t);
}

void record_step(domain *d, int step, step_times *t) {
    const int slot = (step + 1) / d->p->every - 1;
    if ((step + 1) % d->p->every || slot >= d->p->slots) return;
    const double t0 = MPI_Wtime();
    CUDA_CHECK(seis_record_launch(d->wave, d->traces, d->receivers, slot, d->stream));
    end_step(d, t0, t);
}
