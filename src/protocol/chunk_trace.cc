#include "protocol/chunk_trace.h"

#include <time.h>

#include <cstdio>
#include <mutex>
#include <vector>

namespace mpiacc {

namespace {

struct Record {
    double t_us;
    std::uint64_t transfer;
    std::size_t chunk;
    ChunkEvent event;
};

// Bounded, so that a long run with the knob on cannot grow without end: the first
// kMaxRecords are kept (16 MiB), and how many were dropped is printed.
constexpr std::size_t kMaxRecords = 1u << 19;
std::mutex trace_mutex;
std::vector<Record> records;
std::size_t dropped = 0;

const char *event_name(ChunkEvent e) {
    switch (e) {
        case ChunkEvent::CTS_SENT: return "cts_sent";
        case ChunkEvent::CTS_SEEN: return "cts_seen";
        case ChunkEvent::SEND_COPY_START: return "send_copy_start";
        case ChunkEvent::SEND_COPY_DONE: return "send_copy_done";
        case ChunkEvent::SEND_POST: return "send_post";
        case ChunkEvent::SEND_DONE: return "send_done";
        case ChunkEvent::RECV_POST: return "recv_post";
        case ChunkEvent::RECV_DONE: return "recv_done";
        case ChunkEvent::RECV_COPY_DONE: return "recv_copy_done";
    }
    return "?";
}

}  // namespace

void record_chunk_event(ChunkEvent e, std::uint64_t transfer, std::size_t chunk) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const double t = 1e6 * static_cast<double>(ts.tv_sec) + 1e-3 * static_cast<double>(ts.tv_nsec);
    std::lock_guard<std::mutex> lock(trace_mutex);
    if (records.size() >= kMaxRecords) {
        ++dropped;
        return;
    }
    if (records.capacity() == 0) records.reserve(4096);
    records.push_back(Record{t, transfer, chunk, e});
}

void print_chunk_trace() {
    std::lock_guard<std::mutex> lock(trace_mutex);
    const int rank = context().world_rank;
    for (const Record &r : records)
        std::fprintf(stderr, "[mpiacc-chunk %d] %.3f %s %llu %zu\n", rank, r.t_us, event_name(r.event),
                     static_cast<unsigned long long>(r.transfer), r.chunk);
    if (dropped) std::fprintf(stderr, "[mpiacc-chunk %d] %zu events not recorded (trace full)\n", rank, dropped);
    records.clear();
    records.shrink_to_fit();
    dropped = 0;
}

}  // namespace mpiacc
