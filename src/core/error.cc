#include "core/error.h"

#include <cstdarg>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

namespace mpiacc {

namespace {

// MPI has no way to attach a message to a single error occurrence, so each class gets a
// small ring of dynamic codes (MPI_Add_error_code) whose strings are replaced as they are
// reused. The ring is long enough that a code returned to the user keeps its message
// while later errors are raised.
constexpr int kCodesPerClass = 16;

struct CodeRing {
    std::vector<int> codes;
    int next = 0;
};

std::mutex ring_mutex;
std::map<int, CodeRing> rings;

}  // namespace

std::string format(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

int make_error_code(int error_class, const char *call, const std::string &message) {
    std::string text = std::string(call) + ": " + message;
    if (text.size() >= MPI_MAX_ERROR_STRING) text.resize(MPI_MAX_ERROR_STRING - 1);
    std::lock_guard<std::mutex> lock(ring_mutex);
    CodeRing &ring = rings[error_class];
    int code;
    if (static_cast<int>(ring.codes.size()) < kCodesPerClass) {
        if (PMPI_Add_error_code(error_class, &code) != MPI_SUCCESS) return error_class;
        ring.codes.push_back(code);
    } else {
        code = ring.codes[ring.next];
        ring.next = (ring.next + 1) % kCodesPerClass;
    }
    PMPI_Add_error_string(code, text.c_str());
    return code;
}

int raise_error(MPI_Comm comm, int error_class, const char *call, const std::string &message) {
    int code = make_error_code(error_class, call, message);
    PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, code);
    return code;
}

}  // namespace mpiacc
