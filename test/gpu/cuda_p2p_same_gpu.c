/* cuda_p2p with both ranks on CUDA device 0: two processes sharing one GPU (CUDA IPC
 * within one device, and the pipeline for host buffers). The cases are cuda_p2p.c's.
 * MPIACC-TEST-RANKS: 2 */
#define CUDA_P2P_SAME_GPU 1
#include "cuda_p2p.c"
