// Named event counters (cache hits, pinned allocations, protocol modes chosen...), for
// tests, mpiacc_info and diagnostics. Every name is declared in util/counters.def; a
// name not there does not compile (MPIACC_COUNT) and reads -1 (mpiacc_counter_value).
// Relaxed atomics; never on the host fast path.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mpiacc {

struct CounterInfo {
    const char *name;
    const char *doc;
};

namespace counters_detail {
inline constexpr CounterInfo kDeclared[] = {
#define MPIACC_COUNTER(name, doc) {name, doc},
#include "util/counters.def"
#undef MPIACC_COUNTER
};

constexpr bool same_name(const char *a, const char *b) {
    while (*a != '\0' && *a == *b) {
        ++a;
        ++b;
    }
    return *a == *b;
}

// Names MPIACC_COUNTER_REF's template argument, so that its error shows the index -1.
template <int Index>
struct DeclaredIndex {
    static_assert(Index >= 0, "counter name not declared in src/util/counters.def");
    static constexpr int value = Index;
};
}  // namespace counters_detail

constexpr std::size_t kDeclaredCounters = sizeof counters_detail::kDeclared / sizeof counters_detail::kDeclared[0];

// The registry, in the order of counters.def.
constexpr const CounterInfo &declared_counter(std::size_t i) { return counters_detail::kDeclared[i]; }

// The index of a declared counter, -1 for any other name; a constant expression for a
// literal, which is how the macros below check their names while compiling.
constexpr int counter_index(const char *name) {
    if (name == nullptr) return -1;
    for (std::size_t i = 0; i < kDeclaredCounters; ++i)
        if (counters_detail::same_name(counters_detail::kDeclared[i].name, name)) return static_cast<int>(i);
    return -1;
}

// The counter at `index` (from counter_index; must be declared).
std::atomic<std::int64_t> &counter_at(int index);

// A declared counter looked up at run time. A name not in counters.def gets a scratch
// counter that nothing reads: use MPIACC_COUNTER_REF, which refuses it while compiling.
std::atomic<std::int64_t> &counter(const std::string &name);

// Bumps counter `name`, a string literal declared in counters.def.
#define MPIACC_COUNT(name)                                                                   \
    do {                                                                                     \
        static_assert(::mpiacc::counter_index(name) >= 0,                                    \
                      "MPIACC_COUNT(" name "): not declared in src/util/counters.def");      \
        constexpr int mpiacc_counter_index_ = ::mpiacc::counter_index(name);                 \
        ::mpiacc::counter_at(mpiacc_counter_index_).fetch_add(1, std::memory_order_relaxed); \
    } while (0)

// The counter `name` (a string literal declared in counters.def) itself, to keep.
#define MPIACC_COUNTER_REF(name) \
    (::mpiacc::counter_at(::mpiacc::counters_detail::DeclaredIndex<::mpiacc::counter_index(name)>::value))

// "name=value" lines for every declared counter, sorted by name.
std::string counters_text();

}  // namespace mpiacc

// Exported for the test programs (declared in test/mpi/mpiacc_hooks.h, not installed):
// a declared counter's value (0 until bumped), -1 for a name not in counters.def.
extern "C" long long mpiacc_counter_value(const char *name);
