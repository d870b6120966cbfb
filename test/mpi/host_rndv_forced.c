/* Host-to-host rendezvous forced by the knob: with a 64 KiB threshold every
 * size at or past it goes by RTS/CTS direct mode and arrives intact.
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"

int main(int argc, char **argv) {
    setenv("MPIACC_HOST_RNDV_THRESHOLD", "64K", 1);
    MT_INIT(&argc, &argv);
    const size_t thr = 64 << 10;
    const size_t sizes[] = {0, 1, 199, 200, 201, thr - 1, thr, thr + 1, (256 << 10) + 1, (size_t)64 << 20};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]);
    MT_CASE("host_to_host_rendezvous_forced_by_threshold_knob_every_size_intact") {
        long long direct0 = mpiacc_counter_value("protocol.recv.direct");
        for (int i = 0; i < ns; ++i) {
            size_t n = sizes[i];
            unsigned char *h = p2p_alloc(n);
            if (mt_rank == 0) {
                mt_fill(h, n, 300 + i);
                MPI_Send(h, (int)n, MPI_BYTE, 1, 300 + i, MPI_COMM_WORLD);
            } else if (mt_rank == 1) {
                MPI_Status st;
                memset(h, 0, n);
                MPI_Recv(h, (int)n, MPI_BYTE, 0, 300 + i, MPI_COMM_WORLD, &st);
                MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "%zu bytes: count %d", n, p2p_count(&st, MPI_BYTE));
                P2P_CHECK_BYTES(h, n, 300 + i, "payload");
            }
            free(h);
        }
        /* 200 B, thr, thr+1, 256 KiB+1 and 64 MiB went by rendezvous (direct mode). */
        if (mt_rank == 1)
            MT_CHECK(mpiacc_counter_value("protocol.recv.direct") - direct0 == 5, "%lld direct-mode receives, expected 5",
                     mpiacc_counter_value("protocol.recv.direct") - direct0);
    }
    MT_CASE("host_rendezvous_with_derived_types_on_both_sides") {
        /* A vector of doubles sent, received as contiguous doubles. */
        const int count = 20000, stride = 3;
        double *src = p2p_alloc(sizeof(double) * count * stride);
        double *dst = p2p_alloc(sizeof(double) * count);
        MPI_Datatype vec;
        MPI_Type_vector(count, 1, stride, MPI_DOUBLE, &vec);
        MPI_Type_commit(&vec);
        if (mt_rank == 0) {
            for (int i = 0; i < count * stride; ++i) src[i] = i;
            MPI_Send(src, 1, vec, 1, 400, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Recv(dst, count, MPI_DOUBLE, 0, 400, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            int bad = -1;
            for (int i = 0; i < count && bad < 0; ++i)
                if (dst[i] != (double)(i * stride)) bad = i;
            MT_CHECK(bad < 0, "element %d is %g", bad, bad >= 0 ? dst[bad] : 0.0);
        }
        MPI_Type_free(&vec);
        free(src);
        free(dst);
    }
    return mt_finalize();
}
