/* MPI-IO takes host memory only: every read or write call with a typed buffer of a device
 * kind gets MPI_ERR_UNSUPPORTED_OPERATION through the file's error handler (MPI-IO's
 * default, MPI_ERRORS_RETURN), naming the call and the argument, before ROMIO touches the
 * buffer or the file. The file stays empty and its pointers where they were, and host I/O
 * works afterwards with tagged types about. A cl_mem gets the same where OpenCL is usable.
 * MPIACC-TEST-RANKS: 2 */
#include <unistd.h>

#include "opencl_util.h"

#define W MPI_COMM_WORLD

static char path[256];

/* Rank 0 names a fresh file for the job; every rank opens it (deleted on close). */
static MPI_File open_scratch(void) {
    if (mt_rank == 0) snprintf(path, sizeof path, "/tmp/mpiacc-io-device-buffers.%ld", (long)getpid());
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, W);
    MPI_File fh = MPI_FILE_NULL;
    int rc = MPI_File_open(W, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    MT_CHECK(rc == MPI_SUCCESS, "MPI_File_open(%s) failed (%d)", path, rc);
    return fh;
}

/* Each I/O call with the buffer `buf` described by `t`; both ranks make the same calls,
 * so the collective ones are refused on every member. */
static void refuse_all(MPI_File fh, void *buf, MPI_Datatype t, const char *cause) {
    MPI_Status st;
    MPI_Request q = MPI_REQUEST_NULL;
    const MPI_Offset at = 8 * mt_rank;
    P2P_CHECK_UNSUPPORTED(MPI_File_write(fh, buf, 8, t, &st), "MPI_File_write", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_write_at(fh, at, buf, 8, t, &st), "MPI_File_write_at", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_write_all(fh, buf, 8, t, &st), "MPI_File_write_all", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_write_at_all(fh, at, buf, 8, t, &st), "MPI_File_write_at_all", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_write_shared(fh, buf, 8, t, &st), "MPI_File_write_shared", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_write_ordered(fh, buf, 8, t, &st), "MPI_File_write_ordered", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_write_all_begin(fh, buf, 8, t), "MPI_File_write_all_begin", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_iwrite(fh, buf, 8, t, &q), "MPI_File_iwrite", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_iwrite_all(fh, buf, 8, t, &q), "MPI_File_iwrite_all", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_write_c(fh, buf, 8, t, &st), "MPI_File_write_c", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_read(fh, buf, 8, t, &st), "MPI_File_read", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_read_at_all(fh, at, buf, 8, t, &st), "MPI_File_read_at_all", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_iread_at(fh, at, buf, 8, t, &q), "MPI_File_iread_at", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_read_ordered_begin(fh, buf, 8, t), "MPI_File_read_ordered_begin", "buf", cause);
    P2P_CHECK_UNSUPPORTED(MPI_File_iread_all_c(fh, buf, 8, t, &q), "MPI_File_iread_all_c", "buf", cause);
    MT_CHECK(q == MPI_REQUEST_NULL, "a refused nonblocking call set its request");
    MPI_Offset size = -1, pos = -1, shared = -1;
    MPI_File_get_size(fh, &size);
    MPI_File_get_position(fh, &pos);
    MPI_File_get_position_shared(fh, &shared);
    MT_CHECK(size == 0 && pos == 0 && shared == 0, "after the refusals: size %lld, position %lld, shared %lld",
             (long long)size, (long long)pos, (long long)shared);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Datatype cuda_t;
    MPI_Type_dup(MPI_BYTE, &cuda_t);
    MPI_Type_set_attr(cuda_t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_CUDA);
    unsigned char host[64];
    mt_fill(host, sizeof host, 9200);
    MPI_File fh = open_scratch();

    /* Without a usable CUDA device the buffer is refused all the same (the tag says CUDA). */
    MT_CASE("io_calls_refuse_cuda_tagged_buffers") { refuse_all(fh, host, cuda_t, NULL); }

    MT_CASE("host_io_works_after_the_refusals_with_tagged_types_about") {
        int mine[4], all[8] = {0};
        for (int i = 0; i < 4; ++i) mine[i] = 100 * mt_rank + i;
        MPI_Status st;
        MT_CHECK(MPI_File_write_at_all(fh, 16 * mt_rank, mine, 4, MPI_INT, &st) == MPI_SUCCESS,
                 "MPI_File_write_at_all of 4 ints failed");
        MT_CHECK(MPI_File_sync(fh) == MPI_SUCCESS, "MPI_File_sync failed");
        MPI_Barrier(W);
        MT_CHECK(MPI_File_read_at_all(fh, 0, all, 8, MPI_INT, &st) == MPI_SUCCESS, "MPI_File_read_at_all failed");
        for (int r = 0; r < 2; ++r)
            for (int i = 0; i < 4; ++i)
                MT_CHECK(all[4 * r + i] == 100 * r + i, "int %d of the file is %d, not %d", 4 * r + i, all[4 * r + i],
                         100 * r + i);
        MPI_Offset size = -1;
        MPI_File_get_size(fh, &size);
        MT_CHECK(size == 32, "the file has %lld bytes, not 32", (long long)size);
    }
    MPI_File_close(&fh);

    static const char *cl_case = "io_calls_refuse_cl_mem_buffers";
    ocl_env e;
    if (ocl_setup_for_case(&e, cl_case)) {
        MT_CASE(cl_case) {
            MPI_File f = open_scratch();
            cl_mem m = ocl_alloc(&e, 64);
            MPI_Datatype t = ocl_type(&e);
            refuse_all(f, (void *)m, t, "MPI-IO on device buffers is not supported");
            MPI_Type_free(&t);
            clReleaseMemObject(m);
            MPI_File_close(&f);
        }
    }
    ocl_teardown(&e);
    MPI_Type_free(&cuda_t);
    return mt_finalize();
}
