// Named event counters (cache hits, pinned allocations, protocol modes chosen...), for
// tests and mpiacc_info. Cheap relaxed atomics; never on the host fast path.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace mpiacc {

// A counter by name, created on first use and alive for the whole process.
std::atomic<std::int64_t> &counter(const std::string &name);

// Bumps a counter on a per-message path: the lookup (a lock and a map search, about
// 0.1 us) runs once per call site, not per message.
#define MPIACC_COUNT(name)                                                         \
    do {                                                                           \
        static std::atomic<std::int64_t> &mpiacc_count_ = ::mpiacc::counter(name); \
        mpiacc_count_.fetch_add(1, std::memory_order_relaxed);                     \
    } while (0)
// "name=value" lines for every counter, sorted by name.
std::string counters_text();

}  // namespace mpiacc

// Exported for the test programs (declared in test/mpi/mpitest_acc.h, not installed):
// the value of a counter, 0 when it does not exist.
extern "C" long long mpiacc_counter_value(const char *name);
