// What the protocol keeps between calls, made at MPI_Init and emptied at MPI_Finalize:
// the transfers waiting for control messages, pipeline admission, host receive records,
// small device sends still being staged, probed envelopes, the per-peer runs of staged
// small sends, and the host staging pools. Core's Context keeps what every part shares
// (knobs, ranks, requests, progress); this is the protocol's alone.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "netmod/netmod.h"
#include "pool/pinned_pool.h"
#include "protocol/host_recv.h"

namespace mpiacc {

class SendOp;
class RecvOp;
class StagedSendOp;
struct StashedEnvelope;

struct ProtocolState {
    // Host nonblocking receives, by their MPICH request handle (protocol/host_recv.h).
    HostRecvTable host_recvs;
    // Host buffers with an in-place receive pending (host records and RecvOps alike).
    InPlaceRanges in_place_ranges;
    // Senders waiting for CTS/FIN, by transfer id.
    std::unordered_map<std::uint64_t, SendOp *> senders;
    // Receivers in their data phase, by (sender rank, sender's transfer id), for ABORT.
    std::map<std::pair<int, std::uint64_t>, RecvOp *> receivers;
    // Pipeline admission by sender world rank (RecvOp::admit_pipeline,
    // MPIACC_PIPELINE_TRANSFERS): the chunks that receives past their CTS may have in
    // flight, and the receives of several chunks waiting to be admitted.
    struct PipelineAdmission {
        long chunks = 0;
        int several_waiting = 0;
    };
    std::unordered_map<int, PipelineAdmission> pipeline_admission;
    // Nonblocking sends of small device data whose staging copy was still running when
    // the call returned, in call order (StagedSendOp): progress posts each payload once
    // its copy has ended, and any other send to the same communicator and rank waits for
    // the earlier ones first (keep_send_order). `unposted_count` is its length, read
    // without the lock by the entry points; `payload_sequence` numbers the queued ones.
    std::deque<StagedSendOp *> unposted_payloads;
    std::atomic<std::size_t> unposted_count{0};
    std::uint64_t payload_sequence = 0;
    // Envelopes a probe had to receive to learn the real size, in arrival order.
    std::deque<std::unique_ptr<StashedEnvelope>> stash;
    // Message handles given out by MPI_Mprobe for stashed envelopes.
    std::unordered_map<MPI_Message, std::unique_ptr<StashedEnvelope>> probed_messages;
    // By world rank: small blocking device sends still to go by the staged eager path
    // before IPC is offered to that peer again (it declined the last offer: the data
    // went to host memory). See send_common.
    std::unique_ptr<std::atomic<int>[]> eager_sends_left;
    // By world rank: the run that peer's next refusal starts (0: kEagerRun).
    std::unique_ptr<std::atomic<int>[]> eager_run;
    // By world rank: the last refusal was a blocking receive's (kCtsDeclinedForBlockingReceive):
    // the run holds for blocking sends only.
    std::unique_ptr<std::atomic<bool>[]> eager_blocking_only;
    // SHARED mode's slots for host send buffers (host_staging_pool()).
    std::unique_ptr<PinnedPool> host_staging;
    // Huge-page slots for host pipeline chunks to a peer on this node (host_chunk_pool()).
    std::unique_ptr<PinnedPool> host_chunks;
    std::uint64_t next_transfer_id = 1;
    // Staging segments registered with the netmod (slot_key), by base: kept to
    // MPI_Finalize, deregistered before their pools go.
    struct Registration {
        std::size_t bytes = 0;
        MemoryKey key;
    };
    std::map<void *, Registration> registered_segments;

    std::uint64_t new_transfer_id() { return next_transfer_id++; }
};

namespace detail {
extern ProtocolState *const the_protocol_state;
}  // namespace detail

// Inline: the entry points read it on their paths.
inline ProtocolState &protocol_state() { return *detail::the_protocol_state; }

// MPI_Init, after initialize_context: per-peer state, each rank's FIN words (exchanged),
// and the protocol's share of every progress round (core/progress.h).
int protocol_initialize();
// MPI_Finalize, before finalize_context: lets transfers nobody waits for reach their
// receivers, cancels receives nobody waits for, then releases everything above and takes
// the control messages still addressed to this rank.
void protocol_finalize();

// The slots a host send buffer is staged through in SHARED mode: shared memory, made on
// first use (StateLock held), pool_size bytes in chunk_size slots, kept to MPI_Finalize.
PinnedPool *host_staging_pool();
// The huge-page slots a host send buffer's pipeline chunks go through to a receiver on
// this node (not shared memory), made and kept the same way.
PinnedPool *host_chunk_pool();

// Where slot `slot` of `pool` is for a one-sided placement (the netmod's key for its
// segment, registered on first use): false with *why when the netmod refused.
bool slot_key(PinnedPool *pool, void *slot, RemoteSlot *out, std::string *why);
// Deregisters every segment slot_key registered (MPI_Finalize, before the pools go).
void release_slot_registrations();

}  // namespace mpiacc
