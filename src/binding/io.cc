// MPI-IO takes host memory only, and keeps the progress rule (DESIGN 2.6).
//
// Buffers: ROMIO reads and writes the user's buffer as host memory, so a device buffer
// (a cl_mem handle, a CUDA pointer) was written to the file as the bytes of a driver
// object or faulted. Every call with a (buf, count, datatype) triple now checks it
// first: a type tagged with a device MPIX_ACC_BUF_TYPE, or CUDA memory found by pointer
// query, gets MPI_ERR_UNSUPPORTED_OPERATION through the file's error handler (MPI-IO's
// default is MPI_ERRORS_RETURN), naming the call and the argument, and the file and the
// file pointers are left as they were.
//
// Progress: the collective calls block in MPICH until every member of the file's
// communicator is in them. A member with a transfer in flight would sit there while its
// receiver, not yet in the call, waits in MPI_Recv for the data. So each collective call
// first meets the members in a nonblocking barrier with MPI-ACC progress
// (communicator.cc explains why that suffices), on a private duplicate of the file's
// communicator made at MPI_File_open (the user may free theirs). Every time, on every
// member, so all make the same calls. Nonblocking I/O (MPI_File_iwrite_all, ...) is
// driven by the completion calls like any MPICH request.
//
// The wrappers are generated (maint/gen-io.py, io_wrappers.inc); open and close are here.
#include "binding/binding.h"
#include "binding/meeting_comms.h"

using namespace mpiacc;

namespace {

constexpr const char *kRefusal = "MPI-IO on device buffers is not supported yet";

// Files' meeting communicators.
MeetingComms<MPI_File> files;

// MPI_SUCCESS, or the error raised on fh for the buffer argument.
int io_require_host(const char *call, MPI_File fh, const void *buf, MPI_Datatype type) {
    if (only_host_buffers(context())) return MPI_SUCCESS;
    std::string why;
    int rc = require_host_buffer(buf, type, "buf", kRefusal, &why);
    if (rc == MPI_SUCCESS) return rc;
    int code = make_error_code(rc, call, why);
    call_file_errhandler(fh, code);
    return code;
}

// Meets the members of fh's communicator, reporting a failure on fh.
int io_meet(const char *call, MPI_File fh) {
    int rc = files.meet(fh);
    if (rc == MPI_SUCCESS) return rc;
    int code = make_error_code(rc, call, "meeting the file's processes before the collective call failed");
    call_file_errhandler(fh, code);
    return code;
}

}  // namespace

#define MPIACC_IO_ENTRY(passthrough) \
    if (!context().initialized) return passthrough
#define MPIACC_IO_HOST(call, fh, buf, type)             \
    do {                                                \
        int rc_ = io_require_host(call, fh, buf, type); \
        if (rc_ != MPI_SUCCESS) return rc_;             \
    } while (0)
#define MPIACC_IO_MEET(call, fh)            \
    do {                                    \
        int rc_ = io_meet(call, fh);        \
        if (rc_ != MPI_SUCCESS) return rc_; \
    } while (0)

extern "C" {

int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh) {
    return files.create(comm, fh, [&] { return PMPI_File_open(comm, filename, amode, info, fh); });
}

int MPI_File_close(MPI_File *fh) {
    return files.destroy(fh, [&] { return PMPI_File_close(fh); });
}

#include "binding/io_wrappers.inc"

}  // extern "C"
