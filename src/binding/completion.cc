// MPI_Wait*/Test*/Start*/Cancel/Request_free: MPICH's requests pass through; MPI-ACC's
// are driven by the progress engine, and every call makes progress (BRIEF S2).
#include <algorithm>
#include <vector>

#include "binding/binding.h"

using namespace mpiacc;

namespace {

void empty_status(MPI_Status *st) {
    if (st != MPI_STATUS_IGNORE) set_status(st, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS, false);
}

// Nothing of MPI-ACC's is involved: the call can go straight to MPICH.
bool only_mpich(const Context &ctx) { return !ctx.initialized || (ctx.user_ops.empty() && ctx.pending == 0); }

// One request's state for the multiple-completion calls.
enum class Check { NULL_OR_INACTIVE, PENDING, DONE };

// A watched receive whose MPICH request the caller just completed: finish it (copy out,
// or run the rendezvous its envelope started; that may wait for the sender, the one case
// where MPI_Test* waits) and hand the user its status.
void begin_watched(Op *op, const MPI_Status &mpich_status, int mpich_rc) {
    StateLock lock;
    op->on_matching_completed(mpich_status, mpich_rc);
}

// The second half: every watched receive MPICH completed in the same call must have had
// begin_watched first, because progress here may reuse the handles MPICH just freed.
int end_watched(MPI_Request *req, Op *op, MPI_Status *st) {
    progress_until([&] {
        StateLock lock;
        if (!op->complete) op->progress();
        return op->complete;
    });
    MPI_Comm comm = op->comm;
    int rc = retire_user_op(req, st);
    if (rc != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, rc);
    return rc;
}

// Tests request *req once. `retire` completes it (frees/reset) when done; otherwise only
// peeks (MPI_Testall must not complete a subset).
Check check_one(MPI_Request *req, MPI_Status *st, bool retire, int *rc) {
    *rc = MPI_SUCCESS;
    if (*req == MPI_REQUEST_NULL) return Check::NULL_OR_INACTIVE;
    if (Op *op = find_user_op(*req)) {
        if (op->persistent() && !op->active()) return Check::NULL_OR_INACTIVE;
        if (retire && op->testable_matching()) {
            int flag = 0;
            MPI_Status mst;
            mst.MPI_ERROR = MPI_SUCCESS;
            MPI_Request h = *req;
            int trc = PMPI_Test(&h, &flag, &mst);
            if (!flag) return Check::PENDING;
            begin_watched(op, mst, trc);
            *rc = end_watched(req, op, st);
            return Check::DONE;
        }
        if (!op->complete) return Check::PENDING;
        if (retire) {
            MPI_Comm comm = op->comm;
            *rc = retire_user_op(req, st);
            if (*rc != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, *rc);
        }
        return Check::DONE;
    }
    int flag = 0;
    *rc = retire ? PMPI_Test(req, &flag, st) : PMPI_Request_get_status(*req, &flag, st);
    return flag ? Check::DONE : Check::PENDING;
}

// One round over an array for the multiple-completion calls: requests MPICH can complete
// by itself (its own, and watched receives still matching) are tested together with one
// PMPI_Testsome (one progress poll, not one per request); MPI-ACC's ops are checked for
// completion. Marks newly done entries in done[] and returns how many there were, at most
// `limit`.
int sweep(int count, MPI_Request reqs[], std::vector<char> &done, MPI_Status st[], std::vector<int> &errs,
          int limit, std::vector<int> *order, unsigned round) {
    int newly = 0;
    // Reused between calls: completion calls sit on the message-rate path.
    static thread_local std::vector<int> batch;
    static thread_local std::vector<MPI_Request> handles;
    static thread_local std::vector<Op *> ops;
    static thread_local std::vector<int> idx;
    static thread_local std::vector<MPI_Status> sts;
    batch.clear();
    handles.clear();
    ops.clear();
    for (int i = 0; i < count; ++i) {
        if (done[i]) continue;
        if (reqs[i] == MPI_REQUEST_NULL) {
            done[i] = 2;  // null: not counted as completed by this call
            continue;
        }
        Op *op = find_user_op(reqs[i]);
        if (op && !op->testable_matching()) {
            if (newly >= limit) continue;
            if (op->persistent() && !op->active()) {
                done[i] = 2;
                continue;
            }
            if (!op->complete) continue;
            MPI_Comm comm = op->comm;
            st[i].MPI_ERROR = MPI_SUCCESS;
            errs[i] = retire_user_op(&reqs[i], &st[i]);
            if (errs[i] != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, errs[i]);
            done[i] = 1;
            if (order) order->push_back(i);
            ++newly;
            continue;
        }
        batch.push_back(i);
        handles.push_back(reqs[i]);
        ops.push_back(op);
    }
    if (batch.empty() || newly >= limit) return newly;
    // Inactive persistent MPICH requests never show up in MPI_Testsome; a per-request
    // pass now and then finds them.
    if (round % 64 == 63) {
        for (std::size_t k = 0; k < batch.size() && newly < limit; ++k) {
            int i = batch[k], rc;
            if (done[i]) continue;
            Check c = check_one(&reqs[i], &st[i], true, &rc);
            if (c == Check::PENDING) continue;
            errs[i] = rc;
            done[i] = c == Check::DONE ? 1 : 2;
            if (c == Check::DONE && order) order->push_back(i);
            if (c == Check::DONE) ++newly;
        }
        return newly;
    }
    int n = static_cast<int>(handles.size()), outcount = 0;
    idx.resize(n);
    sts.resize(n);
    for (auto &x : sts) x.MPI_ERROR = MPI_SUCCESS;
    int rc;
    if (limit - newly == 1) {
        // MPI_Waitany/Testany: MPICH must complete (and free) no more than one request,
        // or the others' results would be lost with their handles.
        int flag = 0, index = MPI_UNDEFINED;
        rc = PMPI_Testany(n, handles.data(), &index, &flag, &sts[0]);
        if (flag && index == MPI_UNDEFINED) {
            outcount = MPI_UNDEFINED;
        } else if (flag) {
            outcount = 1;
            idx[0] = index;
            if (rc != MPI_SUCCESS) sts[0].MPI_ERROR = rc;
            rc = MPI_ERR_IN_STATUS;
        }
    } else {
        rc = PMPI_Testsome(n, handles.data(), &outcount, idx.data(), sts.data());
    }
    if (outcount == MPI_UNDEFINED) {
        for (int i : batch) done[i] = 2;  // all inactive
        return newly;
    }
    for (int k = 0; k < outcount; ++k) {
        int mrc = rc == MPI_ERR_IN_STATUS ? sts[k].MPI_ERROR : rc;
        if (Op *op = ops[idx[k]]) begin_watched(op, sts[k], mrc);
    }
    for (int k = 0; k < outcount; ++k) {
        int i = batch[idx[k]];
        int mrc = rc == MPI_ERR_IN_STATUS ? sts[k].MPI_ERROR : rc;
        if (Op *op = ops[idx[k]]) {
            st[i].MPI_ERROR = MPI_SUCCESS;
            errs[i] = end_watched(&reqs[i], op, &st[i]);
        } else {
            reqs[i] = handles[idx[k]];
            st[i] = sts[k];
            errs[i] = mrc;
        }
        done[i] = 1;
        if (order) order->push_back(i);
        ++newly;
    }
    return newly;
}

int start_one(MPI_Request *req) {
    if (Op *op = find_user_op(*req)) {
        int rc;
        {
            StateLock lock;
            rc = op->start();
            mark_pending(op);
        }
        if (rc != MPI_SUCCESS) PMPI_Comm_call_errhandler(op->comm, rc);
        return rc;
    }
    return PMPI_Start(req);
}

}  // namespace

