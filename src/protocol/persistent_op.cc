#include "core/buffer_desc.h"
#include "core/context.h"
#include "util/error.h"
#include "protocol/transfer.h"

namespace mpiacc {

PersistentOp::PersistentOp(Kind kind, void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm_in,
                           SendMode mode, const char *call_in)
    : kind_(kind), buf_(buf), count_(count), type_(type), peer_(peer), tag_(tag), mode_(mode) {
    comm = comm_in;
    call = call_in;
    complete = true;  // inactive until MPI_Start
}

// Attributes are read and device dependencies captured at each MPI_Start: the start is
// the call after which the data is ready (BRIEF A7, the EpiSimdemics pattern).
int PersistentOp::start() {
    if (running_) return MPI_ERR_REQUEST;
    complete = false;
    error = MPI_SUCCESS;
    if (peer_ == MPI_PROC_NULL) {
        set_status(&status, MPI_PROC_NULL, MPI_ANY_TAG, 0, MPI_SUCCESS, false);
        complete = true;
        return MPI_SUCCESS;
    }
    BufferAttrs attrs;
    std::string why;
    int rc = classify_buffer(buf_, type_.get(), &attrs, &why);
    if (kind_ == Kind::SEND) attrs.ipc_offer = ipc_pull_offered(attrs.kind, comm, peer_);
    MessageBuffer mb;
    if (rc == MPI_SUCCESS) rc = make_message_buffer(buf_, count_, type_.get(), attrs, &mb, &why);
    if (rc != MPI_SUCCESS) {
        complete = true;
        return make_error_code(rc, "MPI_Start", why);
    }
    if (kind_ == Kind::SEND) {
        std::unique_ptr<SendOp> op;
        rc = SendOp::post(std::move(mb), peer_, tag_, comm, mode_, call, &op);
        running_ = std::move(op);
    } else {
        std::unique_ptr<RecvOp> op;
        // A host buffer that can hold an envelope is posted directly (no bounce copy);
        // the op owns that MPICH request and checks it for an envelope.
        const bool direct = mb.kind == BufKind::HOST && mb.bytes >= kEnvelopeBytes && mb.layout.contiguous;
        rc = RecvOp::post(std::move(mb), peer_, tag_, comm, call,
                          direct ? RecvOp::Posting::IN_PLACE : RecvOp::Posting::BOUNCE, &op, nullptr);
        running_ = std::move(op);
    }
    if (rc != MPI_SUCCESS) {
        running_.reset();
        complete = true;
    }
    return rc;
}

void PersistentOp::progress() {
    if (!running_) return;
    running_->progress();
    if (running_->complete) {
        status = running_->status;
        error = running_->error;
        complete = true;
    }
}

int PersistentOp::cancel() { return running_ ? running_->cancel() : MPI_SUCCESS; }

std::unique_ptr<Op> PersistentOp::release_from_user(int *rc) {
    if (!running_) return nullptr;
    std::unique_ptr<Op> rest = running_->release_from_user(rc);
    progress();  // takes the instance's status once it is complete
    return rest;
}

void PersistentOp::reset_after_completion() { running_.reset(); }

}  // namespace mpiacc
