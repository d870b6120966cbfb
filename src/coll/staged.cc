#include "coll/staged.h"

#include <utility>

#include "coll/issue_order.h"
#include "datatype/layout.h"
#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {

StagedCollective::StagedCollective(std::unique_ptr<CollCall> call, CollIssue issue, Form form)
    : call_(std::move(call)), issue_(std::move(issue)), form_(form) {
    comm = call_->comm();
    this->call = call_->call();
}

StagedCollective::~StagedCollective() = default;

int StagedCollective::begin(std::string *why) {
    for (int slot = 0; slot < 2; ++slot) {
        if (!call_->buffer(slot).device()) continue;
        Staging s;
        s.slot = slot;
        staging_.push_back(std::move(s));
    }
    if (form_ != Form::BLOCKING) call_->keep_types();
    if (form_ == Form::PERSISTENT) {
        // Captured at each start; once now, so that a buffer its attributes cannot
        // describe is the init call's error, and the scratch is taken for good.
        for (Staging &s : staging_) {
            int rc = capture(s, why);
            if (rc == MPI_SUCCESS && s.device) take_scratch(s);
            s.device.reset();
            if (rc != MPI_SUCCESS) return rc;
        }
        return MPI_SUCCESS;
    }
    stage_ = Stage::COPY_IN;
    int rc = copy_in(why);
    if (rc != MPI_SUCCESS) {
        stage_ = Stage::IDLE;
        return rc;
    }
    queue_collective(comm, this);
    progress();  // inputs already staged (or none) go to MPICH at once, in their turn
    return MPI_SUCCESS;
}

int StagedCollective::start() {
    if (stage_ != Stage::IDLE) return MPI_ERR_REQUEST;
    complete = false;
    error = MPI_SUCCESS;
    std::string why;
    stage_ = Stage::COPY_IN;
    int rc = copy_in(&why);
    if (rc != MPI_SUCCESS) {
        stage_ = Stage::IDLE;
        complete = true;
        return make_error_code(rc, "MPI_Start", why);
    }
    queue_collective(comm, this);
    progress();
    return MPI_SUCCESS;
}

int StagedCollective::capture(Staging &s, std::string *why) {
    const CollBuffer &b = call_->buffer(s.slot);
    BufferAttrs a = b.attrs;
    a.within_call = form_ == Form::BLOCKING;
    int rc = capture_footprint(b.user, b.lo, b.hi, a, &s.device, why);
    if (rc != MPI_SUCCESS && why->rfind(std::string(b.arg) + ": ", 0) != 0)
        *why = format("%s: %s", b.arg, why->c_str());
    return rc;
}

// Scratch the device's kind lends (OpenCL: pinned in the buffer's context), else a
// BounceBuffer page-locked once and cached, so that the copies are DMA.
void StagedCollective::take_scratch(Staging &s) {
    const CollBuffer &b = call_->buffer(s.slot);
    if (!s.lent && !s.own.data()) {
        const auto bytes = static_cast<std::size_t>(b.hi - b.lo);
        s.lent = s.device->acquire_host_scratch(bytes);
        if (s.lent) {
            MPIACC_COUNT("coll.scratch_lent");
        } else {
            s.own = BounceBuffer(bytes, true);
            s.own.pin(accel_for(b.attrs.kind));
        }
    }
    call_->set_host(s.slot, typed_address(s.scratch(), static_cast<MPI_Aint>(-b.lo)));
}

int StagedCollective::copy_in(std::string *why) {
    for (Staging &s : staging_) {
        int rc = capture(s, why);
        if (rc != MPI_SUCCESS) return rc;
        const CollBuffer &b = call_->buffer(s.slot);
        if (!s.device) {
            // Page-locked host memory tagged as device memory: MPICH reads it as it is.
            call_->set_host(s.slot, nullptr);
            continue;
        }
        take_scratch(s);
        // An output the call does not write whole keeps its other bytes: they go to the
        // scratch first, and come back as they were.
        if (!b.in && b.covered) continue;
        rc = s.device->copy_to_host(0, s.scratch(), static_cast<std::size_t>(b.hi - b.lo), &s.copy, why);
        if (rc != MPI_SUCCESS) {
            *why = format("%s: %s", b.arg, why->c_str());
            return rc;
        }
        MPIACC_COUNT("coll.staged_in");
    }
    return MPI_SUCCESS;
}

void StagedCollective::copy_out() {
    for (Staging &s : staging_) {
        const CollBuffer &b = call_->buffer(s.slot);
        if (!b.out || !s.device) continue;
        std::string why;
        int rc = s.device->copy_from_host(0, s.scratch(), static_cast<std::size_t>(b.hi - b.lo), &s.copy, &why);
        if (rc != MPI_SUCCESS) fail(rc, format("%s: %s", b.arg, why.c_str()));
        MPIACC_COUNT("coll.staged_out");
    }
}

bool StagedCollective::copies_done() {
    bool done = true;
    for (Staging &s : staging_) {
        if (!s.copy) continue;
        if (!s.copy->test()) {
            done = false;
            continue;
        }
        if (s.copy->error() != MPI_SUCCESS) {
            const std::string what = s.copy->what();
            fail(s.copy->error(), format("%s: device copy failed%s%s", call_->buffer(s.slot).arg,
                                         what.empty() ? "" : ": ", what.c_str()));
        }
        s.copy.reset();
    }
    return done;
}

void StagedCollective::fail(int rc, const std::string &why) {
    if (error != MPI_SUCCESS) return;  // the first failure is the one reported
    error = make_error_code(rc, call, why);
}

void StagedCollective::issue() {
    int rc = issue_(*call_, &mpich_);
    stage_ = Stage::RUNNING;
    if (rc != MPI_SUCCESS) {
        if (error == MPI_SUCCESS) error = rc;  // MPICH's own code, with its message
        stage_ = Stage::COPY_OUT;
    }
    progress();
}

void StagedCollective::progress() {
    switch (stage_) {
        case Stage::IDLE:
        case Stage::DONE: return;
        case Stage::COPY_IN:
            if (!copies_done()) return;
            stage_ = Stage::READY;
            [[fallthrough]];
        case Stage::READY:
            // issue() runs progress() again from RUNNING.
            issue_queued_collectives(comm);
            return;
        case Stage::RUNNING: {
            int flag = 0;
            MPI_Status st;
            int rc = PMPI_Test(&mpich_, &flag, &st);
            if (rc != MPI_SUCCESS && error == MPI_SUCCESS) error = rc;
            if (!flag && rc == MPI_SUCCESS) return;
            // An output is copied back whatever MPICH said: another rank's failure is not
            // this rank's, and the bytes it did get are the user's.
            copy_out();
            stage_ = Stage::COPY_OUT;
            [[fallthrough]];
        }
        case Stage::COPY_OUT:
            if (!copies_done()) return;
            finish();
            return;
    }
}

void StagedCollective::finish() {
    stage_ = Stage::DONE;
    set_status(&status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS, false);
    for (Staging &s : staging_) s.device.reset();
    if (form_ != Form::PERSISTENT) {
        staging_.clear();  // the scratch goes back to its cache now
        call_->release_types();
    }
    complete = true;
}

void StagedCollective::reset_after_completion() {
    if (form_ == Form::PERSISTENT) stage_ = Stage::IDLE;
}

bool StagedCollective::wait_for_device() {
    bool waited = false;
    for (Staging &s : staging_) {
        if (!s.copy) continue;
        s.copy->wait_bounded();
        waited = true;
    }
    return waited;
}

}  // namespace mpiacc
