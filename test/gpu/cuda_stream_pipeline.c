/* cuda_stream with MPIACC_IPC=0, set before MPI_Init: the staged pipeline, where the
 * sender polls the captured stream/event dependency before staging chunks (the path
 * between nodes). The cases are cuda_stream.c's.
 * MPIACC-TEST-RANKS: 2 */
#define CUDA_STREAM_NO_IPC 1
#include "cuda_stream.c"
