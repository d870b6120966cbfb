// MPI_Wait*/Test*/Start*/Cancel/Request_free: MPICH's requests pass through; MPI-ACC's
// are driven by the progress engine, and every call makes progress (BRIEF S2). Host
// receives (core/host_recv.h) are MPICH requests with a record beside them: tested in the
// same batch as MPICH's own, then finished from the record.
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "accel/accel.h"
#include "binding/binding.h"
#include "protocol/state.h"

using namespace mpiacc;

namespace {

void empty_status(MPI_Status *st) {
    if (st != MPI_STATUS_IGNORE) set_status(st, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS, false);
}

// Nothing of MPI-ACC's is involved: the call can go straight to MPICH.
bool only_mpich(const Context &ctx) {
    return !ctx.initialized || (ctx.pending.get() == 0 && ctx.user_ops.empty() && protocol_state().host_recvs.empty());
}

// Test calls make one full progress round in 16; the others skip polling host receives
// (a PMPI call each). The 16th keeps the progress rule: a receive nobody tests may hold an
// envelope whose sender waits for our CTS.
void test_progress() {
    static thread_local unsigned calls = 0;
    progress_poke(++calls % 16 != 0);
}

// One request's state for the multiple-completion calls.
enum class Check { NULL_OR_INACTIVE, PENDING, DONE };

// Working arrays of one completion call, reused: these calls sit on the message-rate
// path. A stack of them, because an error handler run from one may itself call another.
struct Scratch {
    std::vector<char> done;  // 0: pending; 1: completed by this call; 2: null or inactive
    std::vector<int> errs;
    std::vector<MPI_Status> statuses;
    std::vector<int> order;
    int left = 0;  // entries with done == 0
    // What each pending entry is, worked out once per call and kept while no host receive
    // changed behind the call's back (HostRecvTable::changes): rounds of a Waitall then
    // cost one PMPI_Testsome, not a lookup per entry.
    bool classified = false;
    std::uint32_t changes = 0;
    int nbatch = 0;                    // entries MPICH tests: its own requests and host receives
    std::vector<int> batch;            // (the arrays are sized for the largest call so far)
    std::vector<MPI_Request> handles;  // their handles (MPICH nulls those it completes)
    std::vector<HostRecv *> recs;      // their records, null for MPICH's own
    std::size_t posted_recs = 0;       // records in the batch still POSTED
    std::vector<int> op_entries;       // entries that are MPI-ACC ops
    std::vector<int> idx;
    std::vector<MPI_Status> sts;
    std::vector<std::pair<int, std::unique_ptr<RecvOp>>> envelopes;
    std::vector<std::pair<MPI_Comm, int>> raise;
};

class ScratchLease {
public:
    explicit ScratchLease(int count) {
        static thread_local std::vector<std::unique_ptr<Scratch>> pool;
        static thread_local std::size_t depth = 0;
        if (depth == pool.size()) pool.push_back(std::make_unique<Scratch>());
        depth_ = &depth;
        s_ = pool[depth++].get();
        s_->done.assign(count, 0);
        s_->errs.assign(count, MPI_SUCCESS);
        if (s_->statuses.size() < static_cast<std::size_t>(count)) s_->statuses.resize(count);
        s_->order.clear();
        s_->left = count;
        s_->classified = false;
    }
    ~ScratchLease() {
        --*depth_;
        // The call's records were marked as tested by it; from now on progress polls
        // them again (the progress rule), whoever waits for them next.
        if (s_->classified) {
            StateLock lock;
            ++protocol_state().host_recvs.epoch;
        }
    }
    ScratchLease(const ScratchLease &) = delete;
    ScratchLease &operator=(const ScratchLease &) = delete;
    Scratch &operator*() const { return *s_; }

private:
    Scratch *s_;
    std::size_t *depth_;
};

// The host receive behind *req, if it is one (*found): completes it once MPICH's request
// has completed (PMPI_Test, or PMPI_Wait when `block`). *status keeps MPI_ERROR. Not
// blocking, an envelope makes the record an op under the same handle (poll_host_recv;
// *found false, so the caller goes on to the op): MPI_Test is local and must not wait for
// a rendezvous whose data may depend on what this rank does next. Blocking, the
// rendezvous runs here to its end.
Check complete_record(MPI_Request *req, MPI_Status *status, int *rc, bool block, bool *found) {
    std::unique_ptr<RecvOp> op;
    MPI_Comm comm = MPI_COMM_NULL;
    int err = MPI_SUCCESS;
    {
        StateLock lock;
        HostRecv *rec = protocol_state().host_recvs.find(*req);
        *found = rec != nullptr;
        if (!rec) return Check::PENDING;
        if (!block) {
            switch (poll_host_recv(rec)) {
                case HostRecvPoll::PENDING: return Check::PENDING;
                case HostRecvPoll::PROMOTED: *found = false; return Check::PENDING;
                case HostRecvPoll::DELIVERED: break;  // MPICH's request is complete: the test frees it
            }
        }
        MPI_Request h = *req;
        MPI_Status mst;
        mst.MPI_ERROR = MPI_SUCCESS;
        int flag = 0, mrc;
        if (block) {
            mrc = PMPI_Wait(&h, &mst);
            flag = 1;
        } else {
            mrc = PMPI_Test(&h, &flag, &mst);
        }
        if (!flag) return Check::PENDING;
        ++protocol_state().host_recvs.changes;  // a multiple-completion call below us may hold it
        op = complete_host_recv(rec, mst, mrc, status, &err, &comm);
        *req = MPI_REQUEST_NULL;
    }
    if (op) err = finish_envelope_op(std::move(op), status);
    if (err != MPI_SUCCESS) call_errhandler(comm, err);
    *rc = err;
    return Check::DONE;
}

// Tests request *req once. `retire` completes it (frees/reset) when done; otherwise only
// peeks (MPI_Testall must not complete a subset).
Check check_one(MPI_Request *req, MPI_Status *st, bool retire, int *rc) {
    *rc = MPI_SUCCESS;
    if (*req == MPI_REQUEST_NULL) return Check::NULL_OR_INACTIVE;
    if (!protocol_state().host_recvs.empty()) {
        if (retire) {
            bool found;
            Check c = complete_record(req, st, rc, false, &found);
            if (found) return c;
        } else {
            StateLock lock;
            if (HostRecv *rec = protocol_state().host_recvs.find(*req)) {
                switch (poll_host_recv(rec)) {
                    case HostRecvPoll::PENDING: return Check::PENDING;
                    case HostRecvPoll::DELIVERED: return Check::DONE;
                    case HostRecvPoll::PROMOTED: break;  // an op under the same handle now
                }
            }
        }
    }
    if (Op *op = find_user_op(*req)) {
        if (op->persistent() && !op->active()) return Check::NULL_OR_INACTIVE;
        if (!op->complete) return Check::PENDING;
        if (retire) {
            MPI_Comm comm = op->comm;
            *rc = retire_user_op(req, st);
            if (*rc != MPI_SUCCESS) call_errhandler(comm, *rc);
        }
        return Check::DONE;
    }
    int flag = 0;
    *rc = retire ? PMPI_Test(req, &flag, st) : PMPI_Request_get_status(*req, &flag, st);
    return flag ? Check::DONE : Check::PENDING;
}

void mark_done(Scratch &s, int i, char how, std::vector<int> *order) {
    s.done[i] = how;
    --s.left;
    if (how == 1 && order) order->push_back(i);
}

// Sorts the entries still pending into the MPICH batch (with their records) and MPI-ACC's
// ops, and marks the records as tested by this call. Caller holds the StateLock.
void classify(int count, MPI_Request reqs[], Scratch &s, std::vector<int> *order) {
    Context &ctx = context();
    HostRecvTable &t = protocol_state().host_recvs;
    const std::uint32_t epoch = ++t.epoch;
    const bool any_recs = !t.empty(), any_ops = !ctx.user_ops.empty();
    if (s.batch.size() < static_cast<std::size_t>(count)) {
        s.batch.resize(count);
        s.handles.resize(count);
        s.recs.resize(count);
    }
    int n = 0;
    s.op_entries.clear();
    s.posted_recs = 0;
    for (int i = 0; i < count; ++i) {
        if (s.done[i]) continue;
        if (reqs[i] == MPI_REQUEST_NULL) {
            mark_done(s, i, 2, order);  // null: not counted as completed by this call
            continue;
        }
        HostRecv *rec = any_recs ? t.find(reqs[i]) : nullptr;
        if (rec) {
            rec->seen_epoch = epoch;  // progress rounds during this call skip it
            if (rec->state == HostRecv::State::POSTED) ++s.posted_recs;
        } else if (any_ops && find_user_op(reqs[i])) {
            s.op_entries.push_back(i);
            continue;
        }
        s.batch[n] = i;
        s.handles[n] = reqs[i];
        s.recs[n] = rec;
        ++n;
    }
    s.nbatch = n;
    s.changes = t.changes;
    s.classified = true;
}

// One round over an array for the multiple-completion calls: requests MPICH can complete
// by itself (its own, and host receives) are tested together with one PMPI_Testsome (one
// progress poll, not one per request); MPI-ACC's ops are checked for completion. Marks
// newly settled entries in s.done and returns how many completed, at most `limit`.
// `wait`: the caller would only poll again, so when nothing of MPI-ACC's but this
// batch's host receives is in flight, block in MPICH until one of them completes.
int sweep(int count, MPI_Request reqs[], Scratch &s, MPI_Status st[], int limit, std::vector<int> *order,
          unsigned round, bool wait) {
    Context &ctx = context();
    int newly = 0;
    bool per_request_pass = false;
    s.envelopes.clear();
    s.raise.clear();
    {
        // Held through PMPI_Testsome: it frees the requests of host receives, which a
        // progress round on another thread would otherwise poll at the same time.
        StateLock lock;
        // Opened at the first envelope only, so the host receives' own completions pay
        // nothing: envelopes that complete host receives together start their pulls
        // together (accel.h). Closed before the lock is.
        std::optional<CopyBatch> batch;
        if (!s.classified || s.changes != protocol_state().host_recvs.changes) classify(count, reqs, s, order);
        for (int i : s.op_entries) {
            if (s.done[i] || newly >= limit) continue;
            Op *op = find_user_op(reqs[i]);
            if (!op) continue;
            if (op->persistent() && !op->active()) {
                mark_done(s, i, 2, order);
                continue;
            }
            if (!op->complete) continue;
            MPI_Comm comm = op->comm;
            st[i].MPI_ERROR = MPI_SUCCESS;
            s.errs[i] = retire_user_op(&reqs[i], &st[i]);
            if (s.errs[i] != MPI_SUCCESS) s.raise.emplace_back(comm, s.errs[i]);
            mark_done(s, i, 1, order);
            ++newly;
        }
        // Inactive persistent MPICH requests never show up in MPI_Testsome; a per-request
        // pass now and then finds them.
        if (s.nbatch != 0 && newly < limit && round % 64 == 63) {
            per_request_pass = true;
        } else if (s.nbatch != 0 && newly < limit) {
            const int n = s.nbatch;
            int outcount = 0;
            if (s.idx.size() < static_cast<std::size_t>(n)) {
                s.idx.resize(n);
                s.sts.resize(n);
            }
            for (int k = 0; k < n; ++k) s.sts[k].MPI_ERROR = MPI_SUCCESS;
            int rc;
            // Blocking is safe when everything pending is a receive of this batch: no op
            // needs driving, and an envelope completes its receive, which returns here.
            // Not with other threads about: the StateLock is held.
            const bool block = wait && newly == 0 && !ctx.locking && ctx.pending.get() == s.posted_recs;
            if (limit - newly == 1) {
                // MPI_Waitany/Testany: MPICH must complete (and free) no more than one
                // request, or the others' results would be lost with their handles.
                int flag = 0, index = MPI_UNDEFINED;
                if (block) {
                    rc = PMPI_Waitany(n, s.handles.data(), &index, &s.sts[0]);
                    flag = 1;
                } else {
                    rc = PMPI_Testany(n, s.handles.data(), &index, &flag, &s.sts[0]);
                }
                if (flag && index == MPI_UNDEFINED) {
                    outcount = MPI_UNDEFINED;
                } else if (flag) {
                    outcount = 1;
                    s.idx[0] = index;
                    if (rc != MPI_SUCCESS) s.sts[0].MPI_ERROR = rc;
                    rc = MPI_ERR_IN_STATUS;
                }
            } else if (block) {
                rc = PMPI_Waitsome(n, s.handles.data(), &outcount, s.idx.data(), s.sts.data());
            } else {
                rc = PMPI_Testsome(n, s.handles.data(), &outcount, s.idx.data(), s.sts.data());
            }
            if (outcount == MPI_UNDEFINED) {
                for (int k = 0; k < n; ++k)
                    if (!s.done[s.batch[k]]) mark_done(s, s.batch[k], 2, order);  // all inactive
                outcount = 0;
            }
            for (int k = 0; k < outcount; ++k) {
                const int i = s.batch[s.idx[k]];
                const int mrc = rc == MPI_ERR_IN_STATUS ? s.sts[k].MPI_ERROR : rc;
                if (HostRecv *rec = s.recs[s.idx[k]]) {
                    if (rec->state == HostRecv::State::POSTED) --s.posted_recs;
                    s.recs[s.idx[k]] = nullptr;
                    reqs[i] = MPI_REQUEST_NULL;
                    if (!complete_host_recv_fast(rec, s.sts[k], mrc, &st[i])) {
                        MPI_Comm comm;
                        st[i].MPI_ERROR = MPI_SUCCESS;
                        if (!batch) batch.emplace();
                        std::unique_ptr<RecvOp> op = complete_host_recv(rec, s.sts[k], mrc, &st[i], &s.errs[i], &comm);
                        if (op)
                            s.envelopes.emplace_back(i, std::move(op));
                        else if (s.errs[i] != MPI_SUCCESS)
                            s.raise.emplace_back(comm, s.errs[i]);
                    }
                } else {
                    reqs[i] = s.handles[s.idx[k]];
                    st[i] = s.sts[k];
                    s.errs[i] = mrc;
                }
                mark_done(s, i, 1, order);
                ++newly;
            }
        }
    }
    // Rendezvous started by envelopes run outside the lock: they may wait for a send
    // another thread drives. Every record MPICH completed was released above, so
    // progress here cannot confuse a reused handle with one of them.
    if (!s.envelopes.empty()) {
        finish_envelope_ops(s.envelopes, st, s.errs.data());
        for (auto &e : s.envelopes)
            if (s.errs[e.first] != MPI_SUCCESS) s.raise.emplace_back(e.second->comm, s.errs[e.first]);
    }
    s.envelopes.clear();
    for (const auto &r : s.raise) call_errhandler(r.first, r.second);
    if (per_request_pass) {
        for (int k = 0; k < s.nbatch && newly < limit; ++k) {
            int i = s.batch[k], rc;
            if (s.done[i]) continue;
            st[i].MPI_ERROR = MPI_SUCCESS;
            Check c = check_one(&reqs[i], &st[i], true, &rc);
            if (c == Check::PENDING) continue;
            s.errs[i] = rc;
            mark_done(s, i, c == Check::DONE ? 1 : 2, order);
            if (c == Check::DONE) ++newly;
        }
        // Its completions freed requests the cached batch still names.
        s.classified = false;
    }
    return newly;
}

int start_one(MPI_Request *req) {
    // Its destination is not known here (MPICH's own persistent sends): after every
    // payload still being staged.
    keep_send_order();
    if (Op *op = find_user_op(*req)) {
        int rc;
        {
            StateLock lock;
            rc = op->start();
            mark_pending(op);
        }
        if (rc != MPI_SUCCESS) call_errhandler(op->comm, rc);
        return rc;
    }
    return PMPI_Start(req);
}

}  // namespace

