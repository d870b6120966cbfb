// mpiacc-tune: measures this machine and writes the profile MPI-ACC loads at MPI_Init
// (MPIACC_PROFILE) as its local table for RTS proposals. Run it under mpiexec with two
// ranks on the two nodes (or sockets) that will talk, or with one rank for the copies
// alone:
//
//   mpiexec -n 2 mpiacc-tune [--output FILE] [--min-size SIZE] [--max-size SIZE]
//                            [--tolerance PERCENT] [--seconds-per-size S]
//
// It measures D2H and H2D copies from every NUMA node for each accelerator the library
// finds (host memory copies always, so a host-only machine gets a profile too), the cost
// of one event query, and MPICH's bandwidth between the two ranks. The packet size is the
// paper's (BRIEF P3): the smallest at which the pipeline's bandwidth, with the query
// overhead, reaches its peak within the tolerance.
#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "core/knobs.h"
#include "core/profile.h"
#include "tune/measure.h"

namespace {

using mpiacc::tune::CopyMeasurement;
using mpiacc::tune::NetMeasurement;
using mpiacc::tune::Options;

void usage(FILE *to) {
    std::fprintf(to,
                 "usage: mpiexec -n 1|2 mpiacc-tune [--output FILE] [--min-size SIZE] [--max-size SIZE]\n"
                 "                                  [--tolerance PERCENT] [--seconds-per-size S]\n"
                 "  --output FILE          where the profile goes (default: mpiacc-profile-HOST.txt here)\n"
                 "  --min-size, --max-size sizes measured, powers of two (default 4K..16M, within 4K..64M)\n"
                 "  --tolerance PERCENT    how close to the peak bandwidth the chunk must come (default 5)\n"
                 "  --seconds-per-size S   time spent per size and direction, at most (default 0.02)\n"
                 "Load the profile with MPIACC_PROFILE=FILE; mpiacc_info shows what it sets.\n");
}

bool parse_options(int argc, char **argv, Options *o, std::string *why) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (i + 1 >= argc) {
            *why = "'" + arg + "' is not an option, or lacks its value";
            return false;
        }
        const std::string value = argv[++i];
        bool ok = true;
        if (arg == "--output") {
            o->output = value;
        } else if (arg == "--min-size") {
            ok = mpiacc::parse_size(value, &o->min_size);
        } else if (arg == "--max-size") {
            ok = mpiacc::parse_size(value, &o->max_size);
        } else if (arg == "--tolerance") {
            char *end = nullptr;
            o->tolerance = std::strtod(value.c_str(), &end) / 100;
            ok = *end == '\0' && o->tolerance >= 0 && o->tolerance < 1;
        } else if (arg == "--seconds-per-size") {
            char *end = nullptr;
            o->seconds_per_point = std::strtod(value.c_str(), &end);
            ok = *end == '\0' && o->seconds_per_point > 0;
        } else {
            *why = "unknown option '" + arg + "'";
            return false;
        }
        if (!ok) {
            *why = arg + " " + value + ": not a valid value";
            return false;
        }
    }
    // The chunk must be a value MPIACC_CHUNK_SIZE accepts.
    if (o->min_size < (4u << 10) || o->max_size > (64u << 20) || o->min_size > o->max_size) {
        *why = "the sizes must lie within 4K..64M, the smallest first";
        return false;
    }
    return true;
}

std::string gbs(double bytes, double seconds) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", seconds > 0 ? bytes / seconds / 1e9 : 0.0);
    return text;
}

std::string size_text(std::size_t s) {
    if (s >= (1u << 20) && s % (1u << 20) == 0) return std::to_string(s >> 20) + "M";
    if (s >= (1u << 10) && s % (1u << 10) == 0) return std::to_string(s >> 10) + "K";
    return std::to_string(s);
}

// Seconds of a `bytes` transfer from a curve measured at `sizes`, past its end by its
// last bandwidth.
double at(const std::vector<std::size_t> &sizes, const std::vector<double> &curve, std::size_t bytes) {
    for (std::size_t i = 0; i < sizes.size(); ++i)
        if (sizes[i] == bytes) return curve[i];
    return curve.back() * static_cast<double>(bytes) / static_cast<double>(sizes.back());
}

