// Moving protocol bytes between ranks after the envelope (DESIGN.md 2.3): control messages
// (CTS, FIN, ABORT, CHUNK_DONE, hints), pipeline chunks and direct transfers, addressed by
// world rank and a tag from the transfer id. The protocol sees only this table, as MPICH's
// ch4 sees its netmods: the `mpi` netmod carries everything over MPICH on the private
// communicator (InfiniBand through UCX included); a verbs netmod (`ib`) places chunks
// one-sided into registered slots the receiver names in its CTS.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mpiacc {

// A transfer in flight, as the netmod that posted it knows it. Empty (value 0) when none
// is posted or it has completed. A plain value: the op that posted it keeps it and hands
// it back to the same netmod.
struct NetHandle {
    std::uint64_t value = 0;
    bool pending() const { return value != 0; }
};

// A registered region: what a transport that places one-sided needs to address it.
// Non-zero once registered.
struct MemoryKey {
    std::uint64_t key = 0;
};

// Where a placement lands: a slot of the receiver's registered memory, as its CTS names
// it (address and key). Unnamed (key 0) when the placement goes two-sided: the
// receiver's expect_placement names the slot on its side.
struct RemoteSlot {
    std::uint64_t address = 0;
    MemoryKey key;
    bool named() const { return key.key != 0; }
};

// How placements between this rank and a peer go. PENDING while the two are still
// finding out (the first question about a peer may start that): ask again later.
enum class PeerReach { PENDING, TWO_SIDED, ONE_SIDED };

struct NetmodCaps {
    // Chunks are written into the receiver's slot without the receiver posting for each.
    bool one_sided = false;
    // Slots must be registered (register_memory) before a placement may name them.
    bool needs_registration = false;
};

class Netmod {
public:
    virtual ~Netmod() = default;
    virtual const char *name() const = 0;
    virtual NetmodCaps caps() const = 0;
    // Whether the receiver of a pipeline from `peer` names slots in its CTS (ONE_SIDED).
    // Both sides answer the same once neither says PENDING.
    virtual PeerReach reach(int peer) = 0;
    // MPI_SUCCESS, or an MPI error class with *why once the transport to `peer` failed:
    // every handle of it has completed then, and later transfers with it go two-sided.
    virtual int peer_failure(int peer, std::string *why) = 0;
    // The peer said (ABORT) that its transport to this rank failed: the same here.
    virtual void fail_peer(int peer, const std::string &why) = 0;

    // Registers [base, base + bytes) once (a pool's segment) and gives its key; undone by
    // deregister_memory before the memory is freed. Only where caps().needs_registration.
    virtual int register_memory(void *base, std::size_t bytes, MemoryKey *key, std::string *why) = 0;
    virtual void deregister_memory(void *base, const MemoryKey &key) = 0;

    // Two-sided byte transfers (direct mode, shared-slot notices).
    virtual int send_bytes(const void *buf, std::size_t len, int peer, int tag, NetHandle *handle) = 0;
    virtual int recv_bytes(void *buf, std::size_t len, int peer, int tag, NetHandle *handle) = 0;
    // Typed transfers straight between user buffers (direct mode, host to host).
    virtual int send_typed(const void *buf, int count, MPI_Datatype type, int peer, int tag, NetHandle *handle) = 0;
    virtual int recv_typed(void *buf, int count, MPI_Datatype type, int peer, int tag, NetHandle *handle) = 0;

    // A pipeline chunk: `len` bytes of `src` placed into the receiver's `slot` for the
    // transfer of `tag`. The receiver's side is expect_placement into that slot
    // (`named`: its CTS named it, so the bytes come one-sided); its handle completes once
    // the bytes are there. Placements on one tag land in the order they were made.
    virtual int place(const void *src, std::size_t len, int peer, int tag, const RemoteSlot &slot,
                      NetHandle *handle) = 0;
    virtual int expect_placement(void *slot, std::size_t len, int peer, int tag, bool named, NetHandle *handle) = 0;

    // Control messages of `len` bytes, on a channel of their own. poll_control takes the
    // next one that has arrived, if any, into up to `capacity` bytes (*received: its
    // length); wait_control blocks for one (MPI_Finalize).
    virtual int send_control(const void *msg, std::size_t len, int peer, NetHandle *handle) = 0;
    virtual bool poll_control(void *msg, std::size_t capacity, int *from, std::size_t *received) = 0;
    virtual bool wait_control(void *msg, std::size_t capacity, int *from, std::size_t *received) = 0;
    // Collective over every rank: *total = the sum of every rank's per_peer[this rank]
    // (how many control messages were sent to this rank in all).
    virtual int sum_sent_to_me(const int *per_peer, int *total) = 0;

    // True once `handle`'s transfer has completed (the handle is then empty); true for an
    // empty handle. Never blocks.
    virtual bool test(NetHandle *handle) = 0;
    // Blocks until it has completed.
    virtual void wait(NetHandle *handle) = 0;
    // Asks to cancel a posted receive; a receive already matched still completes, so the
    // handle stays until test() sees it end.
    virtual void cancel(NetHandle *handle) = 0;
    // Cancels a posted send and forgets it: nothing waits for it any more.
    virtual void abandon(NetHandle *handle) = 0;
    // Forgets the handle without waiting; the transfer ends on its own.
    virtual void release(NetHandle *handle) = 0;
};

// What the core tells the netmods at MPI_Init.
struct NetmodOptions {
    int world_rank = 0;
    int world_size = 1;
    bool (*same_node)(int world_peer) = nullptr;
    // MPIACC_TEST_IB: "auto" (verbs to peers on other nodes that a device reaches),
    // "on" (to every peer a device reaches, this node's too), "off".
    std::string ib_policy = "auto";
    // MPIACC_TEST_IB_DEVICES: "rxe0,rxe1": rank r opens entry r mod n; empty = the first
    // device with an ACTIVE port.
    std::string ib_devices;
    // MPIACC_FAULT_RKEY: "RANK:N" spoils the rkey of that rank's N-th RDMA write.
    std::string fault_rkey;
};

// Sets up the netmod in use over the private communicator (MPI_Init) and lets it go
// (MPI_Finalize).
int initialize_netmod(MPI_Comm private_comm, const NetmodOptions &options);
void finalize_netmod();
// The netmod in use: `mpi` over the private communicator, or `ib` in front of it where
// verbs is built in and not turned off (it hands `mpi` all but one-sided placements).
Netmod &netmod();
// The netmod MPI_Init chose, in words ("ib: chunks as RDMA writes to ...", "mpi ...").
std::string netmod_choice();
// The same for a value of MPIACC_TEST_IB, before MPI_Init (mpiacc_info).
std::string describe_netmod_choice(const std::string &ib_policy);

// The `mpi` netmod over `private_comm` (mpi_netmod.cc).
Netmod &mpi_netmod(MPI_Comm private_comm);
// The `ib` netmod in front of `mpi` (ib/ib_netmod.cc; built only where verbs is).
std::unique_ptr<Netmod> make_ib_netmod(Netmod &mpi, MPI_Comm private_comm, const NetmodOptions &options);

}  // namespace mpiacc