extern "C" {

int MPI_Wait(MPI_Request *req, MPI_Status *status) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Wait(req, status);
    Op *op = find_user_op(*req);
    if (!op) return wait_mpich_request(req, status);
    if (op->persistent() && !op->active()) {
        empty_status(status);
        return MPI_SUCCESS;
    }
    if (op->testable_matching()) {
        // A host receive MPICH can complete by itself: when it is the only thing in
        // flight, block in MPICH (nothing else needs driving); else test and progress.
        MPI_Status mst;
        mst.MPI_ERROR = MPI_SUCCESS;
        MPI_Request h = *req;
        if (ctx.pending == 1) {
            int rc = PMPI_Wait(&h, &mst);
            begin_watched(op, mst, rc);
            return end_watched(req, op, status);
        }
        for (unsigned round = 0; op->testable_matching(); ++round) {
            int flag = 0;
            int rc = PMPI_Test(&h, &flag, &mst);
            if (flag) {
                begin_watched(op, mst, rc);
                return end_watched(req, op, status);
            }
            // A full round may match this receive through its own poll; the loop then
            // ends and the op is finished below like any other.
            progress_poke(round % 16 != 15);
        }
    }
    progress_until([&] { return op->complete; });
    MPI_Comm comm = op->comm;
    int rc = retire_user_op(req, status);
    if (rc != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, rc);
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Test(req, flag, status);
    static thread_local unsigned calls = 0;
    progress_poke(++calls % 16 != 0);
    int rc;
    Check c = check_one(req, status, true, &rc);
    *flag = c != Check::PENDING;
    if (c == Check::NULL_OR_INACTIVE) empty_status(status);
    return rc;
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[]) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Waitall(count, reqs, statuses);
    std::vector<MPI_Status> local(statuses == MPI_STATUSES_IGNORE ? count : 0);
    MPI_Status *st = statuses == MPI_STATUSES_IGNORE ? local.data() : statuses;
    std::vector<char> done(count, 0);
    std::vector<int> errs(count, MPI_SUCCESS);
    for (unsigned round = 0;; ++round) {
        sweep(count, reqs, done, st, errs, count, nullptr, round);
        if (std::all_of(done.begin(), done.end(), [](char d) { return d != 0; })) break;
        // Watched receives outside this array still get polled every 16th round: one of
        // them may hold an envelope whose sender waits for our CTS.
        progress_poke(round % 16 != 15);
    }
    bool any_error = false;
    for (int i = 0; i < count; ++i) {
        if (done[i] == 2) empty_status(&st[i]);
        if (errs[i] != MPI_SUCCESS) any_error = true;
    }
    if (!any_error) return MPI_SUCCESS;
    for (int i = 0; i < count; ++i) st[i].MPI_ERROR = errs[i];
    return MPI_ERR_IN_STATUS;
}

