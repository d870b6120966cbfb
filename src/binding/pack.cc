// MPI_Pack and MPI_Unpack (with their external and large-count forms). The typed buffer
// may be on a device (pack_device.cc): its elements are packed there. The packed bytes
// must be host memory: packed bytes found to be CUDA memory are refused. Errors go to the
// communicator's handler, MPI_COMM_WORLD's for the external forms, as MPICH's own.
#include "binding/binding.h"
#include "binding/pack_device.h"

using namespace mpiacc;

namespace {

constexpr const char *kRefusal = "packing into or out of device memory is not supported yet";

bool nothing_to_check() {
    const Context &ctx = context();
    return !ctx.initialized || only_host_buffers(ctx);
}

// MPI_SUCCESS, or why the packed bytes (argument `arg`) cannot be used: only pointer
// query can find them to be device memory.
int require_host_bytes(const void *bytes, const char *arg, std::string *why) {
    if (!context().autodetect_active) return MPI_SUCCESS;
    return require_host_buffer(bytes, MPI_BYTE, arg, kRefusal, why);
}

// One pack call: `host` is MPICH's own for host data; `device` packs a device buffer's
// elements (captured in mb) and moves the position it is given.
template <typename Pos, typename Host, typename Device>
int pack_call(const void *typed, MPI_Count count, MPI_Datatype type, const char *typed_arg, const void *bytes,
              const char *bytes_arg, Pos *position, MPI_Comm comm, const char *call, Host host, Device device) {
    if (nothing_to_check()) return host();
    MessageBuffer mb;
    bool on_device = false;
    std::string why;
    int rc = classify_typed(typed, count, type, typed_arg, &mb, &on_device, &why);
    if (rc == MPI_SUCCESS) rc = require_host_bytes(bytes, bytes_arg, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    if (!on_device) return host();
    MPI_Count pos = static_cast<MPI_Count>(*position);
    rc = device(mb, &pos, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    *position = static_cast<Pos>(pos);
    return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int MPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize, int *position,
             MPI_Comm comm) {
    return pack_call(
        inbuf, incount, datatype, "inbuf", outbuf, "outbuf", position, comm, "MPI_Pack",
        [&] { return PMPI_Pack(inbuf, incount, datatype, outbuf, outsize, position, comm); },
        [&](MessageBuffer &mb, MPI_Count *pos, std::string *why) {
            return pack_device(mb, outbuf, outsize, pos, "MPI_Pack", why);
        });
}
int MPI_Pack_c(const void *inbuf, MPI_Count incount, MPI_Datatype datatype, void *outbuf, MPI_Count outsize,
               MPI_Count *position, MPI_Comm comm) {
    return pack_call(
        inbuf, incount, datatype, "inbuf", outbuf, "outbuf", position, comm, "MPI_Pack_c",
        [&] { return PMPI_Pack_c(inbuf, incount, datatype, outbuf, outsize, position, comm); },
        [&](MessageBuffer &mb, MPI_Count *pos, std::string *why) {
            return pack_device(mb, outbuf, outsize, pos, "MPI_Pack_c", why);
        });
}
int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount, MPI_Datatype datatype,
               MPI_Comm comm) {
    return pack_call(
        outbuf, outcount, datatype, "outbuf", inbuf, "inbuf", position, comm, "MPI_Unpack",
        [&] { return PMPI_Unpack(inbuf, insize, position, outbuf, outcount, datatype, comm); },
        [&](MessageBuffer &mb, MPI_Count *pos, std::string *why) {
            return unpack_device(inbuf, insize, pos, mb, why);
        });
}
int MPI_Unpack_c(const void *inbuf, MPI_Count insize, MPI_Count *position, void *outbuf, MPI_Count outcount,
                 MPI_Datatype datatype, MPI_Comm comm) {
    return pack_call(
        outbuf, outcount, datatype, "outbuf", inbuf, "inbuf", position, comm, "MPI_Unpack_c",
        [&] { return PMPI_Unpack_c(inbuf, insize, position, outbuf, outcount, datatype, comm); },
        [&](MessageBuffer &mb, MPI_Count *pos, std::string *why) {
            return unpack_device(inbuf, insize, pos, mb, why);
        });
}
int MPI_Pack_external(const char *datarep, const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf,
                      MPI_Aint outsize, MPI_Aint *position) {
    return pack_call(
        inbuf, incount, datatype, "inbuf", outbuf, "outbuf", position, MPI_COMM_WORLD, "MPI_Pack_external",
        [&] { return PMPI_Pack_external(datarep, inbuf, incount, datatype, outbuf, outsize, position); },
        [&](MessageBuffer &mb, MPI_Count *pos, std::string *why) {
            return pack_external_device(datarep, mb, incount, datatype, outbuf, outsize, pos, "MPI_Pack_external", why);
        });
}
int MPI_Pack_external_c(const char *datarep, const void *inbuf, MPI_Count incount, MPI_Datatype datatype, void *outbuf,
                        MPI_Count outsize, MPI_Count *position) {
    return pack_call(
        inbuf, incount, datatype, "inbuf", outbuf, "outbuf", position, MPI_COMM_WORLD, "MPI_Pack_external_c",
        [&] { return PMPI_Pack_external_c(datarep, inbuf, incount, datatype, outbuf, outsize, position); },
        [&](MessageBuffer &mb, MPI_Count *pos, std::string *why) {
            return pack_external_device(datarep, mb, incount, datatype, outbuf, outsize, pos, "MPI_Pack_external_c",
                                        why);
        });
}
int MPI_Unpack_external(const char datarep[], const void *inbuf, MPI_Aint insize, MPI_Aint *position, void *outbuf,
                        int outcount, MPI_Datatype datatype) {
    return pack_call(
        outbuf, outcount, datatype, "outbuf", inbuf, "inbuf", position, MPI_COMM_WORLD, "MPI_Unpack_external",
        [&] { return PMPI_Unpack_external(datarep, inbuf, insize, position, outbuf, outcount, datatype); },
        [&](MessageBuffer &mb, MPI_Count *pos, std::string *why) {
            return unpack_external_device(datarep, inbuf, insize, pos, mb, outcount, datatype, why);
        });
}
int MPI_Unpack_external_c(const char datarep[], const void *inbuf, MPI_Count insize, MPI_Count *position, void *outbuf,
                          MPI_Count outcount, MPI_Datatype datatype) {
    return pack_call(
        outbuf, outcount, datatype, "outbuf", inbuf, "inbuf", position, MPI_COMM_WORLD, "MPI_Unpack_external_c",
        [&] { return PMPI_Unpack_external_c(datarep, inbuf, insize, position, outbuf, outcount, datatype); },
        [&](MessageBuffer &mb, MPI_Count *pos, std::string *why) {
            return unpack_external_device(datarep, inbuf, insize, pos, mb, outcount, datatype, why);
        });
}

}  // extern "C"
