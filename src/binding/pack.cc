// MPI_Pack and MPI_Unpack (with their external and large-count forms). The typed buffer
// may be on a device (pack_device.cc): its elements are packed there, straight into
// packed bytes on the same device where the kind can (DeviceBuffer::pack_to_device).
// Other packed bytes found to be CUDA memory (pointer query) are packed in host memory and
// copied, both ways.
// Errors go to the communicator's handler, MPI_COMM_WORLD's for the external forms, as
// MPICH's own.
#include <climits>
#include <vector>

#include "binding/binding.h"
#include "binding/pack_device.h"

using namespace mpiacc;

namespace {

bool nothing_to_check() {
    const Context &ctx = context();
    return !ctx.initialized || only_host_buffers(ctx);
}

// The packed bytes of a call: its output (a pack) or its input (an unpack); `native`
// for MPI_Pack and MPI_Unpack, whose packed form the device kernels write and read.
struct Packed {
    void *bytes;
    MPI_Count size;
    const char *arg;
    bool is_output;
    bool native;
};

// One pack call. `direct` is MPICH's own call as the user made it; `host` runs it for host
// typed data against a packed buffer and position of ours; `device` packs a device
// buffer's elements (captured in mb) there; `need` is how many packed bytes the elements
// take in the call's representation.
template <typename Pos, typename Direct, typename Host, typename Device, typename Need>
int pack_call(const void *typed, MPI_Count count, MPI_Datatype type, const char *typed_arg, Packed packed,
              Pos *position, MPI_Comm comm, const char *call, Direct direct, Host host, Device device, Need need) {
    if (nothing_to_check()) return direct();
    MessageBuffer mb;
    bool typed_on_device = false;
    std::string why;
    int rc = classify_typed(typed, count, type, typed_arg, &mb, &typed_on_device, &why);
    BufferAttrs battrs;
    if (rc == MPI_SUCCESS && context().autodetect_active) {
        rc = classify_buffer(packed.bytes, MPI_BYTE, &battrs, &why, packed.arg);
        if (rc != MPI_SUCCESS && why.rfind(std::string(packed.arg) + ": ", 0) != 0)
            why = std::string(packed.arg) + ": " + why;
    }
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    const bool packed_on_device = battrs.kind != BufKind::HOST;
    if (!typed_on_device && !packed_on_device) return direct();
    MPI_Count pos = static_cast<MPI_Count>(*position);
    if (!packed_on_device) {
        rc = device(mb, packed.bytes, packed.size, &pos, &why);
        if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
        *position = static_cast<Pos>(pos);
        return MPI_SUCCESS;
    }
    // Packed bytes on the device: the call runs against a host copy of them.
    const MPI_Count n = need();
    if (pos < 0 || n < 0 || packed.size - pos < n || n > INT_MAX) {
        why = format("%s: %lld bytes from position %lld %s the %lld packed bytes", packed.arg,
                     static_cast<long long>(packed.size - pos), static_cast<long long>(pos),
                     packed.is_output ? "cannot hold" : "do not hold", static_cast<long long>(n));
        return raise_error(comm, n > INT_MAX ? MPI_ERR_UNSUPPORTED_OPERATION : MPI_ERR_TRUNCATE, call, why);
    }
    battrs.within_call = true;
    MessageBuffer pb;
    rc = make_message_buffer(static_cast<char *>(packed.bytes) + pos, static_cast<int>(n), MPI_BYTE, battrs, &pb, &why);
    if (rc == MPI_SUCCESS && typed_on_device && packed.native && n > 0) {
        // Both on one device: the kernels pack straight into the packed bytes (or unpack
        // from them), with no host copy in between.
        rc = move_packed_on_device(mb, pb, packed.is_output, &why);
        if (rc == MPI_SUCCESS) {
            *position = static_cast<Pos>(pos + n);
            return MPI_SUCCESS;
        }
        if (rc != MPI_ERR_UNSUPPORTED_OPERATION) return raise_error(comm, rc, call, why);
        rc = MPI_SUCCESS;
    }
    std::vector<char> copy(static_cast<std::size_t>(n) + 1);
    if (rc == MPI_SUCCESS && !packed.is_output)
        rc = copy_out_of_device(pb, copy.data(), static_cast<std::size_t>(n), call, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, std::string(packed.arg) + ": " + why);
    MPI_Count moved = 0;
    if (typed_on_device) {
        rc = device(mb, copy.data(), n, &moved, &why);
        if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    } else {
        rc = host(copy.data(), n, &moved);
        if (rc != MPI_SUCCESS) return rc;  // MPICH raised it
    }
    if (packed.is_output) {
        rc = copy_into_device(pb, copy.data(), static_cast<std::size_t>(moved), &why);
        if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    }
    *position = static_cast<Pos>(pos + moved);
    return MPI_SUCCESS;
}

MPI_Count native_bytes(MPI_Count count, MPI_Datatype type) {
    MPI_Count size = 0;
    PMPI_Type_size_c(type, &size);
    return size * count;
}

MPI_Count external_bytes(const char *datarep, MPI_Count count, MPI_Datatype type) {
    MPI_Count size = 0;
    return PMPI_Pack_external_size_c(datarep, count, type, &size) == MPI_SUCCESS ? size : -1;
}

}  // namespace

