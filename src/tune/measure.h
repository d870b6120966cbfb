// What mpiacc-tune measures: copies between host memory on each NUMA node and each
// accelerator the library finds, through the library's own accelerator table (its
// internal queues and completions, polled as the progress engine polls them), the cost of
// asking whether a copy has ended, and MPICH's bandwidth between two ranks.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

namespace mpiacc {
namespace tune {

struct Options {
    std::size_t min_size = 4u << 10;
    std::size_t max_size = 16u << 20;
    std::size_t bytes_per_point = 32u << 20;  // copied per size and direction, at most
    double seconds_per_point = 0.02;          // and at most this long
    double tolerance = 0.05;                  // BRIEF P3: "reaches its peak", within this
    std::string output;                       // profile path; empty: the default
};

// The sizes measured: powers of two from min_size to max_size.
std::vector<std::size_t> sizes_of(const Options &o);

// Seconds per copy of each size, one direction (the best of the repetitions).
struct CopyCurve {
    std::vector<double> d2h, h2d;  // indexed as sizes_of()
};

// One accelerator measured from one NUMA node.
struct CopyMeasurement {
    std::string kind;    // "cuda", "opencl", "host"
    std::string device;  // what the kind calls its device
    int numa_node = -1;  // hwloc's logical index; -1: the machine has none to bind to
    CopyCurve curve;
    double query_seconds = 0;  // one test() of a copy that has ended
};

// The copies of every accelerator available here (host as well, always last) from every
// NUMA node. Errors for a kind go to *notes and leave it out.
std::vector<CopyMeasurement> measure_copies(const Options &o, std::vector<std::string> *notes);

// Seconds one way per message of each size between world ranks 0 and 1 (ping-pong through
// MPICH, host buffers), and for an 8-byte message; empty with one rank. Both ranks call it.
struct NetMeasurement {
    std::vector<double> seconds;  // indexed as sizes_of()
    double small_seconds = 0;
};
NetMeasurement measure_net(const Options &o, MPI_Comm comm);

double now_seconds();

}  // namespace tune
}  // namespace mpiacc
