/* cuda_coll_algorithms with the ranks, which share one GPU here, running the algorithms
 * for ranks with a GPU each (MPIACC_TEST_COLL_SPREAD=1): every rank copies and reduces
 * its own part over MPI-ACC's point-to-point paths, as on a node with a GPU per rank.
 * The rank count comes from the program's name (cuda_coll_spread_np3: 3).
 * MPIACC-TEST-RANKS: 3 */
#include <stdlib.h>

static void spread_algorithms_for_every_size(void) {
    setenv("MPIACC_TEST_COLL_DEVICE_MIN", "1", 1);
    setenv("MPIACC_TEST_COLL_SPREAD", "1", 1);
}
#define COLL_BEFORE_INIT spread_algorithms_for_every_size
#define CUDA_COLL_ALGORITHMS 1
#include "cuda_coll.c"
