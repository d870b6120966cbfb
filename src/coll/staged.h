// Collectives on device buffers, staged through host memory: each significant device
// buffer's footprint is copied into page-locked host scratch (ordered after the stream,
// queue or event its attributes name; inputs, and outputs that the call does not write
// whole), MPICH's own collective runs on the scratch, and the outputs are copied back.
// This is what a user would write by hand, without blocking a nonblocking call on the
// GPU, and it serves every collective, datatype, op (user-defined ones included) and mix
// of host and device buffers across ranks.
//
// Order. MPICH matches nonblocking collectives on a communicator in the order they are
// issued. A nonblocking call whose inputs are still being copied cannot be issued yet, so
// it waits in a per-communicator queue, and every later collective on that communicator,
// host or device, queues behind it (issue_order.h). A persistent collective keeps its
// scratch for its life and issues MPICH's nonblocking collective at each start, in the
// same queue: MPICH 4.0.2's own persistent collectives hung here after a few starts, and
// return stale data from a persistent gather, scatter or allgather started twice.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "coll/coll_call.h"
#include "core/op.h"
#include "protocol/transfer.h"

namespace mpiacc {

class StagedCollective final : public Op {
public:
    enum class Form { BLOCKING, NONBLOCKING, PERSISTENT };
    // `issue` is MPICH's nonblocking form, called once the inputs are in host memory.
    StagedCollective(std::unique_ptr<CollCall> call, CollIssue issue, Form form);
    ~StagedCollective() override;

    // Takes the scratch, and starts the copies in (BLOCKING, NONBLOCKING; PERSISTENT at
    // each start()). MPI_SUCCESS, or an error class with *why.
    int begin(std::string *why);

    void progress() override;
    int start() override;
    bool active() const override { return stage_ != Stage::IDLE; }
    bool persistent() const override { return form_ == Form::PERSISTENT; }
    void reset_after_completion() override;
    bool wait_for_device() override;

    // The issue order (issue_order.h): whether its inputs are in host memory, and MPICH's
    // collective started on them. A failed copy in still issues: the other ranks wait for
    // this one, and the error is reported when it completes.
    bool ready_to_issue() const { return stage_ == Stage::READY; }
    void issue();

private:
    enum class Stage { IDLE, COPY_IN, READY, RUNNING, COPY_OUT, DONE };
    struct Staging {
        int slot;
        std::unique_ptr<DeviceBuffer> device;
        // The scratch: pinned memory the device's kind lends, else ours, page-locked
        // where the kind can (BounceBuffer::pin). Taken at the first capture.
        std::unique_ptr<HostScratch> lent;
        BounceBuffer own;
        std::unique_ptr<Completion> copy;
        char *scratch() const { return lent ? lent->data() : own.data(); }
    };
    int capture(Staging &s, std::string *why);
    void take_scratch(Staging &s);
    int copy_in(std::string *why);
    void copy_out();
    bool copies_done();
    void fail(int rc, const std::string &why);
    void finish();

    std::unique_ptr<CollCall> call_;
    CollIssue issue_;
    Form form_;
    Stage stage_ = Stage::IDLE;
    std::vector<Staging> staging_;
    MPI_Request mpich_ = MPI_REQUEST_NULL;
};

}  // namespace mpiacc
