// Copies between device buffers in flight for a blocking collective, waited for together
// as a blocking point-to-point call waits for its copy (binding/pt2pt.cc): in the driver
// when nothing else of MPI-ACC's is in flight, else with MPI-ACC's progress, so that a
// rank waiting here still answers its peers. The first failure is kept; the destructor
// waits too, so no copy outlives its buffers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accel/accel.h"
#include "core/progress.h"

namespace mpiacc {

class DeviceCopies {
public:
    DeviceCopies() = default;
    DeviceCopies(const DeviceCopies &) = delete;
    DeviceCopies &operator=(const DeviceCopies &) = delete;
    ~DeviceCopies() {
        std::string why;
        wait(&why);
    }
    int copy(DeviceBuffer &src, std::size_t src_at, DeviceBuffer &dst, std::size_t dst_at, std::size_t len,
             std::string *why) {
        if (len == 0) return MPI_SUCCESS;
        std::unique_ptr<Completion> done;
        int rc = src.copy_to_device(src_at, dst, dst_at, len, &done, why);
        if (rc == MPI_SUCCESS && done) pending_.push_back(std::move(done));
        return rc;
    }
    int wait(std::string *why) {
        int rc = MPI_SUCCESS;
        for (auto &d : pending_) {
            if (!transfers_in_flight()) d->wait_bounded();
            progress_until([&] { return d->test(); });
            if (d->error() != MPI_SUCCESS && rc == MPI_SUCCESS) {
                rc = d->error();
                *why = "device copy failed: " + d->what();
            }
        }
        pending_.clear();
        return rc;
    }

private:
    std::vector<std::unique_ptr<Completion>> pending_;
};

}  // namespace mpiacc
