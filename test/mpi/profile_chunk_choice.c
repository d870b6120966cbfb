/* Two ranks with different tuning profiles (MPIACC_PROFILE, in mpiacc-tune's format)
 * settle on one chunk size: each sender proposes its profile's in the RTS, and the
 * receiver takes the smaller of both (BRIEF P4). The chunk counters of both sides show
 * the size used, and the bytes arrive intact. A cl_mem goes to a cl_mem by the pipeline
 * (PoCL in CI); without OpenCL the transfer cases skip.
 * MPIACC-TEST-RANKS: 2 */
#include <unistd.h>

#include "opencl_util.h"

static const char *cases[] = {
    "each_rank_takes_chunk_and_depth_from_its_own_profile",
    "a_receiver_with_the_smaller_profile_chunk_makes_the_sender_use_it",
    "a_sender_with_the_smaller_profile_chunk_keeps_it_with_a_larger_receiver",
};
enum { NCASES = sizeof cases / sizeof cases[0] };

enum { SMALL_CHUNK = 64 << 10, LARGE_CHUNK = 256 << 10, DEPTH = 3 };
static const size_t bytes = (1u << 20) + 5; /* 17 chunks of 64 KiB, 5 of 256 KiB */

static char profile_path[512];

/* Rank 0's profile proposes the small chunk, rank 1's the large one. Written before
 * MPI_Init reads the knobs, so the rank comes from Hydra's environment. */
static void write_profile(void) {
    const char *r = getenv("PMI_RANK");
    const int rank = r ? atoi(r) : 0;
    const char *dir = getenv("TMPDIR");
    snprintf(profile_path, sizeof profile_path, "%s/mpiacc-profile-choice-%d-%d.txt", dir && *dir ? dir : "/tmp",
             (int)getpid(), rank);
    FILE *f = fopen(profile_path, "w");
    if (!f) {
        perror(profile_path);
        exit(1);
    }
    fprintf(f, "version = 1\nmachine = test\naccelerator = opencl\ndate = 2026-01-01T00:00:00Z\n");
    fprintf(f, "chunk_size = %d\npipeline_depth = %d\n", rank == 0 ? SMALL_CHUNK : LARGE_CHUNK, DEPTH);
    fclose(f);
    setenv("MPIACC_PROFILE", profile_path, 1);
    unsetenv("MPIACC_CHUNK_SIZE");
    unsetenv("MPIACC_PIPELINE_DEPTH");
}

/* Sends `bytes` from a cl_mem of `from` to a cl_mem of `to`, and checks the chunk count
 * each side saw and the bytes that arrived. */
static void transfer(ocl_env *e, MPI_Datatype t, int from, int to, int tag) {
    const size_t expected = (bytes + SMALL_CHUNK - 1) / SMALL_CHUNK;
    const uint64_t seed = p2p_seed(tag, from, 0);
    unsigned char *h = p2p_alloc(bytes);
    cl_mem m = ocl_alloc(e, bytes);
    const long long sent0 = mpiacc_counter_value("protocol.send.chunks");
    const long long landed0 = mpiacc_counter_value("protocol.recv.chunks");
    if (mt_rank == from) {
        mt_fill(h, bytes, seed);
        ocl_write(e, m, 0, h, bytes);
        MT_CHECK(MPI_Send(m, (int)bytes, t, to, tag, MPI_COMM_WORLD) == MPI_SUCCESS, "send");
        const long long sent = mpiacc_counter_value("protocol.send.chunks") - sent0;
        MT_CHECK(sent == (long long)expected, "the sender sent %lld chunks, expected %zu of %d bytes", sent, expected,
                 SMALL_CHUNK);
    } else if (mt_rank == to) {
        ocl_fill(e, m, bytes, 0xee);
        MPI_Status st;
        MT_CHECK(MPI_Recv(m, (int)bytes, t, from, tag, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "recv");
        MT_CHECK(p2p_count(&st, t) == (int)bytes, "count %d, expected %zu", p2p_count(&st, t), bytes);
        const long long landed = mpiacc_counter_value("protocol.recv.chunks") - landed0;
        MT_CHECK(landed == (long long)expected, "the receiver landed %lld chunks, expected %zu of %d bytes", landed,
                 expected, SMALL_CHUNK);
        ocl_read(e, m, 0, h, bytes);
        P2P_CHECK_BYTES(h, bytes, seed, "received");
    }
    clReleaseMemObject(m);
    free(h);
}

int main(int argc, char **argv) {
    write_profile();
    MT_INIT(&argc, &argv);
    remove(profile_path); /* read at MPI_Init */

    MT_CASE(cases[0]) {
        const long long mine = mt_rank == 0 ? SMALL_CHUNK : LARGE_CHUNK;
        MT_CHECK(mpiacc_knob_value("MPIACC_CHUNK_SIZE") == mine, "MPIACC_CHUNK_SIZE %lld, the profile's %lld",
                 mpiacc_knob_value("MPIACC_CHUNK_SIZE"), mine);
        MT_CHECK(mpiacc_knob_value("MPIACC_PIPELINE_DEPTH") == DEPTH, "MPIACC_PIPELINE_DEPTH %lld, the profile's %d",
                 mpiacc_knob_value("MPIACC_PIPELINE_DEPTH"), DEPTH);
    }

    ocl_env e = ocl_setup_or_skip(cases + 1, NCASES - 1);
    MPI_Datatype t = ocl_type(&e);
    MT_CASE(cases[1]) { transfer(&e, t, 1, 0, 10); }
    MT_CASE(cases[2]) { transfer(&e, t, 0, 1, 20); }
    MPI_Type_free(&t);
    ocl_teardown(&e);
    return mt_finalize();
}