int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[]) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Testall(count, reqs, flag, statuses);
    progress_poke();
    MPI_Status scratch;
    for (int i = 0; i < count; ++i) {
        int rc;
        if (check_one(&reqs[i], &scratch, false, &rc) == Check::PENDING) {
            *flag = 0;
            return MPI_SUCCESS;
        }
    }
    *flag = 1;
    return MPI_Waitall(count, reqs, statuses);
}

static int any_common(int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status, bool wait) {
    std::vector<MPI_Status> st(count);
    std::vector<char> done(count, 0);
    std::vector<int> errs(count, MPI_SUCCESS);
    std::vector<int> order;
    for (unsigned round = 0;; ++round) {
        sweep(count, reqs, done, st.data(), errs, 1, &order, round);
        if (!order.empty()) {
            *index = order.front();
            *flag = 1;
            if (status != MPI_STATUS_IGNORE) *status = st[*index];
            return errs[*index];
        }
        if (std::all_of(done.begin(), done.end(), [](char d) { return d == 2; })) {
            *index = MPI_UNDEFINED;
            *flag = 1;
            empty_status(status);
            return MPI_SUCCESS;
        }
        if (!wait) {
            *flag = 0;
            *index = MPI_UNDEFINED;
            return MPI_SUCCESS;
        }
        progress_poke(round % 16 != 15);
    }
}

int MPI_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Waitany(count, reqs, index, status);
    int flag;
    return any_common(count, reqs, index, &flag, status, true);
}

int MPI_Testany(int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Testany(count, reqs, index, flag, status);
    progress_poke();
    return any_common(count, reqs, index, flag, status, false);
}

static int some_common(int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[],
                       bool wait) {
    std::vector<MPI_Status> st(incount);
    std::vector<char> done(incount, 0);
    std::vector<int> errs(incount, MPI_SUCCESS);
    std::vector<int> order;
    for (unsigned round = 0;; ++round) {
        sweep(incount, reqs, done, st.data(), errs, incount, &order, round);
        if (!order.empty() || !wait) break;
        if (std::all_of(done.begin(), done.end(), [](char d) { return d == 2; })) break;
        progress_poke(round % 16 != 15);
    }
    if (order.empty() && std::all_of(done.begin(), done.end(), [](char d) { return d == 2; })) {
        *outcount = MPI_UNDEFINED;
        return MPI_SUCCESS;
    }
    *outcount = static_cast<int>(order.size());
    bool any_error = false;
    for (int k = 0; k < *outcount; ++k) {
        int i = order[k];
        indices[k] = i;
        if (statuses != MPI_STATUSES_IGNORE) {
            statuses[k] = st[i];
            statuses[k].MPI_ERROR = errs[i];
        }
        if (errs[i] != MPI_SUCCESS) any_error = true;
    }
    return any_error ? MPI_ERR_IN_STATUS : MPI_SUCCESS;
}

int MPI_Waitsome(int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Waitsome(incount, reqs, outcount, indices, statuses);
    return some_common(incount, reqs, outcount, indices, statuses, true);
}

int MPI_Testsome(int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Testsome(incount, reqs, outcount, indices, statuses);
    progress_poke();
    return some_common(incount, reqs, outcount, indices, statuses, false);
}

int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *status) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Request_get_status(req, flag, status);
    progress_poke();
    if (Op *op = find_user_op(req)) {
        if (op->persistent() && !op->active()) {
            *flag = 1;
            empty_status(status);
            return MPI_SUCCESS;
        }
        *flag = op->complete ? 1 : 0;
        if (op->complete && status != MPI_STATUS_IGNORE) {
            int keep = status->MPI_ERROR;
            *status = op->status;
            status->MPI_ERROR = keep;
        }
        return MPI_SUCCESS;
    }
    return PMPI_Request_get_status(req, flag, status);
}

int MPI_Request_free(MPI_Request *req) {
    Context &ctx = context();
    if (ctx.initialized && find_user_op(*req)) return free_user_op(req);
    return PMPI_Request_free(req);
}

int MPI_Cancel(MPI_Request *req) {
    Context &ctx = context();
    if (ctx.initialized) {
        if (Op *op = find_user_op(*req)) {
            StateLock lock;
            return op->cancel();
        }
    }
    return PMPI_Cancel(req);
}

int MPI_Start(MPI_Request *req) {
    Context &ctx = context();
    if (!ctx.initialized || ctx.user_ops.empty()) return PMPI_Start(req);
    return start_one(req);
}

int MPI_Startall(int count, MPI_Request reqs[]) {
    Context &ctx = context();
    if (!ctx.initialized || ctx.user_ops.empty()) return PMPI_Startall(count, reqs);
    for (int i = 0; i < count; ++i) {
        int rc = start_one(&reqs[i]);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

}  // extern "C"