extern "C" {

int MPI_Wait(MPI_Request *req, MPI_Status *status) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Wait(req, status);
    if (!protocol_state().host_recvs.empty()) {
        for (unsigned round = 0;; ++round) {
            // A host receive that is the only thing in flight blocks in MPICH: nothing
            // else needs driving, and an envelope completes MPICH's request too.
            const bool block = round == 0 && ctx.pending.get() == 1 && !ctx.locking;
            int rc;
            bool found;
            Check c = complete_record(req, status, &rc, block, &found);
            if (!found) break;  // not a host receive, or an envelope made it an op
            if (c == Check::DONE) return rc;
            progress_poke(round % 16 != 15);
        }
    }
    Op *op = find_user_op(*req);
    if (!op) return wait_mpich_request(req, status);
    if (op->persistent() && !op->active()) {
        empty_status(status);
        return MPI_SUCCESS;
    }
    progress_until([&] { return op->complete; });
    MPI_Comm comm = op->comm;
    int rc = retire_user_op(req, status);
    if (rc != MPI_SUCCESS) call_errhandler(comm, rc);
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Test(req, flag, status);
    test_progress();
    int rc;
    Check c = check_one(req, status, true, &rc);
    *flag = c != Check::PENDING;
    if (c == Check::NULL_OR_INACTIVE) empty_status(status);
    return rc;
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[]) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Waitall(count, reqs, statuses);
    ScratchLease lease(count);
    Scratch &s = *lease;
    MPI_Status *st = statuses == MPI_STATUSES_IGNORE ? s.statuses.data() : statuses;
    for (unsigned round = 0;; ++round) {
        sweep(count, reqs, s, st, count, nullptr, round, true);
        if (s.left == 0) break;
        // Host receives outside this array still get polled every 16th round: one of
        // them may hold an envelope whose sender waits for our CTS.
        progress_poke(round % 16 != 15);
    }
    bool any_error = false;
    for (int i = 0; i < count; ++i) {
        if (s.done[i] == 2) empty_status(&st[i]);
        if (s.errs[i] != MPI_SUCCESS) any_error = true;
    }
    if (!any_error) return MPI_SUCCESS;
    for (int i = 0; i < count; ++i) st[i].MPI_ERROR = s.errs[i];
    return MPI_ERR_IN_STATUS;
}

