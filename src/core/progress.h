// The progress engine (DESIGN.md 2.6) and the table of user-visible operations.
#pragma once

#include <mpi.h>

#include <memory>

#include "core/context.h"
#include "core/op.h"

namespace mpiacc {

// True while MPI-ACC has anything in flight; blocking calls then turn into their
// nonblocking form plus progress instead of going straight to PMPI.
inline bool transfers_in_flight() { return context().pending.get() != 0; }

// Whether a blocking call may wait for a device copy it issues now as the only work of
// ours on the device (CopyUse::WAITED_AT_ONCE): nothing in flight but its own `own_ops`
// (0 or 1), and no other thread (MPI_THREAD_MULTIPLE, the progress thread) that could
// enqueue more meanwhile.
inline bool copy_waited_at_once(std::size_t own_ops) {
    const Context &ctx = context();
    return !ctx.locking && ctx.pending.get() == own_ops;
}

// The protocol's share of each round, run before the ops (protocol/state.cc: control
// messages, host receive records, staged payloads); null outside MPI_Init..MPI_Finalize.
// `skip_host_recvs` as for progress_poke.
using ProgressHook = void (*)(bool skip_host_recvs);
void set_progress_hook(ProgressHook hook);

// One round: the progress hook (control messages, host receives), then every pending
// operation. Completion calls test the host receives they wait for themselves (one
// batched MPI_Testsome) and pass `skip_host_recvs` on most rounds; every 16th round
// still polls the others, one of which may hold an envelope whose sender waits for our
// CTS.
void progress_poke(bool skip_host_recvs = false);

// Drives progress until `done()` holds.
template <class Done>
void progress_until(Done done) {
    while (!done()) progress_poke();
}

// Registers `op` under a user handle. For Handle::GREQUEST a generalized request is made
// and returned; for WATCHED and PERSISTENT the given handle is used.
MPI_Request register_user_op(std::unique_ptr<Op> op, Op::Handle kind, MPI_Request handle);
// An op nobody waits for (freed by the user while active, or internal): driven to
// completion by progress and then destroyed.
void add_detached_op(std::unique_ptr<Op> op);
Op *find_user_op(MPI_Request handle);
// Completes the user's view of a finished op: fills *status, frees or resets the handle,
// returns the op's error code (without invoking an error handler).
int retire_user_op(MPI_Request *handle, MPI_Status *status);
// MPI_Request_free on an MPI-ACC handle.
int free_user_op(MPI_Request *handle);
// A blocking call's op once it has completed: destroyed in a later wait
// (destroy_retired_ops), not on the way back to the caller. Tearing down a small IPC
// receive (the copy's event, the mapping's and the buffers' records, the op) lies between
// its FIN and its return, on the critical path of a ping-pong; in the next call's wait it
// costs nothing (docs/performance.md, "Retiring a blocking call's op").
void retire_later(std::unique_ptr<Op> op);
// Destroys the retired ops. Called where a blocking call is about to wait anyway (its op
// has not completed this round) and at MPI_Finalize; retire_later itself empties the list
// when 16 have gathered (a program of nonblocking calls between its blocking ones).
void destroy_retired_ops();
// MPI_Finalize: cancels the ops nobody waits for that Op::cancel_when_abandoned (receives;
// sends still have to reach their receivers). Caller holds the StateLock.
void cancel_abandoned_ops();
// Whether an op nobody waits for is still in flight.
bool detached_ops_left();
// Counts an op as in flight until progress sees it complete (under the StateLock).
void mark_pending(Op *op);
// Uncounts a completed op that no table holds (blocking calls).
void settle_pending(Op *op);

}  // namespace mpiacc
