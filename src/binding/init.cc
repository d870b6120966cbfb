// MPI_Init*/MPI_Finalize: MPICH first, then MPI-ACC's context (keyvals, the private
// communicators, the netmod) and its protocol; MPI_Finalize undoes them in turn.
#include "binding/binding.h"
#include "coll/device_algorithms.h"
#include "coll/issue_order.h"
#include "protocol/state.h"

using namespace mpiacc;

namespace {
// After MPICH's own initialisation: the context, the protocol, then the progress thread
// (which drives the protocol).
int initialize_library(int provided_thread_level) {
    int rc = initialize_context(provided_thread_level);
    if (rc == MPI_SUCCESS) rc = protocol_initialize();
    if (rc == MPI_SUCCESS) start_progress_thread();
    return rc;
}
}  // namespace

extern "C" {

int MPI_Init(int *argc, char ***argv) {
    const Knobs &k = reload_knobs();
    int provided = MPI_THREAD_SINGLE;
    int rc;
    if (k.async_progress) {
        // The progress thread calls MPI concurrently with the application.
        rc = PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        rc = PMPI_Init(argc, argv);
        PMPI_Query_thread(&provided);
    }
    if (rc != MPI_SUCCESS) return rc;
    return initialize_library(provided);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    const Knobs &k = reload_knobs();
    int asked = k.async_progress ? MPI_THREAD_MULTIPLE : required;
    int got = MPI_THREAD_SINGLE;
    int rc = PMPI_Init_thread(argc, argv, asked, &got);
    if (rc != MPI_SUCCESS) return rc;
    // The application is told what it asked for, capped by what MPICH gave.
    *provided = got < required ? got : required;
    return initialize_library(got);
}

int MPI_Finalize(void) {
    if (context().initialized) wait_for_queued_collectives(MPI_COMM_NULL);
    release_device_scratch();
    protocol_finalize();
    finalize_context();
    return PMPI_Finalize();
}

}  // extern "C"
