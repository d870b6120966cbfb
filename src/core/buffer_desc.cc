#include "core/buffer_desc.h"

#include <cstdint>

#include "util/error.h"
#include "mpiacc.h"

namespace mpiacc {

namespace {

bool get_attr(MPI_Datatype type, int keyval, void **value) {
    int flag = 0;
    if (keyval == MPI_KEYVAL_INVALID) return false;
    PMPI_Type_get_attr(type, keyval, value, &flag);
    return flag != 0;
}

}  // namespace

const char *buf_kind_word(BufKind kind) {
    switch (kind) {
        case BufKind::CUDA: return "CUDA";
        case BufKind::OPENCL: return "OpenCL";
        default: return "host";
    }
}

Accel *accel_for_buf_type(int mpix_acc_buf_value) {
    switch (mpix_acc_buf_value) {
        case MPIX_ACC_BUF_HOST: return accel_for(BufKind::HOST);
        case MPIX_ACC_BUF_CUDA: return accel_for(BufKind::CUDA);
        case MPIX_ACC_BUF_OPENCL: return accel_for(BufKind::OPENCL);
        default: return nullptr;
    }
}

int read_buffer_attrs(MPI_Datatype type, BufferAttrs *attrs, std::string *why) {
    Context &ctx = context();
    const Keyvals &k = ctx.keyvals;
    void *v = nullptr;
    if (get_attr(type, k.buf_type, &v)) {
        auto kind = reinterpret_cast<std::intptr_t>(v);
        if (kind != MPIX_ACC_BUF_HOST && kind != MPIX_ACC_BUF_CUDA && kind != MPIX_ACC_BUF_OPENCL) {
            *why = format(
                "datatype: attribute MPIX_ACC_BUF_TYPE has value %ld, which is not "
                "MPIX_ACC_BUF_HOST (1), MPIX_ACC_BUF_CUDA (2) or MPIX_ACC_BUF_OPENCL (3)",
                static_cast<long>(kind));
            return MPI_ERR_ARG;
        }
        attrs->kind = static_cast<BufKind>(kind);
        attrs->kind_given = true;
    }
    bool has_stream = get_attr(type, k.stream, &attrs->stream);
    bool has_queue = get_attr(type, k.command_queue, &attrs->queue);
    bool has_event = get_attr(type, k.event, &attrs->event);
    bool has_context = get_attr(type, k.context, &attrs->context);
    attrs->device_given = get_attr(type, k.device, &attrs->device);
    void *offset = nullptr;
    bool has_offset = get_attr(type, k.offset, &offset);
    if (has_offset) {
        auto off = reinterpret_cast<std::intptr_t>(offset);
        if (off < 0) {
            *why = format("datatype: attribute MPIX_ACC_OFFSET is negative (%ld)", static_cast<long>(off));
            return MPI_ERR_ARG;
        }
        attrs->offset = static_cast<std::size_t>(off);
    }
    const char *kind_name = buf_kind_name(attrs->kind);
    if (attrs->kind != BufKind::OPENCL) {
        const char *bad = has_queue     ? "MPIX_ACC_COMMAND_QUEUE"
                          : has_context ? "MPIX_ACC_CONTEXT"
                          : has_offset  ? "MPIX_ACC_OFFSET"
                                        : nullptr;
        if (bad) {
            *why = format(
                "datatype: attribute %s is only meaningful for MPIX_ACC_BUF_OPENCL buffers, "
                "but the buffer type is %s%s",
                bad, kind_name, attrs->kind_given ? "" : " (no MPIX_ACC_BUF_TYPE attribute)");
            return MPI_ERR_ARG;
        }
    }
    if (attrs->kind == BufKind::OPENCL && has_stream) {
        *why =
            "datatype: attribute MPIX_ACC_STREAM is a CUDA stream, but the buffer type is "
            "MPIX_ACC_BUF_OPENCL (use MPIX_ACC_COMMAND_QUEUE)";
        return MPI_ERR_ARG;
    }
    if (attrs->kind == BufKind::HOST && attrs->kind_given && (has_stream || has_event || attrs->device_given)) {
        *why =
            format("datatype: attribute %s is given for a MPIX_ACC_BUF_HOST buffer", has_stream  ? "MPIX_ACC_STREAM"
                                                                                     : has_event ? "MPIX_ACC_EVENT"
                                                                                                 : "MPIX_ACC_DEVICE");
        return MPI_ERR_ARG;
    }
    if (attrs->kind == BufKind::HOST && !attrs->kind_given && (has_stream || has_event || attrs->device_given)) {
        // A CUDA stream or event without a buffer type: the pointer query decides (the
        // CUDA-aware convention); it must then find device memory.
        attrs->kind = BufKind::CUDA;
        attrs->kind_given = false;
    }
    return MPI_SUCCESS;
}

int classify_buffer(const void *buf, MPI_Datatype type, BufferAttrs *attrs, std::string *why, const char *arg) {
    Context &ctx = context();
    *attrs = BufferAttrs{};
    if (type != MPI_DATATYPE_NULL && ctx.tagged_type_count.load(std::memory_order_relaxed) != 0) {
        bool tagged = false, read = false;
        std::uint64_t changes = 0;
        {
            StateLock lock;
            auto it = ctx.tagged_types.find(type);
            if (it != ctx.tagged_types.end()) {
                tagged = true;
                read = it->second.read;
                changes = it->second.changes;
                if (read) *attrs = it->second.attrs;
            }
        }
        if (tagged && !read) {
            int rc = read_buffer_attrs(type, attrs, why);
            if (rc != MPI_SUCCESS) return rc;  // an invalid value is reported at every call
            StateLock lock;
            // Kept only if no attribute of ours changed on the type while they were read.
            auto it = ctx.tagged_types.find(type);
            if (it != ctx.tagged_types.end() && it->second.changes == changes) {
                it->second.attrs = *attrs;
                it->second.read = true;
            }
        }
    }
    if (!attrs->kind_given && ctx.autodetect_active && buf != nullptr) {
        int ordinal = -1;
        if (ctx.detecting_accel->owns_pointer(buf, &ordinal)) {
            attrs->kind = ctx.detecting_accel->kind();
            if (!attrs->device_given) attrs->device = reinterpret_cast<void *>(static_cast<std::intptr_t>(ordinal));
        } else if (attrs->kind == BufKind::CUDA) {
            *why = format(
                "%s: MPIX_ACC_STREAM/MPIX_ACC_EVENT/MPIX_ACC_DEVICE given without MPIX_ACC_BUF_TYPE, "
                "and the buffer is not CUDA device memory",
                arg);
            return MPI_ERR_BUFFER;
        }
    } else if (!attrs->kind_given && attrs->kind == BufKind::CUDA && !ctx.autodetect_active) {
        *why =
            "datatype: MPIX_ACC_STREAM/MPIX_ACC_EVENT/MPIX_ACC_DEVICE given without MPIX_ACC_BUF_TYPE, and "
            "CUDA pointer detection is off (MPIACC_CUDA_AUTODETECT=0 or no CUDA device)";
        return MPI_ERR_ARG;
    }
    if (attrs->kind != BufKind::HOST) {
        Accel *accel = accel_for(attrs->kind);
        const char *kind = buf_kind_word(attrs->kind);
        const char *given = attrs->kind_given ? " (MPIX_ACC_BUF_TYPE)" : "";
        if (!accel_built(attrs->kind)) {
            *why = format(
                "%s: not supported on device buffers: %s is %s memory%s, and this MPI-ACC was built "
                "without %s support",
                arg, arg, kind, given, kind);
            return MPI_ERR_UNSUPPORTED_OPERATION;
        }
        if (!accel || !accel->available()) {
            *why = format(
                "%s: not supported on device buffers: %s is %s memory%s, and no usable %s device was "
                "found at run time",
                arg, arg, kind, given, kind);
            return MPI_ERR_UNSUPPORTED_OPERATION;
        }
    }
    return MPI_SUCCESS;
}

int attr_copy_callback(MPI_Datatype, int, void *, void *in, void *out, int *flag) {
    *static_cast<void **>(out) = in;
    *flag = 1;
    return MPI_SUCCESS;
}

int attr_delete_callback(MPI_Datatype type, int, void *, void *) {
    Context &ctx = context();
    StateLock lock;
    auto it = ctx.tagged_types.find(type);
    if (it == ctx.tagged_types.end()) return MPI_SUCCESS;
    it->second.read = false;
    ++it->second.changes;
    if (--it->second.attributes <= 0) {
        ctx.tagged_types.erase(it);
        ctx.tagged_type_count.store(ctx.tagged_types.size(), std::memory_order_relaxed);
    }
    return MPI_SUCCESS;
}

void note_attr_set(MPI_Datatype type) {
    Context &ctx = context();
    StateLock lock;
    Context::TaggedType &tagged = ctx.tagged_types[type];
    ++tagged.attributes;
    ++tagged.changes;
    tagged.read = false;
    ctx.tagged_type_count.store(ctx.tagged_types.size(), std::memory_order_relaxed);
}

void note_type_duplicated(MPI_Datatype newtype) {
    Context &ctx = context();
    const Keyvals &k = ctx.keyvals;
    int n = 0;
    for (int kv : {k.buf_type, k.stream, k.command_queue, k.event, k.context, k.device, k.offset}) {
        void *v;
        if (get_attr(newtype, kv, &v)) ++n;
    }
    if (n == 0) return;
    StateLock lock;
    ctx.tagged_types[newtype].attributes += n;
    ctx.tagged_type_count.store(ctx.tagged_types.size(), std::memory_order_relaxed);
}

}  // namespace mpiacc
