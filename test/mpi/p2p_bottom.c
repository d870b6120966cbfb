/* Sends and receives at MPI_BOTTOM with a datatype of absolute addresses. MPI allows
 * MPI_BOTTOM as the buffer of any call whose type's displacements are absolute (from
 * MPI_Get_address); the data must arrive exactly as with an ordinary buffer, on every
 * path a message of that size takes: a payload shorter than an envelope (an internal
 * buffer, then a copy out), a medium payload, the host chunk-staging band, and a
 * message above the host rendezvous threshold; blocking and nonblocking on both sides.
 * Built a second time as p2p_bottom_rndv with a 64 KiB rendezvous threshold, so that
 * the medium sizes go by RTS/CTS too.
 * MPIACC-TEST-RANKS: 2 */
#include "p2p_util.h"

/* The type: two blocks of ints at absolute addresses, the second before the first in
 * memory, so that it is never one contiguous run. `one_block` gives the single-int
 * struct of MPICH's own pt2pt/bottom test. */
static MPI_Datatype bottom_type(int *a, int *b, int n_each, int one_block) {
    MPI_Aint disp[2];
    int len[2] = {n_each, n_each};
    MPI_Datatype types[2] = {MPI_INT, MPI_INT};
    MPI_Get_address(a, &disp[0]);
    MPI_Get_address(b, &disp[1]);
    MPI_Datatype t;
    MPI_Type_create_struct(one_block ? 1 : 2, len, disp, types, &t);
    MPI_Type_commit(&t);
    return t;
}

static int value_at(uint64_t seed, int block, int i) { return (int)(seed * 7919u + (uint64_t)block * 104729u + i); }

/* One message of 2*n_each ints (n_each with one_block) from rank 0 to rank 1, both at
 * MPI_BOTTOM. */
static void bottom_case(int n_each, int one_block, int send_nb, int recv_nb, int tag) {
    int *mem = p2p_alloc(sizeof(int) * (2 * (size_t)n_each + 16));
    int *b = mem + 8, *a = mem + 8 + n_each; /* b lies below a */
    int blocks = one_block ? 1 : 2;
    MPI_Datatype t = bottom_type(a, b, n_each, one_block);
    uint64_t seed = (uint64_t)tag;
    int rc;
    if (mt_rank == 0) {
        for (int i = 0; i < n_each; ++i) {
            a[i] = value_at(seed, 0, i);
            b[i] = value_at(seed, 1, i);
        }
        if (send_nb) {
            MPI_Request q;
            rc = MPI_Isend(MPI_BOTTOM, 1, t, 1, tag, MPI_COMM_WORLD, &q);
            MT_CHECK(rc == MPI_SUCCESS, "MPI_Isend(MPI_BOTTOM) failed with class %d", p2p_class(rc));
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Send(MPI_BOTTOM, 1, t, 1, tag, MPI_COMM_WORLD);
        }
        MT_CHECK(rc == MPI_SUCCESS, "send at MPI_BOTTOM failed with class %d", p2p_class(rc));
    } else if (mt_rank == 1) {
        for (int i = 0; i < 2 * n_each + 16; ++i) mem[i] = -1;
        MPI_Status st;
        if (recv_nb) {
            MPI_Request q;
            rc = MPI_Irecv(MPI_BOTTOM, 1, t, 0, tag, MPI_COMM_WORLD, &q);
            MT_CHECK(rc == MPI_SUCCESS, "MPI_Irecv(MPI_BOTTOM) failed with class %d", p2p_class(rc));
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&q, &st);
        } else {
            rc = MPI_Recv(MPI_BOTTOM, 1, t, 0, tag, MPI_COMM_WORLD, &st);
        }
        MT_CHECK(rc == MPI_SUCCESS, "receive at MPI_BOTTOM failed with class %d", p2p_class(rc));
        if (rc == MPI_SUCCESS) {
            P2P_CHECK_STATUS(st, 0, tag, (size_t)blocks * n_each * sizeof(int));
            int bad = -1;
            for (int i = 0; i < n_each && bad < 0; ++i)
                if (a[i] != value_at(seed, 0, i) || (!one_block && b[i] != value_at(seed, 1, i))) bad = i;
            MT_CHECK(bad < 0, "element %d of %d per block is wrong (a=%d b=%d)", bad, n_each, bad < 0 ? 0 : a[bad],
                     bad < 0 ? 0 : b[bad]);
            for (int i = 0; i < 8; ++i) MT_CHECK(mem[i] == -1, "int %d before the blocks was written", i);
            for (int i = 0; i < 8; ++i) MT_CHECK(a[n_each + i] == -1, "int %d past the blocks was written", i);
            if (one_block) MT_CHECK(b[0] == -1, "the block outside the type was written");
        }
    }
    MPI_Type_free(&t);
    free(mem);
}

int main(int argc, char **argv) {
#ifdef P2P_BOTTOM_RNDV_64K
    setenv("MPIACC_HOST_RNDV_THRESHOLD", "64K", 1);
#endif
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const size_t threshold = p2p_host_threshold();
    struct {
        const char *name;
        int n_each, one_block;
    } sizes[] = {
        {"one_int", 1, 1},
        {"100_bytes", 12, 0},
        {"envelope_length", P2P_ENVELOPE_BYTES / 8, 0},
        {"64_KiB", 8192, 0},
        {"1_MiB", 131072, 0},
        {"1_MiB_one_block", 262144, 1},
        {"above_rndv_threshold", (int)(threshold / 8) + 1024, 0},
    };
    const char *modes[] = {"send_recv", "send_irecv", "isend_recv", "isend_irecv"};
    int tag = 10;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s)
        for (int m = 0; m < 4; ++m) {
            char name[160];
            snprintf(name, sizeof name, "mpi_bottom_%s_with_absolute_struct_type_%s_delivers_the_data", modes[m],
                     sizes[s].name);
            MT_CASE(name) bottom_case(sizes[s].n_each, sizes[s].one_block, m >= 2, m & 1, tag++);
        }
    return mt_finalize();
}
