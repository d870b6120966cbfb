// An operation MPI-ACC drives itself (a rendezvous transfer, a device receive, a
// persistent request). The progress engine calls progress() until done().
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>

namespace mpiacc {

class Op {
public:
    // How the user's MPI_Request handle relates to this op.
    enum class Handle {
        NONE,        // internal or freed by the user: nobody waits for it
        GREQUEST,    // a generalized request made for it (MPI_Grequest_start)
        WATCHED,     // the MPICH receive request itself (host receive into the user buffer)
        PERSISTENT,  // an inactive MPICH persistent request standing for it
    };

    virtual ~Op() = default;
    // Advance without blocking. Sets complete when the operation has finished.
    virtual void progress() = 0;
    // MPI_Cancel. Returns an MPI error code.
    virtual int cancel() { return MPI_SUCCESS; }
    // Persistent ops: (re)start, and whether a started instance is running.
    virtual int start() { return MPI_ERR_REQUEST; }
    virtual bool active() const { return !complete; }
    virtual bool persistent() const { return false; }
    // For persistent ops, the completed instance's status is moved out by retire.
    virtual void reset_after_completion() {}
    // Waits for the op's device copy in flight, where Completion::wait_bounded may block,
    // and says whether there was one. Called by a blocking call when this op is the only
    // one in flight.
    virtual bool wait_for_device() { return false; }
    // Whether MPI_Finalize cancels this op when nobody waits for it: a receive, yes; a
    // send still has to reach its receiver.
    virtual bool cancel_when_abandoned() const { return false; }
    // MPI_Cancel of an op that cancel() neither withdrew nor completed: returns an op that
    // finishes the transfer without the user's buffer (the caller detaches it), and this
    // one is then complete and not cancelled, so the user's wait returns (MPI 3.8.4).
    // Null when the op completes by itself anyway; *rc an error when it can be neither
    // withdrawn nor finished without the user's buffer.
    virtual std::unique_ptr<Op> release_from_user(int * /*rc*/) { return nullptr; }
    // Waits for nothing but a receiver to match it. At MPI_Finalize, once every rank has
    // stopped posting receives, such an op nobody waits for never completes: abandoned.
    virtual bool awaits_match() const { return false; }
    // A completed op about to be kept a while before it is destroyed (retire_later) gives
    // back at once what the next operation would otherwise allocate again: bounce
    // buffers, staging slots.
    virtual void release_pooled() {}

    bool complete = false;
    MPI_Status status{};      // final source, tag, count (bytes), error
    int error = MPI_SUCCESS;  // error code (with message) to return, when failed
    MPI_Comm comm = MPI_COMM_NULL;
    const char *call = "";
    Handle handle_kind = Handle::NONE;
    MPI_Request user_handle = MPI_REQUEST_NULL;
    bool counted_pending = false;  // included in Context::pending
    bool waited_by_call = false;   // a blocking call drives it (run_to_completion)
};

}  // namespace mpiacc
