#include "protocol/state.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/context.h"
#include "core/progress.h"
#include "pool/host_staging.h"
#include "pool/shared_memory.h"
#include "protocol/chunk_trace.h"
#include "protocol/fin_words.h"
#include "protocol/transfer.h"

namespace mpiacc {

namespace detail {
ProtocolState *const the_protocol_state = new ProtocolState();  // lives for the process, as the Context
}  // namespace detail

namespace {

// The protocol's share of a progress round, before the ops (core/progress.h).
void protocol_progress(bool skip_host_recvs) {
    ProtocolState &ps = protocol_state();
    // Control messages only ever come for a sender awaiting CTS/FIN or a receiver in its
    // data phase (ABORT); otherwise polling the channel would cost a progress call.
    if (!ps.senders.empty() || !ps.receivers.empty()) poll_control_messages();
    // Before the ops: a record holding an envelope becomes an op that progresses at once.
    if (!skip_host_recvs && !ps.host_recvs.empty()) poll_host_recvs();
    // Before the ops: a payload posted now is tested in this same round.
    if (!ps.unposted_payloads.empty()) post_staged_payloads();
}

// A pool frees a segment (an OpenCL context's pool evicted with it): its registration
// goes first.
void forget_segment(void *base) {
    auto &known = protocol_state().registered_segments;
    auto it = known.find(base);
    if (it == known.end()) return;
    netmod().deregister_memory(base, it->second.key);
    known.erase(it);
}

// A host pool of chunk-sized slots, made on first use and kept to MPI_Finalize.
PinnedPool *host_pool(std::unique_ptr<PinnedPool> *pool,
                      std::unique_ptr<PinnedPool> (*make)(std::size_t slot_size, std::size_t capacity_bytes)) {
    const Context &ctx = context();
    if (!*pool)
        *pool = make(static_cast<std::size_t>(ctx.knobs.chunk_size), static_cast<std::size_t>(ctx.knobs.pool_size));
    return pool->get();
}

// Every op nobody waits for is a send that waits only for a receiver to match it (or
// none is left), and no detached host receive is. Caller holds the StateLock.
bool only_unmatched_sends_left() {
    if (detached_host_recvs_left()) return false;
    for (const auto &op : context().detached_ops)
        if (!op->complete && !op->awaits_match()) return false;
    return true;
}

// MPI_Finalize, every rank past its barrier: destroys the detached sends still waiting
// for a match (their envelopes and payloads are withdrawn as far as MPICH can) and says
// how many under MPIACC_VERBOSE.
void abandon_unmatched_sends() {
    Context &ctx = context();
    StateLock lock;
    auto &ops = ctx.detached_ops;
    const auto unmatched = [](const std::unique_ptr<Op> &op) { return !op->complete && op->awaits_match(); };
    const auto n = std::count_if(ops.begin(), ops.end(), unmatched);
    if (n == 0) return;
    if (ctx.knobs.verbose >= 1)
        std::fprintf(stderr,
                     "[mpiacc %d] MPI_Finalize: %ld send(s) whose requests were freed or cancelled were never "
                     "matched by a receive; abandoned\n",
                     ctx.world_rank, static_cast<long>(n));
    ops.erase(std::remove_if(ops.begin(), ops.end(), unmatched), ops.end());
}

}  // namespace

int protocol_initialize() {
    Context &ctx = context();
    ProtocolState &ps = protocol_state();
    const auto peers = static_cast<std::size_t>(ctx.world_size);
    ps.eager_sends_left = std::make_unique<std::atomic<int>[]>(peers);
    ps.eager_run = std::make_unique<std::atomic<int>[]>(peers);
    ps.eager_blocking_only = std::make_unique<std::atomic<bool>[]>(peers);
    // Where each rank's FIN words are (protocol/fin_words.h): only a rank on this node
    // pulls, so only those offers are kept.
    const FinWordsOffer mine = open_fin_words(ctx.pid, ctx.pid_namespace);
    std::vector<FinWordsOffer> offers(peers);
    int rc = PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, offers.data(), sizeof mine, MPI_BYTE, ctx.proto_comm);
    if (rc != MPI_SUCCESS) return rc;
    std::unordered_map<int, FinWordsOffer> local;
    for (std::size_t r = 0; r < peers; ++r)
        if (same_node(static_cast<int>(r)) && offers[r].words != 0) local.emplace(static_cast<int>(r), offers[r]);
    set_peer_fin_words(std::move(local));
    ctx.plain_send_below.store(plain_send_limit(ctx.knobs), std::memory_order_relaxed);
    set_progress_hook(protocol_progress);
    set_segment_release_hook(forget_segment);
    return MPI_SUCCESS;
}

