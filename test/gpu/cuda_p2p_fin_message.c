/* cuda_p2p with MPIACC_FAULT_FIN_WORDS=1, set before MPI_Init: every IPC pull is answered by
 * a FIN message on the private communicator, the path a receiver takes when it cannot open
 * the sender's FIN words (another PID namespace). The cases are cuda_p2p.c's; ranks use
 * device rank % devices.
 * MPIACC-TEST-RANKS: 2 */
#define CUDA_P2P_FIN_MESSAGE 1
#include "cuda_p2p.c"
