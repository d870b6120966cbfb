// Error reporting: every failure becomes an MPI error class plus a message naming the
// call, the argument and what was wrong, raised through the communicator's handler.
#pragma once

#include <mpi.h>

#include <string>

namespace mpiacc {

// Makes an error code of `error_class` whose MPI_Error_string is "<call>: <message>",
// or "<call>(<arg>): <rest>" when the message starts with an argument name and a colon
// ("buf: the cl_mem is NULL"), invokes `comm`'s error handler with it (MPI_COMM_WORLD
// when comm is MPI_COMM_NULL), and returns the code for the call to return.
int raise_error(MPI_Comm comm, int error_class, const char *call, const std::string &message);

// Same, without invoking a handler: for errors stored in a status or returned later.
int make_error_code(int error_class, const char *call, const std::string &message);

// Invokes comm's error handler with `code`. Under MPI_ERRORS_ARE_FATAL (or
// MPI_ERRORS_ABORT) a code of ours aborts here, printing the user's call and MPI-ACC's
// text; MPICH's handler would name MPI_Comm_call_errhandler and its own class text.
void call_errhandler(MPI_Comm comm, int code);
// The same for a window's and a file's error handler.
void call_win_errhandler(MPI_Win win, int code);
void call_file_errhandler(MPI_File fh, int code);

// MPI-ACC's text for a code that make_error_code made, if it is still remembered (the
// most recent codes are); false for any other code.
bool error_text(int code, std::string *text);

// "message: detail", or the message alone when there is no detail.
std::string with_detail(const std::string &message, const std::string &detail);

// Printf-style formatting into a std::string.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace mpiacc
