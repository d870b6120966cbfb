/* The CUDA runtime calls (and the PMPI ones) that libmpiacc makes on its device paths,
 * each timed by call_timer.h's WRAP: shared by the shims that trace them. Include after
 * call_timer.h, <cuda_runtime_api.h> and <mpi.h>. Calls whose result a shim records
 * (queries, tests) it wraps itself. */
#ifndef MPIACC_DIAG_CUDA_CALLS_H
#define MPIACC_DIAG_CUDA_CALLS_H

WRAP(cudaError_t, cudaEventRecord, (cudaEvent_t e, cudaStream_t s), (e, s))
WRAP(cudaError_t, cudaStreamWaitEvent, (cudaStream_t s, cudaEvent_t e, unsigned f), (s, e, f))
WRAP(cudaError_t, cudaStreamIsCapturing, (cudaStream_t s, enum cudaStreamCaptureStatus *c), (s, c))
WRAP(cudaError_t, cudaStreamGetDevice, (cudaStream_t s, int *d), (s, d))
WRAP(cudaError_t, cudaIpcGetMemHandle, (cudaIpcMemHandle_t * h, void *p), (h, p))
WRAP(cudaError_t, cudaIpcGetEventHandle, (cudaIpcEventHandle_t * h, cudaEvent_t e), (h, e))
WRAP(cudaError_t, cudaPointerGetAttributes, (struct cudaPointerAttributes * a, const void *p), (a, p))
WRAP(cudaError_t, cudaSetDevice, (int d), (d))
WRAP(cudaError_t, cudaGetDevice, (int *d), (d))
WRAP(cudaError_t, cudaMemcpyAsync, (void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st),
     (d, s, n, k, st))
WRAP(int, PMPI_Isend, (const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r),
     (b, c, t, d, tag, comm, r))
WRAP(cudaError_t, cudaHostRegister, (void *p, size_t n, unsigned f), (p, n, f))
WRAP(cudaError_t, cudaHostUnregister, (void *p), (p))
WRAP(cudaError_t, cudaMallocHost, (void **p, size_t n), (p, n))
WRAP(cudaError_t, cudaHostAlloc, (void **p, size_t n, unsigned f), (p, n, f))
WRAP(cudaError_t, cudaFreeHost, (void *p), (p))
WRAP(int, PMPI_Type_get_attr, (MPI_Datatype t, int k, void *v, int *f), (t, k, v, f))
/* Calls that may take milliseconds: mapping a peer's memory, device allocations. */
WRAP(cudaError_t, cudaIpcOpenMemHandle, (void **p, cudaIpcMemHandle_t h, unsigned f), (p, h, f))
WRAP(cudaError_t, cudaIpcCloseMemHandle, (void *p), (p))
WRAP(cudaError_t, cudaMalloc, (void **p, size_t n), (p, n))
WRAP(cudaError_t, cudaFree, (void *p), (p))

#endif
