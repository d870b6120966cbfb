/* coll_device on OpenCL buffers where every blocking Allreduce, Bcast, Allgather and
 * Reduce_scatter_block may begin with the agreement on the device algorithms' path, as on
 * a machine with CUDA (MPIACC_TEST_COLL_AGREE=1, set before MPI_Init). No rank has CUDA
 * buffers, so every agreement declines and the call stages: the results must not change,
 * and the agreements must come where every rank expects them (a mismatch hangs, and the
 * case's watchdog names it). The last case counts them on a new communicator.
 * MPIACC-TEST-RANKS: 3 */
#include <stdlib.h>

#include "coll_cases.h"

long long mpiacc_counter_value(const char *name);

static void agree_as_with_cuda(void) { setenv("MPIACC_TEST_COLL_AGREE", "1", 1); }
#define COLL_BEFORE_INIT agree_as_with_cuda

/* Below 256 KiB a communicator whose buffers no agreement has placed asks on its 1st, 2nd,
 * 4th and 8th... call; from 256 KiB, every call. None runs an algorithm or fails. */
static void agreements_come_where_expected_case(const void *p) {
    (void)p;
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    static int small[4], large[(256 << 10) / sizeof(int)];
    const long long before = mpiacc_counter_value("coll.device_declined");
    for (int i = 0; i < 10; ++i) MPI_Allreduce(MPI_IN_PLACE, small, 4, MPI_INT, MPI_SUM, c);
    const long long after_small = mpiacc_counter_value("coll.device_declined");
    for (int i = 0; i < 3; ++i) MPI_Bcast(large, (int)(sizeof large / sizeof large[0]), MPI_INT, i % 3, c);
    const long long after_large = mpiacc_counter_value("coll.device_declined");
    MT_CHECK(after_small - before == 4, "10 small allreduces agreed %lld times, expected 4 (calls 1, 2, 4, 8)",
             after_small - before);
    MT_CHECK(after_large - after_small == 3, "3 bcasts of 256 KiB agreed %lld times, expected 3",
             after_large - after_small);
    MT_CHECK(mpiacc_counter_value("coll.device_allreduce") == 0 && mpiacc_counter_value("coll.device_failed") == 0,
             "no device algorithm may run or fail here: coll.device_allreduce %lld, coll.device_failed %lld",
             mpiacc_counter_value("coll.device_allreduce"), mpiacc_counter_value("coll.device_failed"));
    MPI_Comm_free(&c);
}

static void agree_extra(int kind) {
    (void)kind;
    coll_case("agreements_come_where_every_rank_expects_them_and_decline", NULL, agreements_come_where_expected_case,
              NULL);
}
#define COLL_EXTRA_CASES agree_extra

#include "coll_device.c"
