#include "util/error.h"

#include <cstdarg>
#include <cstdio>

// MPICH's own constructor of instance-specific error codes. It is part of MPICH's public
// ABI (MPICH_API_PUBLIC; ROMIO builds its errors with it) and is the only way to give an
// error code of a predefined class its own message: in MPICH 4.0, MPI_Add_error_code on a
// predefined class yields a code whose MPI_Error_string ignores MPI_Add_error_string.
extern "C" int MPIR_Err_create_code(int lastcode, int fatal, const char fcname[], int line, int error_class,
                                    const char generic_msg[], const char specific_msg[], ...);

namespace mpiacc {

namespace {

// MPICH's generic message key for each class we raise; the key only has to exist.
const char *generic_key(int error_class) {
    switch (error_class) {
        case MPI_ERR_ARG: return "**arg";
        case MPI_ERR_BUFFER: return "**buffer";
        case MPI_ERR_COUNT: return "**count";
        case MPI_ERR_TYPE: return "**dtype";
        case MPI_ERR_TRUNCATE: return "**truncate";
        case MPI_ERR_NO_MEM: return "**nomem";
        case MPI_ERR_INTERN: return "**intern";
        case MPI_ERR_REQUEST: return "**request";
        default: return "**other";
    }
}

}  // namespace

std::string format(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

std::string with_detail(const std::string &message, const std::string &detail) {
    return detail.empty() ? message : message + ": " + detail;
}

int make_error_code(int error_class, const char *call, const std::string &message) {
    // An error class in, or an error code MPICH already made (it keeps its own message).
    int cls = error_class;
    PMPI_Error_class(error_class, &cls);
    if (cls != error_class) return error_class;
    return MPIR_Err_create_code(MPI_SUCCESS, 0, call, 0, error_class, generic_key(error_class), "%s", message.c_str());
}

int raise_error(MPI_Comm comm, int error_class, const char *call, const std::string &message) {
    int code = make_error_code(error_class, call, message);
    PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, code);
    return code;
}

}  // namespace mpiacc
