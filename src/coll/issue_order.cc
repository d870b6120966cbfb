#include "coll/issue_order.h"

#include <atomic>
#include <deque>
#include <utility>
#include <vector>

#include "coll/staged.h"
#include "core/context.h"
#include "core/progress.h"
#include "util/counters.h"

namespace mpiacc {

namespace {

struct Queues {
    std::atomic<std::size_t> queued{0};
    // Few communicators have one at a time: a vector beats a map.
    std::vector<std::pair<MPI_Comm, std::deque<StagedCollective *>>> by_comm;

    std::deque<StagedCollective *> *find(MPI_Comm comm) {
        for (auto &q : by_comm)
            if (q.first == comm) return &q.second;
        return nullptr;
    }
};

Queues &queues() {
    static Queues q;
    return q;
}

}  // namespace

bool collectives_queued() { return queues().queued.load(std::memory_order_relaxed) != 0; }

bool collectives_queued_on(MPI_Comm comm) {
    if (!collectives_queued()) return false;
    StateLock lock;
    auto *q = queues().find(comm);
    return q && !q->empty();
}

void queue_collective(MPI_Comm comm, StagedCollective *op) {
    StateLock lock;
    Queues &all = queues();
    auto *q = all.find(comm);
    if (!q) {
        all.by_comm.emplace_back(comm, std::deque<StagedCollective *>());
        q = &all.by_comm.back().second;
    }
    if (!q->empty()) MPIACC_COUNT("coll.queued");
    q->push_back(op);
    all.queued.fetch_add(1, std::memory_order_relaxed);
}

void issue_queued_collectives(MPI_Comm comm) {
    StateLock lock;
    Queues &all = queues();
    auto *q = all.find(comm);
    while (q && !q->empty() && q->front()->ready_to_issue()) {
        StagedCollective *op = q->front();
        q->pop_front();
        all.queued.fetch_sub(1, std::memory_order_relaxed);
        op->issue();  // queues nothing: the deque stays where it is
    }
    for (auto it = all.by_comm.begin(); it != all.by_comm.end();)
        it = it->second.empty() ? all.by_comm.erase(it) : it + 1;
}

void wait_for_queued_collectives(MPI_Comm comm) {
    if (!collectives_queued()) return;
    progress_until([comm] { return comm == MPI_COMM_NULL ? !collectives_queued() : !collectives_queued_on(comm); });
}

}  // namespace mpiacc
