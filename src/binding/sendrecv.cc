// MPI-4's MPI_Isendrecv and MPI_Isendrecv_replace: one request for a receive and a send.
// Straight to MPICH, a host receive would take an MPI-ACC envelope as the data and a
// device buffer would reach MPICH as host memory.
//
// Both halves are MPI-ACC operations owned by one op behind a generalized request:
// the receive is a RecvOp posted into an internal buffer (a payload is copied out of
// it, an envelope starts the rendezvous), the send a SendOp or, for host data that
// travels as the plain payload, MPICH's own request in a StagedSendOp. The op drives both and completes
// when both have; its status is the receive's. The halves are not in the op tables, so
// driving them never changes a table the progress engine is walking.
#include <vector>

#include "binding/binding.h"

using namespace mpiacc;

namespace {

class SendrecvOp final : public Op {
public:
    std::unique_ptr<Op> recv, send;  // null: MPI_PROC_NULL
    std::vector<char> outgoing;      // MPI_Isendrecv_replace: the data to send, copied first

    void progress() override {
        for (Op *half : {recv.get(), send.get()})
            if (half && !half->complete) half->progress();
        if ((recv && !recv->complete) || (send && !send->complete)) return;
        if (recv) {
            status = recv->status;
            error = recv->error;
        } else {
            set_status(&status, MPI_PROC_NULL, MPI_ANY_TAG, 0, MPI_SUCCESS, false);
        }
        if (error == MPI_SUCCESS && send) error = send->error;
        complete = true;
    }
    int cancel() override {
        int rc = recv ? recv->cancel() : MPI_SUCCESS;
        if (send) send->cancel();
        return rc;
    }
    bool wait_for_device() override { return recv && !recv->complete && recv->wait_for_device(); }
};

// One half, checked and described before anything is posted: a half that fails must
// leave the other unposted, or a message meant for the next receive could match it.
struct Half {
    bool none = false;   // MPI_PROC_NULL
    bool plain = false;  // host data MPICH carries as it is (send half only)
    MessageBuffer mb;
};

int prepare_receive(void *buf, int count, MPI_Datatype type, int source, Half *half, std::string *why) {
    if (source == MPI_PROC_NULL) {
        half->none = true;
        return MPI_SUCCESS;
    }
    BufferAttrs attrs;
    int rc = classify_buffer(buf, type, &attrs, why);
    return rc != MPI_SUCCESS ? rc : make_message_buffer(buf, count, type, attrs, &half->mb, why);
}

int prepare_send(const void *buf, int count, MPI_Datatype type, int dest, MPI_Comm comm, Half *half,
                 std::string *why) {
    if (dest == MPI_PROC_NULL) {
        half->none = true;
        return MPI_SUCCESS;
    }
    BufferAttrs attrs;
    int rc = classify_buffer(buf, type, &attrs, why);
    if (rc != MPI_SUCCESS) return rc;
    if (attrs.kind == BufKind::HOST) {
        const long long n = packed_bytes(count, type);
        // Invalid arguments are MPICH's to report, with its own checks.
        if (n < 0 || count < 0 || HostPayloadRoute(comm, dest, /*blocking=*/false).eager(n)) {
            half->plain = true;
            return MPI_SUCCESS;
        }
    }
    attrs.ipc_offer = ipc_pull_offered(attrs.kind, comm, dest);
    return make_message_buffer(const_cast<void *>(buf), count, type, attrs, &half->mb, why);
}

// Checks and describes both halves, posts the receive and then the send (as
// MPI_Sendrecv does) and registers the op. On an error the call has no effect beyond
// a send MPICH itself refused after the receive was posted (which is then cancelled),
// and the error goes through comm's handler.
int start(std::unique_ptr<SendrecvOp> op, const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
          void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, const char *call,
          MPI_Request *request) {
    op->comm = comm;
    op->call = call;
    std::string why;
    Half in, out;
    int rc = prepare_send(sbuf, scount, stype, dest, comm, &out, &why);
    if (rc == MPI_SUCCESS) rc = prepare_receive(rbuf, rcount, rtype, source, &in, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    if (!out.none) keep_send_order(comm, dest);
    {
        StateLock lock;  // posting registers the halves where the progress engine looks
        if (!in.none) {
            std::unique_ptr<RecvOp> r;
            rc = RecvOp::post(std::move(in.mb), source, rtag, comm, call, RecvOp::Posting::BOUNCE, &r, nullptr);
            if (rc != MPI_SUCCESS) return rc;  // MPICH's error, reported by MPICH
            op->recv = std::move(r);
        }
        if (out.plain) {
            MPI_Request r;
            rc = PMPI_Isend(sbuf, scount, stype, dest, stag, comm, &r);
            // The staged send's op with nothing staged: MPICH sends from the user's buffer.
            if (rc == MPI_SUCCESS) op->send = std::make_unique<StagedSendOp>(StagingBuffer{}, r);
        } else if (!out.none) {
            std::unique_ptr<SendOp> s;
            rc = SendOp::post(std::move(out.mb), dest, stag, comm, SendMode::STANDARD, call, &s);
            op->send = std::move(s);
        }
        if (rc != MPI_SUCCESS && op->recv) op->recv->cancel();
    }
    if (rc != MPI_SUCCESS) {
        if (op->recv) run_to_completion(op->recv.get());
        return rc;
    }
    *request = register_user_op(std::move(op), Op::Handle::GREQUEST, MPI_REQUEST_NULL);
    return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int MPI_Isendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Request *request) {
    if (!context().initialized)
        return PMPI_Isendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                              recvtag, comm, request);
    return start(std::make_unique<SendrecvOp>(), sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                 recvtype, source, recvtag, comm, "MPI_Isendrecv", request);
}

// The outgoing data is copied first (packed host bytes, staged from a device), as
// MPI_Sendrecv_replace does, so that the receive may reuse the buffer.
int MPI_Isendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
                          MPI_Comm comm, MPI_Request *request) {
    static const char *const call = "MPI_Isendrecv_replace";
    if (!context().initialized)
        return PMPI_Isendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, request);
    auto op = std::make_unique<SendrecvOp>();
    std::string why;
    int rc = copy_outgoing_data(buf, count, type, call, &op->outgoing, &why);
    if (rc != MPI_SUCCESS) return raise_error(comm, rc, call, why);
    const void *out = op->outgoing.data();
    // The packed bytes of `count` elements may be more than an int holds.
    IntCount bytes(static_cast<MPI_Count>(op->outgoing.size()), MPI_BYTE);
    if (!bytes.ok()) return raise_error(comm, MPI_ERR_COUNT, call, "the packed send data is too large to describe");
    return start(std::move(op), out, bytes.count(), bytes.type(), dest, sendtag, buf, count, type, source, recvtag,
                 comm, call, request);
}

}  // extern "C"
