// Probe points for a diagnostic build: configured with CPPFLAGS=-DMPIACC_PROBES, each
// MPIACC_PROBE("name") records when the calling thread passed it (CLOCK_MONOTONIC, which
// the ranks of one host share) and on which CPU, and MPI_Finalize writes the record to
// $MPIACC_PROBE_DIR/probes.RANK.tsv. maint/diag/probe-timeline.sh builds that library and
// maint/diag/probe-report.py says how long each step between two probes took. The shims
// in maint/diag see only the driver and PMPI calls; what a small IPC message spends over
// the raw pull is the library's own code between them.
// In a normal build the macro is nothing. UCX's UCS_PROFILE_* macros are the model.
#pragma once

#ifdef MPIACC_PROBES

namespace mpiacc {

// `name` must be a string literal: only its address is kept.
void probe(const char *name);
// Writes what was recorded (MPI_Finalize), when MPIACC_PROBE_DIR is set.
void write_probes(int world_rank);

}  // namespace mpiacc

#define MPIACC_PROBE(name) ::mpiacc::probe(name)

#else

#define MPIACC_PROBE(name) ((void)0)

#endif
