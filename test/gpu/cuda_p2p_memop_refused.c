/* cuda_p2p with MPIACC_FAULT_MEMOP=1:1, set before MPI_Init: rank 1's first stream-memory
 * write of a small host payload is refused as a driver may refuse it. That payload goes
 * to a copy engine instead, and the device writes no more: every later small payload is
 * copied too, and every case's bytes still arrive. The cases are cuda_p2p.c's; ranks use
 * device rank % devices.
 * MPIACC-TEST-RANKS: 2 */
#define CUDA_P2P_MEMOP_REFUSED 1
#include "cuda_p2p.c"
