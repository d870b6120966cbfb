// The order in which collectives reach MPICH. MPICH matches the nonblocking collectives
// of a communicator by the order they are issued in, which must be the user's calling
// order on every rank. A staged collective (staged.h) whose inputs are still being
// copied out of device memory cannot be issued yet: it waits in its communicator's
// queue, and every collective called after it on that communicator, host data or not,
// queues behind it. With nothing queued (no nonblocking device collective in its copy
// phase) a collective costs one relaxed load here.
#pragma once

#include <mpi.h>

namespace mpiacc {

class StagedCollective;

// Whether any collective waits for its turn on any communicator.
bool collectives_queued();
// Whether one waits on `comm`.
bool collectives_queued_on(MPI_Comm comm);
// Queues `op` behind those already waiting on `comm`.
void queue_collective(MPI_Comm comm, StagedCollective *op);
// Issues the ops at the head of `comm`'s queue that are ready, in order.
void issue_queued_collectives(MPI_Comm comm);
// Drives progress until nothing waits on `comm` (MPI_COMM_NULL: on any communicator):
// before a call that issues a collective of its own on it (a communicator constructor,
// a persistent initialisation, MPI_Comm_free), or frees what a queued one names.
void wait_for_queued_collectives(MPI_Comm comm);

}  // namespace mpiacc
