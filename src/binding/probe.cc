// Probes report the real size of a message sent by rendezvous (DESIGN 2.5). Learning it
// means receiving the envelope, which is then kept in the stash until a receive (or
// MPI_Mrecv of the handle MPI_Mprobe gave out) takes it.
#include <cstring>

#include "binding/binding.h"
#include "protocol/state.h"

using namespace mpiacc;

namespace {

// The status a probe reports for a stashed message: its real size.
void probe_status(const StashedEnvelope &s, MPI_Status *status) {
    if (status == MPI_STATUS_IGNORE) return;
    give_status(status, s.status);
    if (s.is_envelope()) PMPI_Status_set_elements_x(status, MPI_BYTE, static_cast<MPI_Count>(s.envelope.size));
}

const StashedEnvelope *find_stashed(int source, int tag, MPI_Comm comm) {
    for (auto &p : protocol_state().stash)
        if (stash_matches(*p, source, tag, comm)) return p.get();
    return nullptr;
}

// MPICH matched a message of exactly the envelope's length at (st.source, st.tag):
// receive it (the head of that source/tag) so its real size is known.
std::unique_ptr<StashedEnvelope> receive_head(const MPI_Status &st, MPI_Comm comm, MPI_Message *msg_in) {
    auto s = std::make_unique<StashedEnvelope>();
    s->comm = comm;
    MPI_Message msg;
    if (msg_in) {
        msg = *msg_in;
    } else {
        int flag = 0;
        MPI_Status ignored;
        PMPI_Improbe(st.MPI_SOURCE, st.MPI_TAG, comm, &flag, &msg, &ignored);
        if (!flag) return nullptr;
    }
    PMPI_Mrecv(&s->envelope, kEnvelopeBytes, MPI_BYTE, &msg, &s->status);
    return s;
}

int iprobe_common(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    progress_poke();
    StateLock lock;
    if (const StashedEnvelope *s = find_stashed(source, tag, comm)) {
        *flag = 1;
        probe_status(*s, status);
        return MPI_SUCCESS;
    }
    MPI_Status st;
    int rc = PMPI_Iprobe(source, tag, comm, flag, &st);
    if (rc != MPI_SUCCESS || !*flag) return rc;
    if (received_bytes(st) == kEnvelopeBytes) {
        std::unique_ptr<StashedEnvelope> s = receive_head(st, comm, nullptr);
        if (!s) {
            *flag = 0;
            return MPI_SUCCESS;
        }
        probe_status(*s, status);
        protocol_state().stash.push_back(std::move(s));
        return MPI_SUCCESS;
    }
    give_status(status, st);
    return MPI_SUCCESS;
}

// A message handle for a stashed message: an inactive MPICH request's handle value keeps
// it unique while the user holds it.
MPI_Message hand_out(std::unique_ptr<StashedEnvelope> s) {
    Context &ctx = context();
    PMPI_Recv_init(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, ctx.proto_comm, &s->placeholder);
    auto handle = static_cast<MPI_Message>(s->placeholder);
    protocol_state().probed_messages[handle] = std::move(s);
    return handle;
}

int improbe_common(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status) {
    progress_poke();
    StateLock lock;
    if (!protocol_state().stash.empty()) {
        if (std::unique_ptr<StashedEnvelope> s = take_stashed(source, tag, comm)) {
            *flag = 1;
            probe_status(*s, status);
            *message = hand_out(std::move(s));
            return MPI_SUCCESS;
        }
    }
    MPI_Status st;
    int rc = PMPI_Improbe(source, tag, comm, flag, message, &st);
    if (rc != MPI_SUCCESS || !*flag) return rc;
    if (*message != MPI_MESSAGE_NO_PROC && received_bytes(st) == kEnvelopeBytes) {
        std::unique_ptr<StashedEnvelope> s = receive_head(st, comm, message);
        probe_status(*s, status);
        *message = hand_out(std::move(s));
        return MPI_SUCCESS;
    }
    give_status(status, st);
    return MPI_SUCCESS;
}

int mrecv_common(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status,
                 MPI_Request *request, const char *call) {
    Context &ctx = context();
    std::unique_ptr<StashedEnvelope> s;
    {
        StateLock lock;
        auto it = protocol_state().probed_messages.find(*message);
        if (it != protocol_state().probed_messages.end()) {
            s = std::move(it->second);
            protocol_state().probed_messages.erase(it);
        }
    }
    if (s) {
        *message = MPI_MESSAGE_NULL;
        return recv_stashed(buf, count, type, std::move(s), call, status, request);
    }
    BufferAttrs attrs;
    std::string why;
    if (!buffer_is_plain_host(ctx, buf) && *message != MPI_MESSAGE_NO_PROC) {
        int rc = classify_buffer(buf, type, &attrs, &why);
        if (rc != MPI_SUCCESS) return raise_error(MPI_COMM_WORLD, rc, call, why);
    }
    if (attrs.kind == BufKind::HOST || *message == MPI_MESSAGE_NO_PROC) {
        // Not an envelope (those were taken at probe time): MPICH delivers it as is.
        if (request) return PMPI_Imrecv(buf, count, type, message, request);
        return PMPI_Mrecv(buf, count, type, message, status);
    }
    // Device destination: land the payload on the host, then copy it over.
    MessageBuffer mb;
    int rc = make_message_buffer(buf, count, type, attrs, &mb, &why);
    if (rc != MPI_SUCCESS) return raise_error(MPI_COMM_WORLD, rc, call, why);
    std::vector<char> bounce(std::max<std::size_t>(mb.bytes, 1));
    MPI_Status st;
    st.MPI_ERROR = MPI_SUCCESS;
    rc = PMPI_Mrecv(bounce.data(), static_cast<int>(bounce.size()), MPI_BYTE, message, &st);
    if (rc != MPI_SUCCESS) return rc;
    std::unique_ptr<RecvOp> op;
    {
        StateLock lock;
        RecvOp::from_matched(std::move(mb), bounce.data(), received_bytes(st), st, MPI_COMM_WORLD, call, &op,
                             request == nullptr);
    }
    if (!request) {
        int err = run_to_completion(op.get());
        give_status(status, op->status);
        return err;
    }
    *request = register_user_op(std::move(op), Op::Handle::GREQUEST, MPI_REQUEST_NULL);
    return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    Context &ctx = context();
    if (!ctx.initialized || source == MPI_PROC_NULL) return PMPI_Iprobe(source, tag, comm, flag, status);
    return iprobe_common(source, tag, comm, flag, status);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
    Context &ctx = context();
    if (!ctx.initialized || source == MPI_PROC_NULL) return PMPI_Probe(source, tag, comm, status);
    if (!transfers_in_flight() && protocol_state().stash.empty()) {
        MPI_Status st;
        int rc = PMPI_Probe(source, tag, comm, &st);
        if (rc != MPI_SUCCESS) return rc;
        if (received_bytes(st) != kEnvelopeBytes) {
            give_status(status, st);
            return MPI_SUCCESS;
        }
    }
    for (;;) {
        int flag = 0;
        int rc = iprobe_common(source, tag, comm, &flag, status);
        if (rc != MPI_SUCCESS || flag) return rc;
    }
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status) {
    Context &ctx = context();
    if (!ctx.initialized || source == MPI_PROC_NULL) return PMPI_Improbe(source, tag, comm, flag, message, status);
    return improbe_common(source, tag, comm, flag, message, status);
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status) {
    Context &ctx = context();
    if (!ctx.initialized || source == MPI_PROC_NULL) return PMPI_Mprobe(source, tag, comm, message, status);
    for (;;) {
        int flag = 0;
        int rc = improbe_common(source, tag, comm, &flag, message, status);
        if (rc != MPI_SUCCESS || flag) return rc;
    }
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status) {
    Context &ctx = context();
    if (!ctx.initialized) return PMPI_Mrecv(buf, count, type, message, status);
    return mrecv_common(buf, count, type, message, status, nullptr, "MPI_Mrecv");
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Request *request) {
    Context &ctx = context();
    if (!ctx.initialized) return PMPI_Imrecv(buf, count, type, message, request);
    return mrecv_common(buf, count, type, message, MPI_STATUS_IGNORE, request, "MPI_Imrecv");
}

}  // extern "C"
