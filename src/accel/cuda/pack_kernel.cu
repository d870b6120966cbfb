// Pack and unpack kernels for derived datatypes on device buffers (BRIEF D2, D3, D5).
// Each moves any packed byte range of `count` elements, so a pipeline packs chunk by
// chunk, and the packed side may be pinned host memory the GPU writes or reads at its
// host address (zero-copy staging). What a thread does is in pack_body.h; pack.cc
// chooses the kernel, the word and the grid.
//
// Built by nvcc into a fatbin that pack.cc embeds and loads with cudaLibraryLoadData on
// first use: nothing registers with the driver when the library loads, so a process
// without a driver still loads libmpiacc.

#include "pack_body.h"

#define MPIACC_PACK_THREADS 256

using mpiacc::cuda::StridedArgs;
using mpiacc::cuda::UnitsArgs;

static __device__ __forceinline__ unsigned long long pack_thread() {
    return static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
static __device__ __forceinline__ unsigned long long pack_threads() {
    return static_cast<unsigned long long>(gridDim.x) * blockDim.x;
}

// StridedForm blocks, one word a thread and step (TEMPI's canonical form, BRIEF D2).
#define MPIACC_STRIDED_KERNELS(bytes, type)                                                                          \
    extern "C" __global__ void __launch_bounds__(MPIACC_PACK_THREADS) mpiacc_pack_strided_##bytes(StridedArgs a) {   \
        mpiacc::cuda::strided_thread<type, true>(a, pack_thread(), pack_threads());                                  \
    }                                                                                                                \
    extern "C" __global__ void __launch_bounds__(MPIACC_PACK_THREADS) mpiacc_unpack_strided_##bytes(StridedArgs a) { \
        mpiacc::cuda::strided_thread<type, false>(a, pack_thread(), pack_threads());                                 \
    }

MPIACC_STRIDED_KERNELS(1, unsigned char)
MPIACC_STRIDED_KERNELS(2, unsigned short)
MPIACC_STRIDED_KERNELS(4, unsigned int)
MPIACC_STRIDED_KERNELS(8, unsigned long long)
MPIACC_STRIDED_KERNELS(16, uint4)

// Any type's work units, a group of lanes a unit (BRIEF D3).
extern "C" __global__ void __launch_bounds__(MPIACC_PACK_THREADS) mpiacc_pack_units(UnitsArgs a) {
    mpiacc::cuda::units_thread<true>(a, pack_thread(), pack_threads());
}
extern "C" __global__ void __launch_bounds__(MPIACC_PACK_THREADS) mpiacc_unpack_units(UnitsArgs a) {
    mpiacc::cuda::units_thread<false>(a, pack_thread(), pack_threads());
}
