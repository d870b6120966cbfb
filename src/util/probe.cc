#include "util/probe.h"

#ifdef MPIACC_PROBES

#include <sched.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace mpiacc {

namespace {

struct ProbeRecord {
    std::int64_t ns;
    const char *name;
    int cpu;  // where the thread ran: two busy-polling ranks on one core's hyperthreads slow each other
};

// The first kMaxProbes are kept (16 MiB); a run that passes more keeps its start, and
// the report says how many were dropped.
constexpr std::size_t kMaxProbes = std::size_t{1} << 20;
std::unique_ptr<ProbeRecord[]> records(new ProbeRecord[kMaxProbes]);
std::atomic<std::size_t> next{0};

}  // namespace

void probe(const char *name) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
    if (i < kMaxProbes)
        records[i] = ProbeRecord{std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec, name, sched_getcpu()};
}

void write_probes(int world_rank) {
    const char *dir = std::getenv("MPIACC_PROBE_DIR");
    if (!dir || !*dir) return;
    const std::string path = std::string(dir) + "/probes." + std::to_string(world_rank) + ".tsv";
    FILE *f = std::fopen(path.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "[mpiacc %d] MPIACC_PROBE_DIR: cannot write %s\n", world_rank, path.c_str());
        return;
    }
    const std::size_t passed = next.load(std::memory_order_relaxed);
    const std::size_t kept = passed < kMaxProbes ? passed : kMaxProbes;
    std::fprintf(f, "# probes passed %zu, kept %zu\n", passed, kept);
    for (std::size_t i = 0; i < kept; ++i)
        std::fprintf(f, "%lld\t%s\t%d\n", static_cast<long long>(records[i].ns), records[i].name, records[i].cpu);
    std::fclose(f);
}

}  // namespace mpiacc

#endif
