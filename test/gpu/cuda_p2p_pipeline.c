/* cuda_p2p with MPIACC_IPC=0, set before MPI_Init: device-to-device transfers inside the
 * node take the staged, chunked pipeline, the path between nodes. The cases are
 * cuda_p2p.c's; ranks use device rank % devices.
 * MPIACC-TEST-RANKS: 2 */
#define CUDA_P2P_NO_IPC 1
#include "cuda_p2p.c"
