/* The pack kernels' test (test/gpu/cuda_pack_kernels.cc) with the kernels' threads run
 * on the CPU over host memory: every case runs here, GPU or not, through the real
 * flattener and the launchers' choice of kernel, word and arguments.
 * MPIACC-TEST-RANKS: 1 */
#define PACK_TEST_ON_HOST 1
#include "../gpu/cuda_pack_kernels.cc"
