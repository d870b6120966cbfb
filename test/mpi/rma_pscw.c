/* Post-start-complete-wait through libmpiacc. MPI_Win_post also tells each origin on the
 * window's private communicator that it has posted, and MPI_Win_start waits for that
 * with MPI-ACC progress before MPICH's start (progress_blocking_calls has the case that
 * hung without it). These cases hold the handshake to MPI's rules: epochs of one window
 * follow each other in order, with several origins and with roles swapping;
 * MPI_MODE_NOCHECK epochs between others neither send nor wait for a notice; an origin
 * that starts before its target posts gets its epoch once the post comes; and one that
 * starts after the posts of two epochs have arrived gets both (MPICH 4.0.2 alone hangs
 * there, and hung the first case too once the notices made its origins progress between
 * a post and their start).
 * MPIACC-TEST-RANKS: 3 */
#include "p2p_util.h"

#define W MPI_COMM_WORLD

static int *mem; /* the window: one int per rank */
static MPI_Win win;
static MPI_Group world;

static MPI_Group group_of(int n, const int *ranks) {
    MPI_Group g;
    MPI_Group_incl(world, n, ranks, &g);
    return g;
}

/* Rank `target` exposes to the others, each of which puts its rank + base in its slot. */
static void epoch(int target, int base, int assert) {
    const int others[2] = {(target + 1) % 3, (target + 2) % 3};
    for (int i = 0; i < 3; ++i) mem[i] = -1;
    if (assert & MPI_MODE_NOCHECK) MPI_Barrier(W); /* the slots are reset everywhere first */
    if (mt_rank == target) {
        MPI_Group g = group_of(2, others);
        MT_CHECK(MPI_Win_post(g, assert, win) == MPI_SUCCESS, "MPI_Win_post failed");
        /* NOCHECK: the posts have completed before any start */
        if (assert & MPI_MODE_NOCHECK) MPI_Barrier(W);
        MT_CHECK(MPI_Win_wait(win) == MPI_SUCCESS, "MPI_Win_wait failed");
        for (int k = 0; k < 2; ++k)
            MT_CHECK(mem[others[k]] == base + others[k], "epoch %d: slot %d holds %d, not %d", base, others[k],
                     mem[others[k]], base + others[k]);
        MPI_Group_free(&g);
    } else {
        MPI_Group g = group_of(1, &target);
        int v = base + mt_rank;
        if (assert & MPI_MODE_NOCHECK) MPI_Barrier(W);
        MT_CHECK(MPI_Win_start(g, assert, win) == MPI_SUCCESS, "MPI_Win_start failed");
        MT_CHECK(MPI_Put(&v, 1, MPI_INT, target, mt_rank, 1, MPI_INT, win) == MPI_SUCCESS, "MPI_Put failed");
        MT_CHECK(MPI_Win_complete(win) == MPI_SUCCESS, "MPI_Win_complete failed");
        MPI_Group_free(&g);
    }
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    if (mt_size != 3) {
        if (mt_rank == 0) fprintf(stderr, "# rma_pscw needs exactly 3 ranks (has %d)\n", mt_size);
        MPI_Abort(W, 1);
    }
    MPI_Comm_group(W, &world);
    mem = p2p_alloc(3 * sizeof(int));
    /* MPI_Win_create, not MPI_Win_allocate: see progress_blocking_calls. */
    MPI_Win_create(mem, 3 * sizeof(int), sizeof(int), MPI_INFO_NULL, W, &win);

    MT_CASE("ten_epochs_two_origins_each_target_in_turn") {
        for (int e = 0; e < 10; ++e) epoch(e % 3, 100 * (e + 1), 0);
    }
    MT_CASE("nocheck_epochs_between_checked_ones_stay_in_step") {
        epoch(0, 2000, 0);
        epoch(1, 3000, MPI_MODE_NOCHECK);
        epoch(2, 4000, 0);
        epoch(0, 5000, MPI_MODE_NOCHECK);
        epoch(1, 6000, 0);
    }
    MT_CASE("epoch_with_a_late_post_gets_both_puts") {
        /* Rank 0 posts only after a 1-byte message that rank 2 sends 50 ms on: rank 1 is
         * in MPI_Win_start meanwhile, waiting for a post that has not been made. */
        for (int i = 0; i < 3; ++i) mem[i] = -1;
        MPI_Barrier(W);
        if (mt_rank == 0) {
            const int origins[2] = {1, 2};
            MPI_Group g = group_of(2, origins);
            char go;
            MPI_Recv(&go, 1, MPI_CHAR, 2, 9, W, MPI_STATUS_IGNORE);
            MT_CHECK(MPI_Win_post(g, 0, win) == MPI_SUCCESS, "MPI_Win_post failed");
            MT_CHECK(MPI_Win_wait(win) == MPI_SUCCESS, "MPI_Win_wait failed");
            MT_CHECK(mem[1] == 71 && mem[2] == 72, "the window holds %d %d", mem[1], mem[2]);
            MPI_Group_free(&g);
        } else {
            const int target = 0;
            MPI_Group g = group_of(1, &target);
            int v = 70 + mt_rank;
            if (mt_rank == 2) {
                double t0 = MPI_Wtime();
                while (MPI_Wtime() - t0 < 0.05) {
                }
                char go = 1;
                MPI_Send(&go, 1, MPI_CHAR, 0, 9, W);
            }
            MT_CHECK(MPI_Win_start(g, 0, win) == MPI_SUCCESS, "MPI_Win_start failed");
            MT_CHECK(MPI_Put(&v, 1, MPI_INT, target, mt_rank, 1, MPI_INT, win) == MPI_SUCCESS, "MPI_Put failed");
            MT_CHECK(MPI_Win_complete(win) == MPI_SUCCESS, "MPI_Win_complete failed");
            MPI_Group_free(&g);
        }
    }

    MT_CASE("start_after_the_posts_of_two_epochs_have_arrived") {
        /* Ranks 2 and then 0 expose to rank 1, which hears (by a message each sends after
         * its post) that both have posted before it starts the first epoch. With Debian's
         * MPICH 4.0.2 alone this start hangs: it waits until the posts it has seen equal
         * its group's size (2 != 1). */
        for (int i = 0; i < 3; ++i) mem[i] = -1;
        MPI_Barrier(W);
        const int origin = 1;
        char go = 1;
        if (mt_rank == 1) {
            const int first = 2, second = 0;
            MPI_Recv(&go, 1, MPI_CHAR, first, 10, W, MPI_STATUS_IGNORE);
            MPI_Recv(&go, 1, MPI_CHAR, second, 10, W, MPI_STATUS_IGNORE);
            const int targets[2] = {first, second};
            for (int k = 0; k < 2; ++k) {
                MPI_Group g = group_of(1, &targets[k]);
                int v = 90 + targets[k];
                MT_CHECK(MPI_Win_start(g, 0, win) == MPI_SUCCESS, "MPI_Win_start (target %d) failed", targets[k]);
                MT_CHECK(MPI_Put(&v, 1, MPI_INT, targets[k], 1, 1, MPI_INT, win) == MPI_SUCCESS, "MPI_Put failed");
                MT_CHECK(MPI_Win_complete(win) == MPI_SUCCESS, "MPI_Win_complete failed");
                MPI_Group_free(&g);
            }
        } else {
            MPI_Group g = group_of(1, &origin);
            if (mt_rank == 0) MPI_Recv(&go, 1, MPI_CHAR, 2, 11, W, MPI_STATUS_IGNORE); /* 2 posts first */
            MT_CHECK(MPI_Win_post(g, 0, win) == MPI_SUCCESS, "MPI_Win_post failed");
            if (mt_rank == 2) MPI_Send(&go, 1, MPI_CHAR, 0, 11, W);
            MPI_Send(&go, 1, MPI_CHAR, origin, 10, W);
            MT_CHECK(MPI_Win_wait(win) == MPI_SUCCESS, "MPI_Win_wait failed");
            MT_CHECK(mem[1] == 90 + mt_rank, "rank %d's window holds %d", mt_rank, mem[1]);
            MPI_Group_free(&g);
        }
    }

    MPI_Win_free(&win);
    free(mem);
    MPI_Group_free(&world);
    return mt_finalize();
}
