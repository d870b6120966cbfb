// MPI_Pack and MPI_Unpack (with their external and large-count forms) take host memory
// only: packing device data comes with derived datatypes on devices. Straight to MPICH, a
// tagged cl_mem or a CUDA pointer would be read or written as host memory.
// The typed buffer is refused when its type is tagged with a device kind or it is CUDA
// memory found by pointer query; the untyped one (the packed bytes) when it is CUDA
// memory. Errors go to the communicator's handler, MPI_COMM_WORLD's for the external
// forms, as MPICH's own.
#include "binding/binding.h"

using namespace mpiacc;

namespace {

constexpr const char *kRefusal = "packing device buffers is not supported yet";

bool nothing_to_check() {
    const Context &ctx = context();
    return !ctx.initialized || only_host_buffers(ctx);
}

// MPI_SUCCESS, or the error raised on comm: the typed buffer (typed_arg), then the packed
// bytes (bytes_arg), which only pointer query can find to be device memory.
int require_host(const void *typed, MPI_Datatype type, const char *typed_arg, const void *bytes, const char *bytes_arg,
                 MPI_Comm comm, const char *call) {
    std::string why;
    int rc = require_host_buffer(typed, type, typed_arg, kRefusal, &why);
    if (rc == MPI_SUCCESS && context().autodetect_active)
        rc = require_host_buffer(bytes, MPI_BYTE, bytes_arg, kRefusal, &why);
    return rc == MPI_SUCCESS ? rc : raise_error(comm, rc, call, why);
}

}  // namespace

// Returns `call`'s passthrough when there is nothing to check, or the check's error.
#define MPIACC_PACK(passthrough, typed, type, typed_arg, bytes, bytes_arg, comm, name) \
    do {                                                                               \
        if (nothing_to_check()) return passthrough;                                    \
        int rc_ = require_host(typed, type, typed_arg, bytes, bytes_arg, comm, name);  \
        if (rc_ != MPI_SUCCESS) return rc_;                                            \
        return passthrough;                                                            \
    } while (0)

extern "C" {

int MPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize, int *position,
             MPI_Comm comm) {
    MPIACC_PACK(PMPI_Pack(inbuf, incount, datatype, outbuf, outsize, position, comm), inbuf, datatype, "inbuf", outbuf,
                "outbuf", comm, "MPI_Pack");
}
int MPI_Pack_c(const void *inbuf, MPI_Count incount, MPI_Datatype datatype, void *outbuf, MPI_Count outsize,
               MPI_Count *position, MPI_Comm comm) {
    MPIACC_PACK(PMPI_Pack_c(inbuf, incount, datatype, outbuf, outsize, position, comm), inbuf, datatype, "inbuf",
                outbuf, "outbuf", comm, "MPI_Pack_c");
}
int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount, MPI_Datatype datatype,
               MPI_Comm comm) {
    MPIACC_PACK(PMPI_Unpack(inbuf, insize, position, outbuf, outcount, datatype, comm), outbuf, datatype, "outbuf",
                inbuf, "inbuf", comm, "MPI_Unpack");
}
int MPI_Unpack_c(const void *inbuf, MPI_Count insize, MPI_Count *position, void *outbuf, MPI_Count outcount,
                 MPI_Datatype datatype, MPI_Comm comm) {
    MPIACC_PACK(PMPI_Unpack_c(inbuf, insize, position, outbuf, outcount, datatype, comm), outbuf, datatype, "outbuf",
                inbuf, "inbuf", comm, "MPI_Unpack_c");
}
int MPI_Pack_external(const char *datarep, const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf,
                      MPI_Aint outsize, MPI_Aint *position) {
    MPIACC_PACK(PMPI_Pack_external(datarep, inbuf, incount, datatype, outbuf, outsize, position), inbuf, datatype,
                "inbuf", outbuf, "outbuf", MPI_COMM_WORLD, "MPI_Pack_external");
}
int MPI_Pack_external_c(const char *datarep, const void *inbuf, MPI_Count incount, MPI_Datatype datatype, void *outbuf,
                        MPI_Count outsize, MPI_Count *position) {
    MPIACC_PACK(PMPI_Pack_external_c(datarep, inbuf, incount, datatype, outbuf, outsize, position), inbuf, datatype,
                "inbuf", outbuf, "outbuf", MPI_COMM_WORLD, "MPI_Pack_external_c");
}
int MPI_Unpack_external(const char datarep[], const void *inbuf, MPI_Aint insize, MPI_Aint *position, void *outbuf,
                        int outcount, MPI_Datatype datatype) {
    MPIACC_PACK(PMPI_Unpack_external(datarep, inbuf, insize, position, outbuf, outcount, datatype), outbuf, datatype,
                "outbuf", inbuf, "inbuf", MPI_COMM_WORLD, "MPI_Unpack_external");
}
int MPI_Unpack_external_c(const char datarep[], const void *inbuf, MPI_Count insize, MPI_Count *position, void *outbuf,
                          MPI_Count outcount, MPI_Datatype datatype) {
    MPIACC_PACK(PMPI_Unpack_external_c(datarep, inbuf, insize, position, outbuf, outcount, datatype), outbuf, datatype,
                "outbuf", inbuf, "inbuf", MPI_COMM_WORLD, "MPI_Unpack_external_c");
}

}  // extern "C"
