/* cuda_typed with MPIACC_IPC=0, set before MPI_Init: every CUDA transfer inside the node
 * takes the staged paths between nodes. The cases are cuda_typed.c's.
 * MPIACC-TEST-RANKS: 2 */
#define CUDA_TYPED_NO_IPC 1
#include "cuda_typed.c"