struct Choice {
    std::size_t chunk = 0;
    long depth = 0;
    std::size_t threshold = 0;             // 0: left to the default
    std::vector<double> pipeline_seconds;  // per chunk, the slowest stage, per size
    std::vector<std::string> notes;
};

// The pipeline of a device-to-device transfer between nodes (BRIEF P2): D2H copy,
// network, H2D copy, each copy followed by the event query that finds it ended.
Choice choose(const Options &o, const CopyMeasurement &m, const NetMeasurement &net) {
    Choice c;
    const std::vector<std::size_t> sizes = mpiacc::tune::sizes_of(o);
    const double q = m.query_seconds;
    const bool with_net = !net.seconds.empty();
    double peak = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        const double slowest = std::max({m.curve.d2h[i] + q, m.curve.h2d[i] + q, with_net ? net.seconds[i] : 0.0});
        c.pipeline_seconds.push_back(slowest);
        peak = std::max(peak, sizes[i] / slowest);
    }
    std::size_t pick = 0;
    while (sizes[pick] / c.pipeline_seconds[pick] < (1 - o.tolerance) * peak) ++pick;
    c.chunk = sizes[pick];
    // Enough chunks in flight that every stage stays busy, one more for the progress
    // round that finds a chunk done late.
    const double all_stages = m.curve.d2h[pick] + m.curve.h2d[pick] + 2 * q + (with_net ? net.seconds[pick] : 0);
    c.depth = std::clamp<long>(static_cast<long>(std::ceil(all_stages / c.pipeline_seconds[pick])) + 1, 2, 16);
    c.notes.push_back("chunk_size: the smallest size whose pipeline bandwidth (" + m.kind + " copies" +
                      (q > 0 ? " plus one event query each" : "") + (with_net ? ", and the network" : "") +
                      ") is within " + std::to_string(static_cast<int>(std::lround(o.tolerance * 100))) +
                      "% of its peak, " + gbs(1, 1 / peak) + " GB/s (BRIEF P3)");
    // The threshold from which a host sender's message is better pipelined into a device
    // receiver (an RTS round trip first) than sent whole and copied up after.
    if (!with_net || m.kind == "host") {
        c.notes.push_back(std::string("host_rndv_threshold: left to the default (") +
                          (with_net ? "no accelerator to pipeline into" : "one rank: no network measured") + ")");
        return c;
    }
    const double chunk_net = at(sizes, net.seconds, c.chunk), chunk_h2d = at(sizes, m.curve.h2d, c.chunk) + q;
    for (std::size_t bytes = 2 * c.chunk; bytes <= (std::size_t{1} << 30); bytes *= 2) {
        const double whole = at(sizes, net.seconds, bytes) + at(sizes, m.curve.h2d, bytes) + q;
        const double piped = 2 * net.small_seconds + chunk_net + chunk_h2d +
                             static_cast<double>(bytes / c.chunk - 1) * std::max(chunk_net, chunk_h2d);
        if (piped < whole) {
            c.threshold = bytes;
            break;
        }
    }
    c.notes.push_back(c.threshold
                          ? "host_rndv_threshold: the smallest size whose pipeline into device memory beats "
                            "a whole payload copied up after it arrived"
                          : "host_rndv_threshold: left to the default (the pipeline never beat a whole payload)");
    return c;
}

std::string hostname() {
    char name[256] = {0};
    if (gethostname(name, sizeof name - 1) != 0 || !name[0]) return "unknown-host";
    return name;
}