void protocol_finalize() {
    Context &ctx = context();
    if (!ctx.initialized) return;
    ProtocolState &ps = protocol_state();
    // Transfers the user can no longer wait for (freed requests, buffered sends) still
    // have to reach their receivers. Receives nobody waits for are cancelled.
    {
        StateLock lock;
        cancel_abandoned_ops();
        cancel_detached_host_recvs();
    }
    progress_until([&] {
        StateLock lock;
        return only_unmatched_sends_left();
    });
    // A send whose receiver never posts would hold MPI_Finalize for good (MPI 8.7 makes
    // the program erroneous; it must still end). Past this barrier no rank posts another
    // receive, and each finished those it waits for before it came (their senders were
    // served meanwhile), so a send still unmatched then never will be.
    MPI_Request everyone_here = MPI_REQUEST_NULL;
    if (PMPI_Ibarrier(ctx.proto_comm, &everyone_here) == MPI_SUCCESS) {
        progress_until([&] {
            int here = 0;
            return PMPI_Test(&everyone_here, &here, MPI_STATUS_IGNORE) != MPI_SUCCESS || here;
        });
        // A reply (CTS, FIN word) that came meanwhile is taken before anything is judged.
        progress_poke();
        progress_until([&] {
            StateLock lock;
            return only_unmatched_sends_left();
        });
        abandon_unmatched_sends();
    } else {
        progress_until([&] {
            StateLock lock;
            return !detached_ops_left() && !detached_host_recvs_left();
        });
    }
    stop_progress_thread();
    StateLock lock;
    if (ctx.knobs.verbose >= 3) print_chunk_trace();
    destroy_ops();
    release_slot_registrations();  // before any pool's memory goes
    ps.host_staging.reset();       // no send is left to read it, and receivers finished with each chunk
    ps.host_chunks.reset();        // every chunk send in it has completed or been retired
    release_all_host_recvs();
    forget_pending();
    ps.stash.clear();
    ps.probed_messages.clear();
    finish_peer_hints();
    drain_control_messages();
    clear_bounce_cache();
    shutdown_accels();
    close_fin_words();      // no transfer is left to write or read them
    unmap_peer_segments();  // the accelerators' registrations of them are gone now
    set_progress_hook(nullptr);
}

PinnedPool *host_staging_pool() { return host_pool(&protocol_state().host_staging, make_host_staging_pool); }

PinnedPool *host_chunk_pool() { return host_pool(&protocol_state().host_chunks, make_host_chunk_pool); }

bool slot_key(PinnedPool *pool, void *slot, RemoteSlot *out, std::string *why) {
    void *base = nullptr;
    std::size_t bytes = 0;
    if (!pool->segment_of(slot, &base, &bytes)) {
        *why = "a staging slot outside its pool's segments";
        return false;
    }
    auto &known = protocol_state().registered_segments;
    auto it = known.find(base);
    if (it == known.end()) {
        ProtocolState::Registration r;
        r.bytes = bytes;
        if (netmod().register_memory(base, bytes, &r.key, why) != MPI_SUCCESS) return false;
        it = known.emplace(base, r).first;
    }
    out->address = reinterpret_cast<std::uintptr_t>(slot);
    out->key = it->second.key;
    return true;
}

void release_slot_registrations() {
    for (auto &r : protocol_state().registered_segments) netmod().deregister_memory(r.first, r.second.key);
    protocol_state().registered_segments.clear();
}

}  // namespace mpiacc
