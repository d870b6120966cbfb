// MPI_Pack, MPI_Unpack and their external forms with the typed buffer on a device: the
// accelerator's datatype packing (DeviceBuffer::pack_to_host / unpack_from_host) moves
// the packed stream between the device and host memory. They are blocking calls, so they
// wait for their own copies. The external forms convert on the host: the native packed
// stream is laid out in a host copy of the type's footprint, which MPICH then packs as
// external32 (and the reverse), so that only the type's own bytes are written on the
// device. The packed bytes here are host memory (pack.cc stages packed bytes in CUDA memory).
#include <climits>
#include <cstring>

#include "binding/binding.h"
#include "binding/pack_device.h"
#include "datatype/flat_type.h"
#include "protocol/typed_device.h"

namespace mpiacc {

namespace {

// The error raised for argument `arg` of `call`: messages of the message-buffer code name
// "buf", which here is `arg`.
std::string for_arg(const std::string &why, const char *arg) {
    if (why.rfind("buf: ", 0) == 0) return std::string(arg) + why.substr(3);
    if (why.rfind(std::string(arg) + ": ", 0) == 0) return why;
    return std::string(arg) + ": " + why;
}

// Waits for a copy into the device, as stage_device_data waits for one out of it.
int wait_copy(std::unique_ptr<Completion> done, const char *what, std::string *why) {
    progress_until([&] { return done->test(); });
    if (done->error() == MPI_SUCCESS) return MPI_SUCCESS;
    *why = with_detail(what, done->what());
    return done->error();
}

// A host copy of the bytes `count` elements of `type` touch, and the origin in it.
struct HostFootprint {
    std::vector<char> bytes;
    char *origin = nullptr;
    int make(MPI_Datatype type, MPI_Count count, std::string *why) {
        int error = MPI_SUCCESS;
        std::shared_ptr<const FlatType> flat = flat_type(type, &error, why);
        if (!flat) return error;
        std::int64_t lo = 0, hi = 0;
        type_footprint(*flat, count, &lo, &hi);
        bytes.assign(static_cast<std::size_t>(hi - lo) + 1, 0);
        origin = bytes.data() - lo;
        return MPI_SUCCESS;
    }
};

}  // namespace

int classify_typed(const void *buf, MPI_Count count, MPI_Datatype type, const char *arg, MessageBuffer *mb,
                   bool *device, std::string *why) {
    *device = false;
    BufferAttrs attrs;
    int rc = classify_buffer(buf, type, &attrs, why, arg);
    if (rc != MPI_SUCCESS) {
        *why = for_arg(*why, arg);
        return rc;
    }
    if (attrs.kind == BufKind::HOST) return MPI_SUCCESS;
    if (count > INT_MAX) {
        *why = format("%s: not supported on device buffers: a count above INT_MAX (%lld)", arg,
                      static_cast<long long>(count));
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    attrs.within_call = true;
    rc = make_message_buffer(const_cast<void *>(buf), static_cast<int>(count), type, attrs, mb, why);
    if (rc != MPI_SUCCESS) {
        *why = for_arg(*why, arg);
        return rc;
    }
    *device = mb->kind != BufKind::HOST;
    return MPI_SUCCESS;
}

int copy_into_device(MessageBuffer &pb, const void *src, std::size_t n, std::string *why) {
    if (n == 0) return MPI_SUCCESS;
    if (!pb.device) {
        std::memcpy(pb.host, src, n);
        return MPI_SUCCESS;
    }
    std::unique_ptr<Completion> done;
    int rc = pb.device->copy_from_host(0, src, n, &done, why);
    if (rc != MPI_SUCCESS) return rc;
    return wait_copy(std::move(done), "outbuf: copying the packed bytes into device memory failed", why);
}

int copy_out_of_device(MessageBuffer &pb, void *dst, std::size_t n, const char *call, std::string *why) {
    if (n == 0) return MPI_SUCCESS;
    if (!pb.device) {
        std::memcpy(dst, pb.host, n);
        return MPI_SUCCESS;
    }
    return stage_device_data(pb, dst, call, why);
}

int move_packed_on_device(MessageBuffer &mb, MessageBuffer &pb, bool pack, std::string *why) {
    if (!mb.device || !pb.device || mb.kind != pb.kind) {
        *why = "the typed and packed buffers are not device memory of one kind";
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    std::unique_ptr<Completion> done;
    int rc = pack ? mb.device->copy_to_device(0, *pb.device, 0, mb.bytes, &done, why)
                  : mb.device->copy_from_device(0, *pb.device, 0, mb.bytes, &done, why);
    if (rc != MPI_SUCCESS) return rc;
    return wait_copy(std::move(done), pack ? "packing on the device failed" : "unpacking on the device failed", why);
}

int pack_device(MessageBuffer &mb, void *outbuf, MPI_Count outsize, MPI_Count *position, const char *call,
                std::string *why) {
    const MPI_Count at = *position;
    if (at < 0 || outsize - at < static_cast<MPI_Count>(mb.bytes)) {
        *why = format("outbuf: %lld bytes from position %lld cannot hold the %zu packed bytes",
                      static_cast<long long>(outsize - at), static_cast<long long>(at), mb.bytes);
        return MPI_ERR_TRUNCATE;
    }
    if (mb.bytes > 0) {
        int rc = stage_device_data(mb, static_cast<char *>(outbuf) + at, call, why);
        if (rc != MPI_SUCCESS) return rc;
    }
    *position = at + static_cast<MPI_Count>(mb.bytes);
    return MPI_SUCCESS;
}

int unpack_device(const void *inbuf, MPI_Count insize, MPI_Count *position, MessageBuffer &mb, std::string *why) {
    const MPI_Count at = *position;
    if (at < 0 || insize - at < static_cast<MPI_Count>(mb.bytes)) {
        *why = format("inbuf: %lld bytes from position %lld do not hold the %zu packed bytes the type takes",
                      static_cast<long long>(insize - at), static_cast<long long>(at), mb.bytes);
        return MPI_ERR_TRUNCATE;
    }
    int rc = copy_into_device(mb, static_cast<const char *>(inbuf) + at, mb.bytes, why);
    if (rc != MPI_SUCCESS) return rc;
    *position = at + static_cast<MPI_Count>(mb.bytes);
    return MPI_SUCCESS;
}

int pack_external_device(const char *datarep, MessageBuffer &mb, MPI_Count count, MPI_Datatype type, void *outbuf,
                         MPI_Count outsize, MPI_Count *position, const char *call, std::string *why) {
    MPI_Count need = 0;
    int rc = PMPI_Pack_external_size_c(datarep, count, type, &need);
    if (rc != MPI_SUCCESS) {
        *why = "datarep: MPI_Pack_external_size failed for this datatype";
        return MPI_ERR_ARG;
    }
    if (*position < 0 || outsize - *position < need) {
        *why = format("outbuf: %lld bytes from position %lld cannot hold the %lld packed bytes",
                      static_cast<long long>(outsize - *position), static_cast<long long>(*position),
                      static_cast<long long>(need));
        return MPI_ERR_TRUNCATE;
    }
    std::vector<char> native(mb.bytes + 1);
    if (mb.bytes > 0) {
        rc = stage_device_data(mb, native.data(), call, why);
        if (rc != MPI_SUCCESS) return rc;
    }
    HostFootprint host;
    rc = host.make(type, count, why);
    if (rc != MPI_SUCCESS) return rc;
    MPI_Count pos = 0;
    if (PMPI_Unpack_c(native.data(), static_cast<MPI_Count>(mb.bytes), &pos, host.origin, count, type, MPI_COMM_SELF) !=
            MPI_SUCCESS ||
        PMPI_Pack_external_c(datarep, host.origin, count, type, outbuf, outsize, position) != MPI_SUCCESS) {
        *why = "converting the packed bytes to the external representation failed";
        return MPI_ERR_OTHER;
    }
    return MPI_SUCCESS;
}

int unpack_external_device(const char *datarep, const void *inbuf, MPI_Count insize, MPI_Count *position,
                           MessageBuffer &mb, MPI_Count count, MPI_Datatype type, std::string *why) {
    MPI_Count need = 0;
    int rc = PMPI_Pack_external_size_c(datarep, count, type, &need);
    if (rc != MPI_SUCCESS) {
        *why = "datarep: MPI_Pack_external_size failed for this datatype";
        return MPI_ERR_ARG;
    }
    if (*position < 0 || insize - *position < need) {
        *why = format("inbuf: %lld bytes from position %lld do not hold the %lld packed bytes the type takes",
                      static_cast<long long>(insize - *position), static_cast<long long>(*position),
                      static_cast<long long>(need));
        return MPI_ERR_TRUNCATE;
    }
    HostFootprint host;
    rc = host.make(type, count, why);
    if (rc != MPI_SUCCESS) return rc;
    std::vector<char> native(mb.bytes + 1);
    MPI_Count pos = 0, next = *position;
    if (PMPI_Unpack_external_c(datarep, inbuf, insize, &next, host.origin, count, type) != MPI_SUCCESS ||
        PMPI_Pack_c(host.origin, count, type, native.data(), static_cast<MPI_Count>(mb.bytes), &pos, MPI_COMM_SELF) !=
            MPI_SUCCESS) {
        *why = "converting the packed bytes from the external representation failed";
        return MPI_ERR_OTHER;
    }
    MPI_Count zero = 0;
    rc = unpack_device(native.data(), static_cast<MPI_Count>(mb.bytes), &zero, mb, why);
    if (rc != MPI_SUCCESS) return rc;
    *position = next;
    return MPI_SUCCESS;
}

}  // namespace mpiacc