std::string utc_now() {
    char text[32];
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

// The measurement the table is for: the first kind found (CUDA, then OpenCL, then host),
// from the NUMA node with the best bandwidth at the largest size (staging pools are
// NUMA-local to the device, BRIEF P5).
const CopyMeasurement &primary(const std::vector<CopyMeasurement> &all) {
    const CopyMeasurement *best = &all.front();
    for (const CopyMeasurement &m : all)
        if (m.kind == best->kind &&
            std::max(m.curve.d2h.back(), m.curve.h2d.back()) < std::max(best->curve.d2h.back(), best->curve.h2d.back()))
            best = &m;
    return *best;
}

int run(const Options &o, int rank, int ranks) {
    std::vector<std::string> notes;
    std::vector<CopyMeasurement> copies;
    const double t0 = mpiacc::tune::now_seconds();
    if (rank == 0) copies = mpiacc::tune::measure_copies(o, &notes);
    PMPI_Barrier(MPI_COMM_WORLD);
    const NetMeasurement net = mpiacc::tune::measure_net(o, MPI_COMM_WORLD);
    if (rank != 0) return 0;
    if (copies.empty()) {
        std::fprintf(stderr, "mpiacc-tune: nothing could be measured\n");
        for (const std::string &n : notes) std::fprintf(stderr, "  %s\n", n.c_str());
        return 1;
    }
    const CopyMeasurement &m = primary(copies);
    Choice c = choose(o, m, net);

    mpiacc::Profile p;
    p.machine = hostname();
    p.accelerator = m.kind + " (" + m.device + ")" +
                    (m.numa_node >= 0 ? ", NUMA node " + std::to_string(m.numa_node) : std::string());
    p.date = utc_now();
    p.has_chunk_size = p.has_pipeline_depth = true;
    p.chunk_size = c.chunk;
    p.pipeline_depth = c.depth;
    p.has_host_rndv_threshold = c.threshold != 0;
    p.host_rndv_threshold = c.threshold;

    std::vector<std::string> lines = c.notes;
    lines.push_back("pipeline_depth: the stages of one chunk over its slowest, plus one");
    lines.insert(lines.end(), notes.begin(), notes.end());
    lines.push_back("ranks: " + std::to_string(ranks) + "; measured in " +
                    std::to_string(static_cast<int>(std::lround(mpiacc::tune::now_seconds() - t0))) + " s");
    if (!net.seconds.empty()) {
        char small[64];
        std::snprintf(small, sizeof small, "network: 8 B one way in %.1f us", net.small_seconds * 1e6);
        lines.push_back(small);
    }
    const std::vector<std::size_t> sizes = mpiacc::tune::sizes_of(o);
    for (const CopyMeasurement &k : copies) {
        char q[64];
        std::snprintf(q, sizeof q, "%.3f us", k.query_seconds * 1e6);
        lines.push_back(k.kind + " (" + k.device + "), NUMA node " + std::to_string(k.numa_node) +
                        ": one event query " + q + "; size, D2H, H2D" + (net.seconds.empty() ? "" : ", network") +
                        " GB/s" + (&k == &m ? ", pipeline GB/s" : ""));
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            std::string row =
                "  " + size_text(sizes[i]) + " " + gbs(sizes[i], k.curve.d2h[i]) + " " + gbs(sizes[i], k.curve.h2d[i]);
            if (!net.seconds.empty()) row += " " + gbs(sizes[i], net.seconds[i]);
            if (&k == &m) row += " " + gbs(sizes[i], c.pipeline_seconds[i]);
            lines.push_back(row);
        }
    }
    const std::string path = o.output.empty() ? "mpiacc-profile-" + p.machine + ".txt" : o.output;
    const std::string text = mpiacc::profile_text(p, lines);
    {
        std::ofstream out(path);
        out << text;
        if (!out.flush()) {
            std::fprintf(stderr, "mpiacc-tune: cannot write %s\n", path.c_str());
            return 1;
        }
    }
    // What was written must be what the library reads.
    mpiacc::Profile check;
    std::string why;
    if (!mpiacc::read_profile(path, &check, &why)) {
        std::fprintf(stderr, "mpiacc-tune: the profile written does not load: %s\n", why.c_str());
        return 1;
    }
    std::printf("%s", text.c_str());
    std::printf("mpiacc-tune: wrote %s (use it with MPIACC_PROFILE=%s)\n", path.c_str(), path.c_str());
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &ranks);
    Options o;
    std::string why;
    int rc = 0;
    if (argc == 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
        if (rank == 0) usage(stdout);
    } else if (!parse_options(argc, argv, &o, &why) || ranks > 2) {
        if (rank == 0) {
            std::fprintf(stderr, "mpiacc-tune: %s\n", ranks > 2 ? "runs with 1 or 2 ranks" : why.c_str());
            usage(stderr);
        }
        rc = 2;
    } else {
        rc = run(o, rank, ranks);
    }
    PMPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
