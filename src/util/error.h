// Error reporting: every failure becomes an MPI error class plus a message naming the
// call, the argument and what was wrong, raised through the communicator's handler.
#pragma once

#include <mpi.h>

#include <string>

namespace mpiacc {

// Makes an error code of `error_class` whose MPI_Error_string is
// "<call>: <message>", invokes `comm`'s error handler with it (MPI_COMM_WORLD when comm
// is MPI_COMM_NULL), and returns the code for the call to return.
int raise_error(MPI_Comm comm, int error_class, const char *call, const std::string &message);

// Same, without invoking a handler: for errors stored in a status or returned later.
int make_error_code(int error_class, const char *call, const std::string &message);

// "message: detail", or the message alone when there is no detail.
std::string with_detail(const std::string &message, const std::string &detail);

// Printf-style formatting into a std::string.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace mpiacc
