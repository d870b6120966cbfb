/* cuda_coll with MPI-ACC's own device algorithms taking every blocking Allreduce, Bcast,
 * Allgather and Reduce_scatter_block whose buffers are CUDA memory on every rank, whatever
 * its size (MPIACC_TEST_COLL_DEVICE_MIN=1, set before MPI_Init; the built-in crossover
 * leaves most of the cases to staging). Cases that mix kinds across ranks, reduce with a
 * user's op or use a derived type are staged after the agreement. The rank count comes
 * from the program's name (cuda_coll_algorithms_np3: 3).
 * MPIACC-TEST-RANKS: 2 */
#include <stdlib.h>

static void device_algorithms_for_every_size(void) { setenv("MPIACC_TEST_COLL_DEVICE_MIN", "1", 1); }
#define COLL_BEFORE_INIT device_algorithms_for_every_size
#define CUDA_COLL_ALGORITHMS 1
#include "cuda_coll.c"
