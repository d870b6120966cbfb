#include "util/error.h"

#include <array>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <mutex>

// MPICH's own constructor of instance-specific error codes. It is part of MPICH's public
// ABI (MPICH_API_PUBLIC; ROMIO builds its errors with it) and keeps the standard class in
// the code, so MPI_Error_class answers as MPI says. Its string, though, always leads with
// MPICH's class text ("Unsupported file operation" for MPI_ERR_UNSUPPORTED_OPERATION),
// and MPI_Add_error_code/MPI_Add_error_string cannot help: in MPICH 4.0.2 a code added to
// a predefined class is misread as an instance code and MPI_Error_string prints another
// message's text. So MPI-ACC keeps the text of its own codes here, and its
// MPI_Error_string (binding/error_string.cc) answers with it.
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

// The texts of the most recent codes. MPICH's own ring of instance messages holds 128;
// a code older than this many is answered by MPICH, as plain MPICH would.
struct RecentErrors {
    struct Entry {
        int code = MPI_SUCCESS;
        std::string text;
    };
    std::mutex lock;
    std::array<Entry, 256> entries;
    std::size_t next = 0;
};

RecentErrors &recent() {
    static RecentErrors *r = new RecentErrors();  // lives for the process: atexit order must not matter
    return *r;
}

// "buf: the cl_mem is NULL" names argument "buf": a lowercase C identifier then ": ".
std::size_t argument_length(const std::string &message) {
    std::size_t i = 0;
    while (i < message.size() && (std::islower(static_cast<unsigned char>(message[i])) || message[i] == '_' ||
                                  (i > 0 && std::isdigit(static_cast<unsigned char>(message[i])))))
        ++i;
    return i > 0 && message.compare(i, 2, ": ") == 0 ? i : 0;
}

std::string compose(const char *call, const std::string &message) {
    const std::size_t arg = argument_length(message);
    if (arg == 0) return std::string(call) + ": " + message;
    return std::string(call) + "(" + message.substr(0, arg) + ")" + message.substr(arg);
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
    const std::string text = compose(call, message);
    const int code =
        MPIR_Err_create_code(MPI_SUCCESS, 0, call, 0, error_class, generic_key(error_class), "%s", text.c_str());
    RecentErrors &r = recent();
    std::lock_guard<std::mutex> guard(r.lock);
    RecentErrors::Entry &e = r.entries[r.next++ % r.entries.size()];
    e.code = code;
    e.text = text;
    return code;
}

bool error_text(int code, std::string *text) {
    if (code == MPI_SUCCESS) return false;
    RecentErrors &r = recent();
    std::lock_guard<std::mutex> guard(r.lock);
    // Newest first: MPICH reuses a code once its ring wraps.
    for (std::size_t i = 1; i <= r.entries.size() && i <= r.next; ++i) {
        const RecentErrors::Entry &e = r.entries[(r.next - i) % r.entries.size()];
        if (e.code == code) {
            *text = e.text;
            return true;
        }
    }
    return false;
}

namespace {

// Aborts, printing MPI-ACC's text for `code`, when `handler` is MPI_ERRORS_ARE_FATAL (the
// job) or MPI_ERRORS_ABORT (abort_comm's processes; null: not handled here). Frees the
// handler handle either way.
void abort_if_fatal(MPI_Errhandler handler, MPI_Comm abort_comm, int code) {
    std::string text;
    const bool ours = error_text(code, &text);
    const bool fatal = handler == MPI_ERRORS_ARE_FATAL;
    const bool abort_here = abort_comm != MPI_COMM_NULL && handler == MPI_ERRORS_ABORT;
    if (handler != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&handler);
    if (!ours || !(fatal || abort_here)) return;
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "Fatal error on rank %d: %s\n", rank, text.c_str());
    std::fflush(stderr);
    PMPI_Abort(fatal ? MPI_COMM_WORLD : abort_comm, code);
}

}  // namespace

void call_errhandler(MPI_Comm comm, int code) {
    if (comm == MPI_COMM_NULL) comm = MPI_COMM_WORLD;
    MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
    if (PMPI_Comm_get_errhandler(comm, &handler) == MPI_SUCCESS) abort_if_fatal(handler, comm, code);
    PMPI_Comm_call_errhandler(comm, code);
}

// MPI_ERRORS_ABORT on a window or a file aborts its group, which has no communicator
// here: MPICH's handler does that one.
void call_win_errhandler(MPI_Win win, int code) {
    MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
    if (PMPI_Win_get_errhandler(win, &handler) == MPI_SUCCESS) abort_if_fatal(handler, MPI_COMM_NULL, code);
    PMPI_Win_call_errhandler(win, code);
}

void call_file_errhandler(MPI_File fh, int code) {
    MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
    if (PMPI_File_get_errhandler(fh, &handler) == MPI_SUCCESS) abort_if_fatal(handler, MPI_COMM_NULL, code);
    PMPI_File_call_errhandler(fh, code);
}

int raise_error(MPI_Comm comm, int error_class, const char *call, const std::string &message) {
    int code = make_error_code(error_class, call, message);
    call_errhandler(comm, code);
    return code;
}

}  // namespace mpiacc
