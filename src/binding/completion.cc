// MPI_Wait*/Test*/Start*/Cancel/Request_free: MPICH's requests pass through; MPI-ACC's
// are driven by the progress engine, and every call makes progress (BRIEF S2).
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

// Tests request i once. `retire` completes it (frees/reset) when done; otherwise only
// peeks (MPI_Testall must not complete a subset).
Check check_one(MPI_Request *req, MPI_Status *st, bool retire, int *rc) {
    *rc = MPI_SUCCESS;
    if (*req == MPI_REQUEST_NULL) return Check::NULL_OR_INACTIVE;
    if (Op *op = find_user_op(*req)) {
        if (op->persistent() && !op->active()) return Check::NULL_OR_INACTIVE;
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
    progress_until([&] { return op->complete; });
    MPI_Comm comm = op->comm;
    int rc = retire_user_op(req, status);
    if (rc != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, rc);
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Test(req, flag, status);
    progress_poke();
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
    int remaining = count;
    bool any_error = false;
    while (remaining > 0) {
        for (int i = 0; i < count; ++i) {
            if (done[i]) continue;
            st[i].MPI_ERROR = MPI_SUCCESS;
            Check c = check_one(&reqs[i], &st[i], true, &errs[i]);
            if (c == Check::PENDING) continue;
            if (c == Check::NULL_OR_INACTIVE) empty_status(&st[i]);
            if (errs[i] != MPI_SUCCESS) any_error = true;
            done[i] = 1;
            --remaining;
        }
        if (remaining > 0) progress_poke();
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

int MPI_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Waitany(count, reqs, index, status);
    for (;;) {
        bool any_active = false;
        for (int i = 0; i < count; ++i) {
            int rc;
            Check c = check_one(&reqs[i], status, true, &rc);
            if (c == Check::NULL_OR_INACTIVE) continue;
            any_active = true;
            if (c == Check::DONE) {
                *index = i;
                return rc;
            }
        }
        if (!any_active) {
            *index = MPI_UNDEFINED;
            empty_status(status);
            return MPI_SUCCESS;
        }
        progress_poke();
    }
}

int MPI_Testany(int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Testany(count, reqs, index, flag, status);
    progress_poke();
    bool any_active = false;
    for (int i = 0; i < count; ++i) {
        int rc;
        Check c = check_one(&reqs[i], status, true, &rc);
        if (c == Check::NULL_OR_INACTIVE) continue;
        any_active = true;
        if (c == Check::DONE) {
            *index = i;
            *flag = 1;
            return rc;
        }
    }
    *index = MPI_UNDEFINED;
    *flag = any_active ? 0 : 1;
    if (!any_active) empty_status(status);
    return MPI_SUCCESS;
}

static int some_common(int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[],
                       bool wait) {
    MPI_Status scratch;
    bool any_error = false;
    for (;;) {
        bool any_active = false;
        *outcount = 0;
        for (int i = 0; i < incount; ++i) {
            MPI_Status *st = statuses == MPI_STATUSES_IGNORE ? &scratch : &statuses[*outcount];
            st->MPI_ERROR = MPI_SUCCESS;
            int rc;
            Check c = check_one(&reqs[i], st, true, &rc);
            if (c == Check::NULL_OR_INACTIVE) continue;
            any_active = true;
            if (c == Check::DONE) {
                st->MPI_ERROR = rc;
                if (rc != MPI_SUCCESS) any_error = true;
                indices[(*outcount)++] = i;
            }
        }
        if (!any_active) {
            *outcount = MPI_UNDEFINED;
            return MPI_SUCCESS;
        }
        if (*outcount > 0 || !wait) return any_error ? MPI_ERR_IN_STATUS : MPI_SUCCESS;
        progress_poke();
    }
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
