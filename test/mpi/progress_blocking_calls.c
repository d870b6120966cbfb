/* Progress (DESIGN section 2, invariant 6) in the blocking calls beyond point-to-point:
 * collectives that p2p_progress does not cover, and the communicator constructors. Rank 0
 * posts an Isend of a host message above the rendezvous threshold and calls the blocking
 * function; rank 1 first receives the message, then calls the same function. The message
 * needs rank 0 to answer rank 1's CTS after the Isend, so each case hangs (run-test's time
 * limit) if the call blocks in MPICH without driving MPI-ACC. Each case also checks what
 * the call computed. Without the progress they add, MPI_Comm_split, MPI_Comm_dup,
 * MPI_Reduce_scatter, MPI_Win_start (rank 0 the origin) and MPI_File_open hung this way.
 * MPIACC-TEST-RANKS: 2 */
#include <unistd.h>

#include "p2p_util.h"

#define N P2P_RNDV_BYTES
#define W MPI_COMM_WORLD

static unsigned char *a, *b;
static int tag = 3000;

/* Runs `call` on both ranks with a rendezvous message from rank 0 to rank 1 in flight on
 * rank 0 and awaited by rank 1 first; checks the message. */
static void with_pending_rendezvous(void (*call)(void)) {
    ++tag;
    if (mt_rank == 0) {
        MPI_Request q;
        mt_fill(a, N, (uint64_t)tag);
        MPI_Isend(a, (int)N, MPI_BYTE, 1, tag, W, &q);
        call();
        MPI_Wait(&q, MPI_STATUS_IGNORE);
    } else if (mt_rank == 1) {
        MPI_Status st;
        memset(b, 0, N);
        MPI_Recv(b, (int)N, MPI_BYTE, 0, tag, W, &st);
        P2P_CHECK_STATUS(st, 0, tag, N);
        P2P_CHECK_BYTES(b, N, (uint64_t)tag, "payload");
        call();
    }
}

/* A periodic ring over MPI_COMM_WORLD (made before any message is in flight): every rank
 * has the same left and right neighbour with two ranks. */
static MPI_Comm ring;
static int left, right;

/* The two blocks an alltoall over the ring delivers: from the left neighbour its block for
 * its right, from the right one its block for its left. With two ranks both neighbours
 * are one process and both messages have its rank and the same tag, so MPICH may pair
 * them either way; the blocks are checked as a set. */
static int got_neighbour_blocks(const int got[2], int base) {
    const int from_left = base * left + 1, from_right = base * right;
    return (got[0] == from_left && got[1] == from_right) ||
           (left == right && got[0] == from_right && got[1] == from_left);
}

static void reduce_scatter(void) {
    int send[2] = {1 + mt_rank, 10 + mt_rank}, counts[2] = {1, 1}, got = -1;
    MPI_Reduce_scatter(send, &got, counts, MPI_INT, MPI_SUM, W);
    MT_CHECK(got == (mt_rank == 0 ? 3 : 21), "MPI_Reduce_scatter gave %d on rank %d", got, mt_rank);
}

/* MPI-4 large count (a bcast would not do: its root need not wait for the others) */
static void allreduce_c(void) {
    long long v[2] = {1 + mt_rank, 10 * (1 + mt_rank)}, sum[2] = {0, 0};
    MPI_Allreduce_c(v, sum, 2, MPI_LONG_LONG, MPI_SUM, W);
    MT_CHECK(sum[0] == 3 && sum[1] == 30, "MPI_Allreduce_c gave %lld %lld", sum[0], sum[1]);
}

static void alltoallw(void) {
    int send[2] = {100 * mt_rank, 100 * mt_rank + 1}, recv[2] = {-1, -1};
    int counts[2] = {1, 1}, displs[2] = {0, (int)sizeof(int)};
    MPI_Datatype types[2] = {MPI_INT, MPI_INT};
    MPI_Alltoallw(send, counts, displs, types, recv, counts, displs, types, W);
    MT_CHECK(recv[0] == mt_rank && recv[1] == 100 + mt_rank, "MPI_Alltoallw gave %d %d on rank %d", recv[0], recv[1],
             mt_rank);
}

static void neighbor_allgather(void) {
    int mine = 7 + mt_rank, got[2] = {-1, -1};
    MPI_Neighbor_allgather(&mine, 1, MPI_INT, got, 1, MPI_INT, ring);
    MT_CHECK(got[0] == 7 + left && got[1] == 7 + right, "MPI_Neighbor_allgather gave %d %d", got[0], got[1]);
}

