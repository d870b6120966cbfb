#include "util/counters.h"

#include <map>
#include <memory>
#include <mutex>

namespace mpiacc {

namespace {
std::mutex counters_mutex;
std::map<std::string, std::unique_ptr<std::atomic<std::int64_t>>> &all_counters() {
    static std::map<std::string, std::unique_ptr<std::atomic<std::int64_t>>> m;
    return m;
}
}  // namespace

std::atomic<std::int64_t> &counter(const std::string &name) {
    std::lock_guard<std::mutex> lock(counters_mutex);
    auto &slot = all_counters()[name];
    if (!slot) slot = std::make_unique<std::atomic<std::int64_t>>(0);
    return *slot;
}

std::string counters_text() {
    std::lock_guard<std::mutex> lock(counters_mutex);
    std::string out;
    for (auto &kv : all_counters())
        out += kv.first + "=" + std::to_string(kv.second->load(std::memory_order_relaxed)) + "\n";
    return out;
}

}  // namespace mpiacc

extern "C" __attribute__((visibility("default"))) long long mpiacc_counter_value(const char *name) {
    std::lock_guard<std::mutex> lock(mpiacc::counters_mutex);
    auto &m = mpiacc::all_counters();
    auto it = m.find(name);
    return it == m.end() ? 0 : static_cast<long long>(it->second->load());
}
