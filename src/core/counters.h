// Named event counters (cache hits, pinned allocations, protocol modes chosen...), for
// tests and mpiacc_info. Cheap relaxed atomics; never on the host fast path.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace mpiacc {

// A counter by name, created on first use and alive for the whole process.
std::atomic<std::int64_t> &counter(const std::string &name);
// "name=value" lines for every counter, sorted by name.
std::string counters_text();

}  // namespace mpiacc

// Exported for the test programs (declared in test/mpi/mpitest_acc.h, not installed):
// the value of a counter, 0 when it does not exist.
extern "C" long long mpiacc_counter_value(const char *name);
