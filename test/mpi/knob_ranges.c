/* Knob values outside their range (MPIACC_CHUNK_SIZE=0 once broke every pipeline
 * transfer, a negative depth was taken silently): MPI_Init reports each one on stderr,
 * once, from rank 0, with the knob, the value, the range and the default in effect; the
 * defaults then carry the traffic. The OpenCL case runs on PoCL in CI.
 * MPIACC-TEST-RANKS: 2 */
#include <unistd.h>

#include "opencl_util.h"

/* The text MPI_Init wrote to stderr, captured in a file of this process. */
static char init_stderr[8192];

static void init_capturing_stderr(int *argc, char ***argv) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/mpiacc-knob-ranges-%ld.err", (long)getpid());
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w+");
    if (f) dup2(fileno(f), 2);
    MT_INIT(argc, argv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    if (f) {
        rewind(f);
        size_t n = fread(init_stderr, 1, sizeof init_stderr - 1, f);
        init_stderr[n] = '\0';
        fclose(f);
        unlink(path);
    }
}

static int lines_with(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) ++n;
    return n;
}

int main(int argc, char **argv) {
    setenv("MPIACC_CHUNK_SIZE", "0", 1);
    setenv("MPIACC_PIPELINE_DEPTH", "-5", 1);
    setenv("MPIACC_POOL_SIZE", "1", 1);
    setenv("MPIACC_PIPELINE_TRANSFERS", "lots", 1);
    init_capturing_stderr(&argc, &argv);

    MT_CASE("knob_out_of_range_is_reported_once_at_init_with_range_and_default") {
        static const char *const want[] = {
            "MPI-ACC warning: MPIACC_CHUNK_SIZE=0 is outside its range 4K..64M; using the default 2M\n",
            "MPI-ACC warning: MPIACC_PIPELINE_DEPTH=-5 is outside its range 2..64; using the default 4\n",
            "MPI-ACC warning: MPIACC_POOL_SIZE=1 is outside its range 1M..64G; using the default 64M\n",
            "MPI-ACC warning: MPIACC_PIPELINE_TRANSFERS=lots is not a valid INT (range 0..1024); using the default 3\n",
        };
        for (int i = 0; i < 4; ++i) {
            int n = lines_with(init_stderr, want[i]);
            MT_CHECK(n == (mt_rank == 0 ? 1 : 0), "'%.*s' appears %d times on rank %d's stderr:\n%s",
                     (int)strlen(want[i]) - 1, want[i], n, mt_rank, init_stderr);
        }
    }
    MT_CASE("knob_out_of_range_leaves_the_default_in_effect") {
        MT_CHECK(mpiacc_knob_value("MPIACC_CHUNK_SIZE") == 2 << 20, "chunk size %lld",
                 mpiacc_knob_value("MPIACC_CHUNK_SIZE"));
        MT_CHECK(mpiacc_knob_value("MPIACC_PIPELINE_DEPTH") == 4, "depth %lld",
                 mpiacc_knob_value("MPIACC_PIPELINE_DEPTH"));
        MT_CHECK(mpiacc_knob_value("MPIACC_POOL_SIZE") == 64 << 20, "pool %lld", mpiacc_knob_value("MPIACC_POOL_SIZE"));
        MT_CHECK(mpiacc_knob_value("MPIACC_PIPELINE_TRANSFERS") == 3, "transfers %lld",
                 mpiacc_knob_value("MPIACC_PIPELINE_TRANSFERS"));
    }

    const char *device_case = "opencl_pipeline_of_5_mib_arrives_intact_after_out_of_range_knobs";
    ocl_env e = ocl_setup();
    if (!ocl_all_ok(&e)) {
        mt_skip(device_case, "no usable OpenCL platform");
    } else {
        MT_CASE(device_case) {
            const size_t n = (size_t)5 << 20; /* three chunks of the default size */
            unsigned char *h = p2p_alloc(n);
            cl_mem m = ocl_alloc(&e, n);
            MPI_Datatype t = ocl_type(&e);
            if (mt_rank == 0) {
                mt_fill(h, n, 77);
                ocl_write(&e, m, 0, h, n);
                int rc = MPI_Send(m, (int)n, t, 1, 7, MPI_COMM_WORLD);
                MT_CHECK(rc == MPI_SUCCESS, "MPI_Send returned %d", rc);
            } else {
                MPI_Status st;
                int rc = MPI_Recv(m, (int)n, t, 0, 7, MPI_COMM_WORLD, &st);
                MT_CHECK(rc == MPI_SUCCESS, "MPI_Recv returned %d", rc);
                MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "count %d", p2p_count(&st, MPI_BYTE));
                memset(h, 0, n);
                ocl_read(&e, m, 0, h, n);
                P2P_CHECK_BYTES(h, n, 77, "cl_mem payload");
            }
            MPI_Type_free(&t);
            clReleaseMemObject(m);
            free(h);
        }
    }
    ocl_teardown(&e);
    return mt_finalize();
}
