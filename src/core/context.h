// The context: what every part of MPI-ACC shares between calls (knobs, ranks, the
// private communicators, keyvals, user requests and progress), created at load time and
// set up at MPI_Init. The protocol keeps its own state beside it (protocol/state.h).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "accel/accel.h"
#include "core/knobs.h"

namespace mpiacc {

class Op;

// Knob values in force (parsed once at MPI_Init; before that, from the environment).
const Knobs &knobs();

// MPI-ACC's attribute keyvals, created at init (DESIGN.md 1).
struct Keyvals {
    int buf_type = MPI_KEYVAL_INVALID;
    int stream = MPI_KEYVAL_INVALID;
    int command_queue = MPI_KEYVAL_INVALID;
    int event = MPI_KEYVAL_INVALID;
    int context = MPI_KEYVAL_INVALID;
    int device = MPI_KEYVAL_INVALID;
    int offset = MPI_KEYVAL_INVALID;
    bool ours(int keyval) const {
        return keyval != MPI_KEYVAL_INVALID &&
               (keyval == buf_type || keyval == stream || keyval == command_queue || keyval == event ||
                keyval == context || keyval == device || keyval == offset);
    }
};

// Context::pending. Changed only under the StateLock, but read without it (blocking
// calls choosing the PMPI path, the progress thread deciding whether to poll), so it is
// atomic; a change is a relaxed load and store rather than a locked read-modify-write,
// which would cost the message-rate path (one change per host receive) for nothing while
// the lock orders writers. An update made outside the lock was lost under
// MPI_THREAD_MULTIPLE: progress then saw zero with a send in flight, stopped polling
// control messages, and the send waited forever for its CTS.
class PendingCount {
public:
    void add() { n_.store(n_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
    void remove() { n_.store(n_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed); }
    void reset() { n_.store(0, std::memory_order_relaxed); }
    std::size_t get() const { return n_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::size_t> n_{0};
};

class Context {
public:
    Knobs knobs;
    // Host payloads of fewer bytes go from the entry points straight to MPICH, set by the
    // protocol (plain_send_limit, protocol/transfer.h): the host rendezvous threshold, or
    // the smallest size a receiver may ask to get by RTS/CTS where that is lower, and 0
    // while small device payloads are still being staged, which must reach MPICH first.
    // One compare on the entry points' path; read without the lock.
    std::atomic<std::size_t> plain_send_below{SIZE_MAX};
    std::vector<std::string> knob_errors;
    Keyvals keyvals;

    bool initialized = false;
    int thread_level = MPI_THREAD_SINGLE;  // what MPICH provided
    int world_rank = 0, world_size = 1;
    MPI_Comm proto_comm = MPI_COMM_NULL;  // private duplicate of MPI_COMM_WORLD (DESIGN 2.3)
    // A second private duplicate, for the meetings that keep blocking communicator
    // constructors from stalling transfers (binding/communicator.cc): its messages can
    // match neither user traffic nor the protocol's data tags, which use every tag.
    MPI_Comm meeting_comm = MPI_COMM_NULL;
    int tag_ub = 32767;
    std::uint64_t node_id = 0;
    std::uint64_t pid_namespace = 0;      // local_pid_namespace(), read at init
    int pid = 0;                          // getpid(), read at init: envelopes carry it
    std::vector<std::uint64_t> node_ids;  // by world rank: who shares this node
    // Some rank of MPI_COMM_WORLD can hold CUDA memory: then every rank begins a large
    // collective with the agreement on its path (coll/device_algorithms.h).
    bool device_collectives = false;
    // MPIACC_CUDA_AUTODETECT on and a kind that detects its pointers usable (AccelCaps).
    bool autodetect_active = false;
    Accel *detecting_accel = nullptr;  // that kind's component, set with autodetect_active
    // With autodetect_active: host memory detecting_accel has ruled out, read inline by
    // the bindings' first test (buffer_desc.h). Empty otherwise.
    KnownHostGranules known_host;

    // Datatypes carrying at least one MPI-ACC attribute, with how many. While empty,
    // every call with an untagged type skips attribute lookups altogether. Once read,
    // a type's attributes are kept here until one of ours is set, replaced or deleted
    // on it (MPI_Type_set_attr and the keyvals' delete callback say so): reading all
    // seven at every call would slow every small tagged message (docs/performance.md,
    // "Tagged datatypes").
    struct TaggedType {
        int attributes = 0;
        std::uint64_t changes = 0;  // sets, replacements and deletions of ours so far
        bool read = false;          // `attrs` holds what read_buffer_attrs found
        BufferAttrs attrs;
    };
    std::unordered_map<MPI_Datatype, TaggedType> tagged_types;
    std::atomic<std::size_t> tagged_type_count{0};

    // User-visible requests MPI-ACC must see completed, by handle.
    std::unordered_map<MPI_Request, std::unique_ptr<Op>> user_ops;
    // Operations nobody waits for: freed by the user while active, or internal.
    std::vector<std::unique_ptr<Op>> detached_ops;
    // Completed operations of blocking calls, destroyed later (core/progress.h:
    // retire_later).
    std::vector<std::unique_ptr<Op>> retired_ops;
    // Incomplete operations (user and detached ops, and posted host receives). While
    // zero, blocking calls go straight to PMPI (DESIGN 2.6).
    PendingCount pending;
    // Serialises MPI-ACC state under MPI_THREAD_MULTIPLE and with the progress thread.
    std::recursive_mutex mutex;
    bool locking = false;
    std::thread progress_thread;
    std::atomic<bool> stop_progress_thread{false};
};

namespace detail {
// Made when the library is loaded (knobs are read then), alive for the process.
extern Context *const the_context;
}  // namespace detail

// The context. Its knobs are valid from load time; the rest between MPI_Init and
// MPI_Finalize. Inline: every binding starts here.
inline Context &context() { return *detail::the_context; }

// Holds the context's mutex when threads may race on MPI-ACC state.
class StateLock {
public:
    StateLock() : ctx_(context()) {
        if (ctx_.locking) ctx_.mutex.lock();
    }
    ~StateLock() {
        if (ctx_.locking) ctx_.mutex.unlock();
    }
    StateLock(const StateLock &) = delete;
    StateLock &operator=(const StateLock &) = delete;

private:
    Context &ctx_;
};

// Reads the knobs from the environment again: MPI_Init is when they take effect, so a
// program may set MPIACC_* before it (the context itself is made at load time).
const Knobs &reload_knobs();

// Lifecycle, called by the MPI_Init*/MPI_Finalize bindings after/before PMPI, around
// the protocol's own (protocol/state.h): initialize_context, protocol_initialize, then
// start_progress_thread; protocol_finalize (which calls stop_progress_thread and
// destroy_ops), then finalize_context.
int initialize_context(int provided_thread_level);
void start_progress_thread();
void stop_progress_thread();
// Destroys every op left (MPI_Finalize: nothing is in flight any more).
void destroy_ops();
// Forgets what was pending (MPI_Finalize, once every op and receive record is gone).
void forget_pending();
void finalize_context();

// True when world rank `peer` runs on this node.
bool same_node(int world_peer);
// True when a send of `kind` data to world rank `peer` is offered for an IPC pull: a kind
// with IPC, a peer on this node, IPC on (BufferAttrs::ipc_offer).
bool ipc_pull_offered(BufKind kind, int world_peer);
// The same for rank `dest` of comm, translated to a world rank only for a kind with IPC
// (on a communicator other than MPI_COMM_WORLD that takes five PMPI group calls).
bool ipc_pull_offered(BufKind kind, MPI_Comm comm, int dest);

// The world rank of `rank` in `comm` (remote group for intercommunicators).
int world_rank_of(MPI_Comm comm, int rank);

}  // namespace mpiacc