int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[]) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Testall(count, reqs, flag, statuses);
    test_progress();
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
    ScratchLease lease(count);
    Scratch &s = *lease;
    MPI_Status *st = s.statuses.data();
    for (unsigned round = 0;; ++round) {
        sweep(count, reqs, s, st, 1, &s.order, round, wait);
        if (!s.order.empty()) {
            *index = s.order.front();
            *flag = 1;
            if (status != MPI_STATUS_IGNORE) *status = st[*index];
            return s.errs[*index];
        }
        if (s.left == 0) {  // every entry null or inactive
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
    test_progress();
    return any_common(count, reqs, index, flag, status, false);
}

static int some_common(int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[],
                       bool wait) {
    ScratchLease lease(incount);
    Scratch &s = *lease;
    MPI_Status *st = s.statuses.data();
    for (unsigned round = 0;; ++round) {
        sweep(incount, reqs, s, st, incount, &s.order, round, wait);
        if (!s.order.empty() || !wait || s.left == 0) break;
        progress_poke(round % 16 != 15);
    }
    if (s.order.empty() && s.left == 0) {
        *outcount = MPI_UNDEFINED;
        return MPI_SUCCESS;
    }
    *outcount = static_cast<int>(s.order.size());
    bool any_error = false;
    for (int k = 0; k < *outcount; ++k) {
        int i = s.order[k];
        indices[k] = i;
        if (statuses != MPI_STATUSES_IGNORE) {
            statuses[k] = st[i];
            statuses[k].MPI_ERROR = s.errs[i];
        }
        if (s.errs[i] != MPI_SUCCESS) any_error = true;
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
    test_progress();
    return some_common(incount, reqs, outcount, indices, statuses, false);
}

int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *status) {
    Context &ctx = context();
    if (only_mpich(ctx)) return PMPI_Request_get_status(req, flag, status);
    test_progress();
    if (!protocol_state().host_recvs.empty()) {
        StateLock lock;
        if (HostRecv *rec = protocol_state().host_recvs.find(req)) {
            HostRecvPoll p = poll_host_recv(rec);
            if (p != HostRecvPoll::PROMOTED) {
                *flag = p == HostRecvPoll::DELIVERED ? 1 : 0;
                if (*flag && status != MPI_STATUS_IGNORE) {
                    int keep = status->MPI_ERROR;
                    *status = rec->status;
                    status->MPI_ERROR = keep;
                }
                return MPI_SUCCESS;
            }
        }
    }
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
    if (ctx.initialized && !protocol_state().host_recvs.empty()) {
        StateLock lock;
        if (HostRecv *rec = protocol_state().host_recvs.find(*req)) {
            int rc = free_host_recv(rec);
            *req = MPI_REQUEST_NULL;
            return rc;
        }
    }
    if (ctx.initialized && find_user_op(*req)) return free_user_op(req);
    return PMPI_Request_free(req);
}

int MPI_Cancel(MPI_Request *req) {
    Context &ctx = context();
    if (ctx.initialized && !protocol_state().host_recvs.empty()) {
        StateLock lock;
        if (HostRecv *rec = protocol_state().host_recvs.find(*req)) return cancel_host_recv(rec);
    }
    if (ctx.initialized) {
        if (Op *op = find_user_op(*req)) {
            // A send that cannot be withdrawn completes locally: a successor nobody waits
            // for finishes it without the user's buffer (Op::release_from_user).
            std::unique_ptr<Op> rest;
            int rc;
            {
                StateLock lock;
                rc = op->cancel();
                if (rc == MPI_SUCCESS && !op->complete) rest = op->release_from_user(&rc);
            }
            if (rest) add_detached_op(std::move(rest));
            if (rc != MPI_SUCCESS) call_errhandler(op->comm, rc);
            return rc;
        }
    }
    return PMPI_Cancel(req);
}

int MPI_Start(MPI_Request *req) {
    Context &ctx = context();
    if (!ctx.initialized ||
        (ctx.user_ops.empty() && protocol_state().unposted_count.load(std::memory_order_relaxed) == 0))
        return PMPI_Start(req);
    return start_one(req);
}

int MPI_Startall(int count, MPI_Request reqs[]) {
    Context &ctx = context();
    if (!ctx.initialized ||
        (ctx.user_ops.empty() && protocol_state().unposted_count.load(std::memory_order_relaxed) == 0))
        return PMPI_Startall(count, reqs);
    for (int i = 0; i < count; ++i) {
        int rc = start_one(&reqs[i]);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

}  // extern "C"
