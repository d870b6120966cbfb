// MPI_Error_string for MPI-ACC's own error codes: their text names the user's call and
// argument and says what MPI-ACC does not take. MPICH would print its class text first
// ("Unsupported file operation" for MPI_ERR_UNSUPPORTED_OPERATION) and the location as
// "MPI_Send(0)". Any other code or class goes to MPICH. MPI_Error_class needs nothing:
// the codes carry the standard class.
#include <algorithm>
#include <cstring>

#include "binding/binding.h"

using namespace mpiacc;

extern "C" int MPI_Error_string(int errorcode, char *string, int *resultlen) {
    std::string text;
    if (string == nullptr || resultlen == nullptr || !error_text(errorcode, &text))
        return PMPI_Error_string(errorcode, string, resultlen);
    const std::size_t n = std::min<std::size_t>(text.size(), MPI_MAX_ERROR_STRING - 1);
    std::memcpy(string, text.data(), n);
    string[n] = '\0';
    *resultlen = static_cast<int>(n);
    return MPI_SUCCESS;
}
