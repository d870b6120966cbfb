#include "core/progress.h"

#include <algorithm>

#include "accel/accel.h"

namespace mpiacc {

namespace {

int grequest_query(void *extra, MPI_Status *status) {
    auto *op = static_cast<Op *>(extra);
    *status = op->status;
    return MPI_SUCCESS;
}
int grequest_free(void *) { return MPI_SUCCESS; }
int grequest_cancel(void *, int) { return MPI_SUCCESS; }

// Written at MPI_Init/MPI_Finalize while no other thread is in the library.
ProgressHook progress_hook = nullptr;

void note_completion(Op *op) {
    if (op->complete && op->counted_pending) {
        op->counted_pending = false;
        context().pending.remove();
    }
}

}  // namespace

void mark_pending(Op *op) {
    StateLock lock;  // see PendingCount: an update outside the lock can be lost
    if (!op->complete && !op->counted_pending) {
        op->counted_pending = true;
        context().pending.add();
    }
}

void settle_pending(Op *op) {
    StateLock lock;
    note_completion(op);
}

namespace {
// Enough that a program making only blocking calls never gets here (each of its waits
// empties the list), few enough that one of nonblocking calls holds little.
constexpr std::size_t kMaxRetiredOps = 16;
}  // namespace

void retire_later(std::unique_ptr<Op> op) {
    Context &ctx = context();
    StateLock lock;
    op->release_pooled();
    if (ctx.retired_ops.size() >= kMaxRetiredOps) ctx.retired_ops.clear();
    ctx.retired_ops.push_back(std::move(op));
}

void destroy_retired_ops() {
    Context &ctx = context();
    StateLock lock;
    ctx.retired_ops.clear();
}

void progress_poke(bool skip_host_recvs) {
    Context &ctx = context();
    StateLock lock;
    if (ctx.pending.get() == 0) return;
    // The pulls this round's envelopes start go to the device together (accel.h).
    CopyBatch batch;
    if (progress_hook) progress_hook(skip_host_recvs);
    for (auto &kv : ctx.user_ops) {
        Op *op = kv.second.get();
        if (!op->complete) {
            op->progress();
            note_completion(op);
        }
    }
    for (auto &op : ctx.detached_ops) {
        if (!op->complete) {
            op->progress();
            note_completion(op.get());
        }
    }
    ctx.detached_ops.erase(std::remove_if(ctx.detached_ops.begin(), ctx.detached_ops.end(),
                                          [](const std::unique_ptr<Op> &op) { return op->complete; }),
                           ctx.detached_ops.end());
}

void set_progress_hook(ProgressHook hook) { progress_hook = hook; }

void cancel_abandoned_ops() {
    for (auto &op : context().detached_ops)
        if (op->cancel_when_abandoned()) op->cancel();
}

bool detached_ops_left() { return !context().detached_ops.empty(); }

MPI_Request register_user_op(std::unique_ptr<Op> op, Op::Handle kind, MPI_Request handle) {
    Context &ctx = context();
    StateLock lock;
    if (kind == Op::Handle::GREQUEST)
        PMPI_Grequest_start(grequest_query, grequest_free, grequest_cancel, op.get(), &handle);
    op->handle_kind = kind;
    op->user_handle = handle;
    mark_pending(op.get());
    // Windows of a few hundred receives are common; growing the table a bucket array at
    // a time would rehash on the message-rate path.
    if (ctx.user_ops.bucket_count() < 1024) ctx.user_ops.reserve(1024);
    ctx.user_ops[handle] = std::move(op);
    return handle;
}

void add_detached_op(std::unique_ptr<Op> op) {
    Context &ctx = context();
    StateLock lock;
    op->handle_kind = Op::Handle::NONE;
    op->user_handle = MPI_REQUEST_NULL;
    mark_pending(op.get());
    if (op->complete) return;
    ctx.detached_ops.push_back(std::move(op));
}

Op *find_user_op(MPI_Request handle) {
    Context &ctx = context();
    if (ctx.user_ops.empty()) return nullptr;
    StateLock lock;
    auto it = ctx.user_ops.find(handle);
    return it == ctx.user_ops.end() ? nullptr : it->second.get();
}

int retire_user_op(MPI_Request *handle, MPI_Status *status) {
    Context &ctx = context();
    StateLock lock;
    auto it = ctx.user_ops.find(*handle);
    if (it == ctx.user_ops.end()) return MPI_ERR_REQUEST;
    Op *op = it->second.get();
    note_completion(op);
    int err = op->error;
    if (status != MPI_STATUS_IGNORE) {
        int keep_error = status->MPI_ERROR;
        *status = op->status;
        // Single-completion calls leave MPI_ERROR alone (MPI 3.2.5); multiple-completion
        // calls set it themselves.
        status->MPI_ERROR = keep_error;
    }
    switch (op->handle_kind) {
        case Op::Handle::PERSISTENT: op->reset_after_completion(); return err;
        case Op::Handle::GREQUEST: {
            MPI_Request h = *handle;
            PMPI_Grequest_complete(h);
            PMPI_Wait(&h, MPI_STATUS_IGNORE);  // calls the query function while op lives
            break;
        }
        case Op::Handle::WATCHED:
            // The MPICH receive request itself: the op frees it when destroyed below
            // (its own error, if any, is already in op->error).
        case Op::Handle::NONE: break;
    }
    ctx.user_ops.erase(it);
    *handle = MPI_REQUEST_NULL;
    return err;
}

int free_user_op(MPI_Request *handle) {
    Context &ctx = context();
    StateLock lock;
    auto it = ctx.user_ops.find(*handle);
    if (it == ctx.user_ops.end()) return MPI_ERR_REQUEST;
    std::unique_ptr<Op> op = std::move(it->second);
    ctx.user_ops.erase(it);
    MPI_Request h = *handle;
    *handle = MPI_REQUEST_NULL;
    switch (op->handle_kind) {
        case Op::Handle::PERSISTENT:
            // The stand-in request is MPICH's; the running instance (if any) continues.
            PMPI_Request_free(&h);
            break;
        case Op::Handle::GREQUEST:
            PMPI_Grequest_complete(h);
            PMPI_Request_free(&h);
            break;
        case Op::Handle::WATCHED:
            // The op keeps the MPICH request and frees it when it is done.
            break;
        case Op::Handle::NONE: break;
    }
    if (op->complete) {
        note_completion(op.get());
        return MPI_SUCCESS;
    }
    op->handle_kind = Op::Handle::NONE;
    ctx.detached_ops.push_back(std::move(op));
    return MPI_SUCCESS;
}

}  // namespace mpiacc
