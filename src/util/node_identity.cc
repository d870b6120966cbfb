#include "util/node_identity.h"

#include <sys/stat.h>
#include <unistd.h>

namespace mpiacc {

std::uint64_t local_node_id() {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    // FNV-1a: stable across processes and runs.
    std::uint64_t h = 1469598103934665603ull;
    for (const char *p = host; *p; ++p) {
        h ^= static_cast<unsigned char>(*p);
        h *= 1099511628211ull;
    }
    return h;
}

std::uint64_t local_pid_namespace() {
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) != 0) return 0;
    return static_cast<std::uint64_t>(st.st_ino);
}

}  // namespace mpiacc