static void neighbor_allgatherv(void) {
    int mine = 9 + mt_rank, got[2] = {-1, -1}, counts[2] = {1, 1}, displs[2] = {0, 1};
    MPI_Neighbor_allgatherv(&mine, 1, MPI_INT, got, counts, displs, MPI_INT, ring);
    MT_CHECK(got[0] == 9 + left && got[1] == 9 + right, "MPI_Neighbor_allgatherv gave %d %d", got[0], got[1]);
}

static void neighbor_alltoall(void) {
    int send[2] = {10 * mt_rank, 10 * mt_rank + 1}, got[2] = {-1, -1};
    MPI_Neighbor_alltoall(send, 1, MPI_INT, got, 1, MPI_INT, ring);
    MT_CHECK(got_neighbour_blocks(got, 10), "MPI_Neighbor_alltoall gave %d %d", got[0], got[1]);
}

static void neighbor_alltoallv(void) {
    int send[2] = {20 * mt_rank, 20 * mt_rank + 1}, got[2] = {-1, -1}, counts[2] = {1, 1}, displs[2] = {0, 1};
    MPI_Neighbor_alltoallv(send, counts, displs, MPI_INT, got, counts, displs, MPI_INT, ring);
    MT_CHECK(got_neighbour_blocks(got, 20), "MPI_Neighbor_alltoallv gave %d %d", got[0], got[1]);
}

static void neighbor_alltoallw(void) {
    int send[2] = {30 * mt_rank, 30 * mt_rank + 1}, got[2] = {-1, -1}, counts[2] = {1, 1};
    MPI_Aint displs[2] = {0, sizeof(int)};
    MPI_Datatype types[2] = {MPI_INT, MPI_INT};
    MPI_Neighbor_alltoallw(send, counts, displs, types, got, counts, displs, types, ring);
    MT_CHECK(got_neighbour_blocks(got, 30), "MPI_Neighbor_alltoallw gave %d %d", got[0], got[1]);
}

/* The new communicator has `size` ranks and works (an Allreduce over it). */
static void check_comm(MPI_Comm c, int size, const char *how) {
    MT_CHECK(c != MPI_COMM_NULL, "%s gave MPI_COMM_NULL", how);
    if (c == MPI_COMM_NULL) return;
    int n = -1, one = 1, sum = 0;
    MPI_Comm_size(c, &n);
    MT_CHECK(n == size, "%s: %d ranks, expected %d", how, n, size);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c);
    MT_CHECK(sum == size, "%s: Allreduce over it gave %d", how, sum);
    MPI_Comm_free(&c);
}

static void comm_dup(void) {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_dup(W, &c);
    check_comm(c, mt_size, "MPI_Comm_dup");
}

static void comm_dup_with_info(void) {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_dup_with_info(W, MPI_INFO_NULL, &c);
    check_comm(c, mt_size, "MPI_Comm_dup_with_info");
}

static void comm_create(void) {
    MPI_Group g;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_group(W, &g);
    MPI_Comm_create(W, g, &c);
    MPI_Group_free(&g);
    check_comm(c, mt_size, "MPI_Comm_create");
}

static void comm_split(void) {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_split(W, mt_rank % 2, mt_rank, &c);
    check_comm(c, (mt_size + 1 - mt_rank % 2) / 2, "MPI_Comm_split");
}

