/* cuda_p2p with MPIACC_IPC=0 and MPIACC_CUDA_COPY_FLAGS=1, set before MPI_Init: every
 * staging copy of the pipeline writes its done word behind it, the path the knob turns on
 * (off by default). The cases are cuda_p2p.c's; ranks use device rank % devices.
 * MPIACC-TEST-RANKS: 2 */
#define CUDA_P2P_NO_IPC 1
#define CUDA_P2P_COPY_FLAGS 1
#include "cuda_p2p.c"