extern "C" {

int MPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize, int *position,
             MPI_Comm comm) {
    return pack_call(
        inbuf, incount, datatype, "inbuf", Packed{outbuf, outsize, "outbuf", true, true}, position, comm, "MPI_Pack",
        [&] { return PMPI_Pack(inbuf, incount, datatype, outbuf, outsize, position, comm); },
        [&](void *out, MPI_Count size, MPI_Count *pos) {
            int p = static_cast<int>(*pos);
            int rc = PMPI_Pack(inbuf, incount, datatype, out, static_cast<int>(size), &p, comm);
            *pos = p;
            return rc;
        },
        [&](MessageBuffer &mb, void *out, MPI_Count size, MPI_Count *pos, std::string *why) {
            return pack_device(mb, out, size, pos, "MPI_Pack", why);
        },
        [&] { return native_bytes(incount, datatype); });
}
int MPI_Pack_c(const void *inbuf, MPI_Count incount, MPI_Datatype datatype, void *outbuf, MPI_Count outsize,
               MPI_Count *position, MPI_Comm comm) {
    return pack_call(
        inbuf, incount, datatype, "inbuf", Packed{outbuf, outsize, "outbuf", true, true}, position, comm, "MPI_Pack_c",
        [&] { return PMPI_Pack_c(inbuf, incount, datatype, outbuf, outsize, position, comm); },
        [&](void *out, MPI_Count size, MPI_Count *pos) {
            return PMPI_Pack_c(inbuf, incount, datatype, out, size, pos, comm);
        },
        [&](MessageBuffer &mb, void *out, MPI_Count size, MPI_Count *pos, std::string *why) {
            return pack_device(mb, out, size, pos, "MPI_Pack_c", why);
        },
        [&] { return native_bytes(incount, datatype); });
}
int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount, MPI_Datatype datatype,
               MPI_Comm comm) {
    return pack_call(
        outbuf, outcount, datatype, "outbuf", Packed{const_cast<void *>(inbuf), insize, "inbuf", false, true}, position,
        comm, "MPI_Unpack", [&] { return PMPI_Unpack(inbuf, insize, position, outbuf, outcount, datatype, comm); },
        [&](void *in, MPI_Count size, MPI_Count *pos) {
            int p = static_cast<int>(*pos);
            int rc = PMPI_Unpack(in, static_cast<int>(size), &p, outbuf, outcount, datatype, comm);
            *pos = p;
            return rc;
        },
        [&](MessageBuffer &mb, void *in, MPI_Count size, MPI_Count *pos, std::string *why) {
            return unpack_device(in, size, pos, mb, why);
        },
        [&] { return native_bytes(outcount, datatype); });
}
int MPI_Unpack_c(const void *inbuf, MPI_Count insize, MPI_Count *position, void *outbuf, MPI_Count outcount,
                 MPI_Datatype datatype, MPI_Comm comm) {
    return pack_call(
        outbuf, outcount, datatype, "outbuf", Packed{const_cast<void *>(inbuf), insize, "inbuf", false, true}, position,
        comm, "MPI_Unpack_c", [&] { return PMPI_Unpack_c(inbuf, insize, position, outbuf, outcount, datatype, comm); },
        [&](void *in, MPI_Count size, MPI_Count *pos) {
            return PMPI_Unpack_c(in, size, pos, outbuf, outcount, datatype, comm);
        },
        [&](MessageBuffer &mb, void *in, MPI_Count size, MPI_Count *pos, std::string *why) {
            return unpack_device(in, size, pos, mb, why);
        },
        [&] { return native_bytes(outcount, datatype); });
}
int MPI_Pack_external(const char *datarep, const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf,
                      MPI_Aint outsize, MPI_Aint *position) {
    return pack_call(
        inbuf, incount, datatype, "inbuf", Packed{outbuf, outsize, "outbuf", true, false}, position, MPI_COMM_WORLD,
        "MPI_Pack_external",
        [&] { return PMPI_Pack_external(datarep, inbuf, incount, datatype, outbuf, outsize, position); },
        [&](void *out, MPI_Count size, MPI_Count *pos) {
            return PMPI_Pack_external_c(datarep, inbuf, incount, datatype, out, size, pos);
        },
        [&](MessageBuffer &mb, void *out, MPI_Count size, MPI_Count *pos, std::string *why) {
            return pack_external_device(datarep, mb, incount, datatype, out, size, pos, "MPI_Pack_external", why);
        },
        [&] { return external_bytes(datarep, incount, datatype); });
}
int MPI_Pack_external_c(const char *datarep, const void *inbuf, MPI_Count incount, MPI_Datatype datatype, void *outbuf,
                        MPI_Count outsize, MPI_Count *position) {
    return pack_call(
        inbuf, incount, datatype, "inbuf", Packed{outbuf, outsize, "outbuf", true, false}, position, MPI_COMM_WORLD,
        "MPI_Pack_external_c",
        [&] { return PMPI_Pack_external_c(datarep, inbuf, incount, datatype, outbuf, outsize, position); },
        [&](void *out, MPI_Count size, MPI_Count *pos) {
            return PMPI_Pack_external_c(datarep, inbuf, incount, datatype, out, size, pos);
        },
        [&](MessageBuffer &mb, void *out, MPI_Count size, MPI_Count *pos, std::string *why) {
            return pack_external_device(datarep, mb, incount, datatype, out, size, pos, "MPI_Pack_external_c", why);
        },
        [&] { return external_bytes(datarep, incount, datatype); });
}
int MPI_Unpack_external(const char datarep[], const void *inbuf, MPI_Aint insize, MPI_Aint *position, void *outbuf,
                        int outcount, MPI_Datatype datatype) {
    return pack_call(
        outbuf, outcount, datatype, "outbuf", Packed{const_cast<void *>(inbuf), insize, "inbuf", false, false},
        position, MPI_COMM_WORLD, "MPI_Unpack_external",
        [&] { return PMPI_Unpack_external(datarep, inbuf, insize, position, outbuf, outcount, datatype); },
        [&](void *in, MPI_Count size, MPI_Count *pos) {
            return PMPI_Unpack_external_c(datarep, in, size, pos, outbuf, outcount, datatype);
        },
        [&](MessageBuffer &mb, void *in, MPI_Count size, MPI_Count *pos, std::string *why) {
            return unpack_external_device(datarep, in, size, pos, mb, outcount, datatype, why);
        },
        [&] { return external_bytes(datarep, outcount, datatype); });
}
int MPI_Unpack_external_c(const char datarep[], const void *inbuf, MPI_Count insize, MPI_Count *position, void *outbuf,
                          MPI_Count outcount, MPI_Datatype datatype) {
    return pack_call(
        outbuf, outcount, datatype, "outbuf", Packed{const_cast<void *>(inbuf), insize, "inbuf", false, false},
        position, MPI_COMM_WORLD, "MPI_Unpack_external_c",
        [&] { return PMPI_Unpack_external_c(datarep, inbuf, insize, position, outbuf, outcount, datatype); },
        [&](void *in, MPI_Count size, MPI_Count *pos) {
            return PMPI_Unpack_external_c(datarep, in, size, pos, outbuf, outcount, datatype);
        },
        [&](MessageBuffer &mb, void *in, MPI_Count size, MPI_Count *pos, std::string *why) {
            return unpack_external_device(datarep, in, size, pos, mb, outcount, datatype, why);
        },
        [&] { return external_bytes(datarep, outcount, datatype); });
}

}  // extern "C"
