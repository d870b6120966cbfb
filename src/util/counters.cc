#include "util/counters.h"

#include <algorithm>
#include <string>
#include <vector>

namespace mpiacc {

namespace {
// Zero-initialised before any constructor runs, so a static initialiser elsewhere may
// bump one. The scratch counter takes run-time lookups of undeclared names.
std::atomic<std::int64_t> counters[kDeclaredCounters + 1];
constexpr int kScratch = static_cast<int>(kDeclaredCounters);
}  // namespace

std::atomic<std::int64_t> &counter_at(int index) { return counters[index]; }

std::atomic<std::int64_t> &counter(const std::string &name) {
    const int index = counter_index(name.c_str());
    return counters[index >= 0 ? index : kScratch];
}

std::string counters_text() {
    std::vector<std::size_t> order(kDeclaredCounters);
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [](std::size_t a, std::size_t b) {
        return std::string(declared_counter(a).name) < declared_counter(b).name;
    });
    std::string out;
    for (std::size_t i : order)
        out += std::string(declared_counter(i).name) + "=" +
               std::to_string(counters[i].load(std::memory_order_relaxed)) + "\n";
    return out;
}

}  // namespace mpiacc

extern "C" __attribute__((visibility("default"))) long long mpiacc_counter_value(const char *name) {
    const int index = mpiacc::counter_index(name);
    return index < 0 ? -1 : static_cast<long long>(mpiacc::counters[index].load(std::memory_order_relaxed));
}
