// Private duplicates of the communicators of objects whose collective calls block in
// MPICH (windows, files): their members meet there with MPI-ACC progress before each such
// call (meet_members; communicator.cc says why that suffices). A duplicate, because the
// user may free the communicator the object was made from.
#ifndef MPIACC_BINDING_MEETING_COMMS_H
#define MPIACC_BINDING_MEETING_COMMS_H

#include <mutex>
#include <unordered_map>

#include "binding/binding.h"

namespace mpiacc {

template <typename Handle>
class MeetingComms {
public:
    // The duplicate of h's communicator, or MPI_COMM_NULL (h was made before MPI_Init or
    // without libmpiacc: its calls go straight to MPICH).
    MPI_Comm of(Handle h) {
        if (!context().initialized) return MPI_COMM_NULL;
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = comms_->find(h);
        return it == comms_->end() ? MPI_COMM_NULL : it->second;
    }

    // Runs the collective constructor `make` (which sets *h) once the members of comm
    // have met, then duplicates comm for h's later meetings.
    template <typename Make>
    int create(MPI_Comm comm, Handle *h, Make make) {
        if (!context().initialized || comm == MPI_COMM_NULL) return make();
        int rc = meet_members(comm);
        if (rc != MPI_SUCCESS) return rc;
        rc = make();
        if (rc != MPI_SUCCESS) return rc;
        MPI_Comm dup = MPI_COMM_NULL;
        MPI_Request r;
        rc = PMPI_Comm_idup(comm, &dup, &r);
        if (rc == MPI_SUCCESS) rc = wait_mpich_request(&r, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return rc;
        std::lock_guard<std::mutex> lock(mutex_);
        (*comms_)[*h] = dup;
        return MPI_SUCCESS;
    }

    // Runs the collective destructor `destroy` (which frees *h) once h's members have met,
    // then frees the duplicate.
    template <typename Destroy>
    int destroy(Handle *h, Destroy destroy) {
        const Handle handle = *h;
        MPI_Comm meet = of(handle);
        if (meet != MPI_COMM_NULL) {
            int rc = meet_members(meet);
            if (rc != MPI_SUCCESS) return rc;
        }
        int rc = destroy();
        if (rc == MPI_SUCCESS && meet != MPI_COMM_NULL) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                comms_->erase(handle);
            }
            PMPI_Comm_free(&meet);
        }
        return rc;
    }

    // Meets h's members (MPI_SUCCESS at once when h has no duplicate).
    int meet(Handle h) {
        MPI_Comm comm = of(h);
        return comm == MPI_COMM_NULL ? MPI_SUCCESS : meet_members(comm);
    }

private:
    std::mutex mutex_;
    // Never freed: it outlives static destructors that may still look handles up.
    std::unordered_map<Handle, MPI_Comm> *comms_ = new std::unordered_map<Handle, MPI_Comm>;
};

}  // namespace mpiacc

#endif
