// MPI_*_init: host payload sizes get MPICH's own persistent requests; everything else a
// PersistentOp behind an inactive MPICH request that stands in as the user's handle.
#include "binding/binding.h"

using namespace mpiacc;

MPI_Request mpiacc::placeholder_request() {
    MPI_Request h;
    PMPI_Recv_init(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, context().proto_comm, &h);
    return h;
}

namespace {

int pmpi_send_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, SendMode mode,
                   MPI_Request *req) {
    switch (mode) {
        case SendMode::BUFFERED: return PMPI_Bsend_init(buf, count, type, dest, tag, comm, req);
        case SendMode::SYNCHRONOUS: return PMPI_Ssend_init(buf, count, type, dest, tag, comm, req);
        case SendMode::READY: return PMPI_Rsend_init(buf, count, type, dest, tag, comm, req);
        default: return PMPI_Send_init(buf, count, type, dest, tag, comm, req);
    }
}

int send_init_common(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, SendMode mode,
                     const char *call, MPI_Request *req) {
    Context &ctx = context();
    if (!ctx.initialized || dest == MPI_PROC_NULL) return pmpi_send_init(buf, count, type, dest, tag, comm, mode, req);
    long long n = packed_bytes(count, type);
    if (buffer_is_plain_host(ctx, buf) && host_payload_size(n))
        return pmpi_send_init(buf, count, type, dest, tag, comm, mode, req);
    BufferAttrs attrs;
    std::string why;
    int rc = classify_buffer(buf, type, &attrs, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    if (attrs.kind == BufKind::HOST && (n < 0 || count < 0 || host_payload_size(n)))
        return pmpi_send_init(buf, count, type, dest, tag, comm, mode, req);
    auto op = std::make_unique<PersistentOp>(PersistentOp::Kind::SEND, const_cast<void *>(buf), count, type, dest, tag,
                                             comm, mode, call);
    *req = register_user_op(std::move(op), Op::Handle::PERSISTENT, placeholder_request());
    return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int MPI_Send_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    return send_init_common(buf, count, type, dest, tag, comm, SendMode::STANDARD, "MPI_Send_init", req);
}
int MPI_Bsend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    return send_init_common(buf, count, type, dest, tag, comm, SendMode::BUFFERED, "MPI_Bsend_init", req);
}
int MPI_Ssend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    return send_init_common(buf, count, type, dest, tag, comm, SendMode::SYNCHRONOUS, "MPI_Ssend_init", req);
}
int MPI_Rsend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    return send_init_common(buf, count, type, dest, tag, comm, SendMode::READY, "MPI_Rsend_init", req);
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req) {
    Context &ctx = context();
    if (!ctx.initialized || source == MPI_PROC_NULL || count < 0 || packed_bytes(count, type) < 0)
        return PMPI_Recv_init(buf, count, type, source, tag, comm, req);
    if (!buffer_is_plain_host(ctx, buf)) {
        // Validate now so a bad attribute is reported by the call that carries it.
        BufferAttrs attrs;
        std::string why;
        int rc = classify_buffer(buf, type, &attrs, &why);
        if (rc != MPI_SUCCESS) return raise_error(comm, rc, "MPI_Recv_init", why);
    }
    auto op = std::make_unique<PersistentOp>(PersistentOp::Kind::RECV, buf, count, type, source, tag, comm,
                                             SendMode::STANDARD, "MPI_Recv_init");
    *req = register_user_op(std::move(op), Op::Handle::PERSISTENT, placeholder_request());
    return MPI_SUCCESS;
}

}  // extern "C"
