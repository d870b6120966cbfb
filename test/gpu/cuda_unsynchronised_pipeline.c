/* cuda_unsynchronised with MPIACC_IPC=0, set before MPI_Init: the same unsynchronised
 * writes, moved by the staged pipeline that transfers between nodes take.
 * MPIACC-TEST-RANKS: 2 */
#define UNSYNC_NO_IPC 1
#include "cuda_unsynchronised.c"