/* The ranks on this rank's host (maint/multihost puts them on several). */
static int ranks_on_my_host(void) {
    char mine[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0, same = 0;
    MPI_Get_processor_name(mine, &len);
    char *all = (char *)malloc((size_t)mt_size * MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, W);
    for (int r = 0; r < mt_size; ++r) same += strcmp(all + (size_t)r * MPI_MAX_PROCESSOR_NAME, mine) == 0;
    free(all);
    return same;
}

static int on_my_host; /* ranks_on_my_host(), asked before the cases */

static void comm_split_type(void) {
    const int here = on_my_host;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_split_type(W, MPI_COMM_TYPE_SHARED, mt_rank, MPI_INFO_NULL, &c);
    check_comm(c, here, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
}

static void cart_create(void) {
    int dims[1] = {mt_size}, periods[1] = {1};
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Cart_create(W, 1, dims, periods, 0, &c);
    check_comm(c, mt_size, "MPI_Cart_create");
}

static void cart_sub(void) {
    int keep[1] = {1};
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Cart_sub(ring, keep, &c);
    check_comm(c, mt_size, "MPI_Cart_sub");
}

static void graph_create(void) {
    int index[2] = {1, 2}, edges[2] = {1, 0};
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Graph_create(W, 2, index, edges, 0, &c);
    check_comm(c, 2, "MPI_Graph_create");
}

static void dist_graph_create(void) {
    int source = mt_rank, degree = 1, dest = 1 - mt_rank;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Dist_graph_create(W, 1, &source, &degree, &dest, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &c);
    check_comm(c, 2, "MPI_Dist_graph_create");
}

static void dist_graph_create_adjacent(void) {
    int peer = 1 - mt_rank;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Dist_graph_create_adjacent(W, 1, &peer, MPI_UNWEIGHTED, 1, &peer, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &c);
    check_comm(c, 2, "MPI_Dist_graph_create_adjacent");
}

static void comm_create_group(void) {
    MPI_Group g;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_group(W, &g);
    MPI_Comm_create_group(W, g, 91, &c);
    MPI_Group_free(&g);
    check_comm(c, mt_size, "MPI_Comm_create_group");
}

/* Each rank a group of its own (`half`, made before any message is in flight); the
 * leaders meet on MPI_COMM_WORLD. */
static MPI_Comm half;
static void intercomm_create(void) {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Intercomm_create(half, 0, W, 1 - mt_rank, 92, &c);
    MT_CHECK(c != MPI_COMM_NULL, "MPI_Intercomm_create gave MPI_COMM_NULL");
    if (c == MPI_COMM_NULL) return;
    int remote = -1, inter_flag = 0, mine = 40 + mt_rank, theirs = -1;
    MPI_Comm_test_inter(c, &inter_flag);
    MPI_Comm_remote_size(c, &remote);
    MPI_Allreduce(&mine, &theirs, 1, MPI_INT, MPI_SUM, c); /* over an intercommunicator: the other group's */
    MT_CHECK(inter_flag && remote == 1 && theirs == 40 + (1 - mt_rank),
             "MPI_Intercomm_create: inter %d, remote size %d, allreduce %d", inter_flag, remote, theirs);
    MPI_Comm_free(&c);
}

/* A window made before any message is in flight, for the synchronisation cases. */
static MPI_Win win;
static int *win_mem;

/* A fence opens an epoch (rank 0 arrives with the message in flight), a put, a fence. */
static void win_fence(void) {
    int v = 500 + mt_rank;
    win_mem[0] = -1;
    MPI_Win_fence(0, win);
    MPI_Put(&v, 1, MPI_INT, 1 - mt_rank, 0, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    MT_CHECK(win_mem[0] == 500 + (1 - mt_rank), "after the fences the window holds %d", win_mem[0]);
}

static void win_allocate_and_free(void) {
    int *mem = NULL;
    MPI_Win w;
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, W, &mem, &w);
    MT_CHECK(mem != NULL, "MPI_Win_allocate gave no memory");
    MPI_Win_free(&w);
    MT_CHECK(w == MPI_WIN_NULL, "MPI_Win_free left the handle set");
}

/* One post-start-complete-wait epoch: `target` posts and waits, the other rank starts,
 * puts `value` and completes. Rank 0 makes its calls with the message in flight, rank 1
 * after its receive. */
static void pscw_epoch(int target, int value) {
    MPI_Group world, peer;
    const int other = 1 - mt_rank;
    MPI_Comm_group(W, &world);
    MPI_Group_incl(world, 1, &other, &peer);
    win_mem[1] = -1;
    if (mt_rank == target) {
        MPI_Win_post(peer, 0, win);
        MPI_Win_wait(win);
        MT_CHECK(win_mem[1] == value, "after MPI_Win_wait the window holds %d", win_mem[1]);
    } else {
        MPI_Win_start(peer, 0, win);
        MPI_Put(&value, 1, MPI_INT, target, 1, 1, MPI_INT, win);
        MPI_Win_complete(win);
    }
    MPI_Group_free(&peer);
    MPI_Group_free(&world);
}
/* Rank 0 the target: its MPI_Win_wait must drive the transfer. */
static void win_wait(void) { pscw_epoch(0, 777); }
/* Rank 0 the origin: MPICH's start waits for a post rank 1 makes only after its receive. */
static void win_complete(void) { pscw_epoch(1, 778); }

/* Collective MPI-IO: open, a collective write and read, close (each blocks in MPICH until
 * both ranks are in it). The file is per job and deleted on close. */
static char io_path[256];
static void file_collectives(void) {
    MPI_File fh;
    int mine[2] = {40 + mt_rank, 50 + mt_rank}, back[4] = {0, 0, 0, 0};
    MPI_File_open(W, io_path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    MPI_File_write_at_all(fh, 8 * mt_rank, mine, 2, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_File_read_at_all(fh, 0, back, 4, MPI_INT, MPI_STATUS_IGNORE);
    MT_CHECK(back[0] == 40 && back[1] == 50 && back[2] == 41 && back[3] == 51, "the file reads %d %d %d %d", back[0],
             back[1], back[2], back[3]);
    MPI_File_close(&fh);
}

static MPI_Comm inter;
static void intercomm_merge(void) {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Intercomm_merge(inter, mt_rank, &c);
    check_comm(c, 2, "MPI_Intercomm_merge");
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    on_my_host = ranks_on_my_host();
    a = p2p_alloc(N);
    b = p2p_alloc(N);
    {
        int dims[1] = {mt_size}, periods[1] = {1};
        MPI_Cart_create(W, 1, dims, periods, 0, &ring);
        MPI_Cart_shift(ring, 0, 1, &left, &right);
        /* MPI_Win_create, not MPI_Win_allocate: with Debian's MPICH 4.0.2 a put into an
         * allocated window of the other rank on the same node landed in the origin's own
         * window (plain MPICH, no libmpiacc). */
        win_mem = p2p_alloc(2 * sizeof(int));
        MPI_Win_create(win_mem, 2 * sizeof(int), sizeof(int), MPI_INFO_NULL, W, &win);
        MPI_Comm_split(W, mt_rank, 0, &half);
        MPI_Intercomm_create(half, 0, W, 1 - mt_rank, 77, &inter);
        if (mt_rank == 0) snprintf(io_path, sizeof io_path, "/tmp/mpiacc-progress-io.%ld", (long)getpid());
        MPI_Bcast(io_path, sizeof io_path, MPI_CHAR, 0, W);
    }

    static const struct {
        const char *name;
        void (*call)(void);
    } cases[] = {
        {"isend_9MiB_then_reduce_scatter_while_peer_recvs_does_not_hang", reduce_scatter},
        {"isend_9MiB_then_alltoallw_while_peer_recvs_does_not_hang", alltoallw},
        {"isend_9MiB_then_allreduce_c_while_peer_recvs_does_not_hang", allreduce_c},
        {"isend_9MiB_then_neighbor_allgather_while_peer_recvs_does_not_hang", neighbor_allgather},
        {"isend_9MiB_then_neighbor_allgatherv_while_peer_recvs_does_not_hang", neighbor_allgatherv},
        {"isend_9MiB_then_neighbor_alltoall_while_peer_recvs_does_not_hang", neighbor_alltoall},
        {"isend_9MiB_then_neighbor_alltoallv_while_peer_recvs_does_not_hang", neighbor_alltoallv},
        {"isend_9MiB_then_neighbor_alltoallw_while_peer_recvs_does_not_hang", neighbor_alltoallw},
        {"isend_9MiB_then_comm_dup_while_peer_recvs_does_not_hang", comm_dup},
        {"isend_9MiB_then_comm_dup_with_info_while_peer_recvs_does_not_hang", comm_dup_with_info},
        {"isend_9MiB_then_comm_create_while_peer_recvs_does_not_hang", comm_create},
        {"isend_9MiB_then_comm_split_while_peer_recvs_does_not_hang", comm_split},
        {"isend_9MiB_then_comm_split_type_while_peer_recvs_does_not_hang", comm_split_type},
        {"isend_9MiB_then_cart_create_while_peer_recvs_does_not_hang", cart_create},
        {"isend_9MiB_then_cart_sub_while_peer_recvs_does_not_hang", cart_sub},
        {"isend_9MiB_then_graph_create_while_peer_recvs_does_not_hang", graph_create},
        {"isend_9MiB_then_dist_graph_create_while_peer_recvs_does_not_hang", dist_graph_create},
        {"isend_9MiB_then_dist_graph_create_adjacent_while_peer_recvs_does_not_hang", dist_graph_create_adjacent},
        {"isend_9MiB_then_comm_create_group_while_peer_recvs_does_not_hang", comm_create_group},
        {"isend_9MiB_then_intercomm_create_while_peer_recvs_does_not_hang", intercomm_create},
        {"isend_9MiB_then_intercomm_merge_while_peer_recvs_does_not_hang", intercomm_merge},
        {"isend_9MiB_then_win_fence_while_peer_recvs_does_not_hang", win_fence},
        {"isend_9MiB_then_win_allocate_and_free_while_peer_recvs_does_not_hang", win_allocate_and_free},
        {"isend_9MiB_then_win_wait_while_peer_recvs_does_not_hang", win_wait},
        {"isend_9MiB_then_win_start_and_complete_while_peer_recvs_does_not_hang", win_complete},
        {"isend_9MiB_then_file_open_write_all_read_all_close_while_peer_recvs_does_not_hang", file_collectives},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) MT_CASE(cases[i].name) {
            with_pending_rendezvous(cases[i].call);
        }

    MPI_Win_free(&win);
    free(win_mem);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    MPI_Comm_free(&ring);
    free(a);
    free(b);
    return mt_finalize();
}
