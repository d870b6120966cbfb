/* cuda_p2p with MPIACC_FAULT_RESIDENT=1:1, set before MPI_Init: rank 1's first small pull
 * posted to its resident copy kernel is written so that the kernel cannot read it, and
 * the kernel is asked to leave. That pull is declined and goes to a copy engine, the next
 * small pull launches the kernel again, and every case's bytes still arrive. The cases
 * are cuda_p2p.c's; ranks use device rank % devices.
 * MPIACC-TEST-RANKS: 2 */
#define CUDA_P2P_RESIDENT_DECLINED 1
#include "cuda_p2p.c"
