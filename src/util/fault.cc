#include "util/fault.h"

#include <cstdio>

namespace mpiacc {

bool fault_planned(const std::string &spec, int rank, long event) {
    // Parsed each time: a test makes a handful of the events it counts.
    for (std::size_t at = 0; at < spec.size();) {
        std::size_t end = spec.find(',', at);
        if (end == std::string::npos) end = spec.size();
        int r = -1;
        long nth = 0;
        if (std::sscanf(spec.substr(at, end - at).c_str(), "%d:%ld", &r, &nth) == 2 && r == rank && nth == event)
            return true;
        at = end + 1;
    }
    return false;
}

}  // namespace mpiacc
