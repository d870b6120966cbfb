// mpiacc_info: what this MPI-ACC is and how it will behave, the way mpichversion and
// ompi_info answer for MPICH and Open MPI. Prints the version, the build configuration,
// the MPICH underneath, which accelerator kinds are usable on this machine now and what
// each can do, whether NCCL loads, and every user knob with its effective value. It never calls MPI_Init,
// so it runs anywhere, without mpiexec and without a GPU.
//
//   mpiacc_info              configuration and knobs
//   mpiacc_info --config     version, build, MPICH, accelerators
//   mpiacc_info --knobs      user knobs only (the test-only ones are not listed)
//   mpiacc_info --counters   the event counters and what each counts
// Options combine: each one given adds its section.
#include "config.h"

#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "accel/accel.h"
#include "coll/nccl.h"
#include "core/knobs.h"
#include "mpiacc.h"
#include "netmod/ib/devices.h"
#include "netmod/netmod.h"
#include "util/counters.h"

#ifndef MPIACC_CONFIGURE_ARGS
#define MPIACC_CONFIGURE_ARGS "(unknown)"
#endif

namespace {

using mpiacc::BufKind;
using mpiacc::KnobType;

void line(const char *key, const std::string &value) { std::printf("%-22s %s\n", key, value.c_str()); }

const char *type_name(KnobType t) {
    switch (t) {
        case KnobType::BOOL: return "BOOL";
        case KnobType::SIZE: return "SIZE";
        case KnobType::INT: return "INT";
        case KnobType::STRING: return "STRING";
    }
    return "?";
}

// The "MPICH Version" and "MPICH Device" lines of MPI_Get_library_version, which the
// standard allows before MPI_Init.
std::vector<std::string> mpich_lines() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(text, &len);
    std::vector<std::string> out;
    std::string all(text, static_cast<std::size_t>(len));
    std::size_t pos = 0;
    while (pos < all.size()) {
        std::size_t end = all.find('\n', pos);
        if (end == std::string::npos) end = all.size();
        std::string l = all.substr(pos, end - pos);
        if (l.rfind("MPICH Version", 0) == 0 || l.rfind("MPICH Release date", 0) == 0 ||
            l.rfind("MPICH Device", 0) == 0 || out.empty())
            out.push_back(l);
        pos = end + 1;
    }
    for (auto &l : out)
        for (auto &c : l)
            if (c == '\t') c = ' ';
    return out;
}

// What the protocol may ask of a kind (AccelCaps), the true ones by name.
std::string capability_list(const mpiacc::AccelCaps &caps) {
    const struct {
        bool has;
        const char *name;
    } all[] = {{caps.ipc, "ipc"},
               {caps.detects_pointers, "pointer detection"},
               {caps.handle_addressed, "handle-addressed"},
               {caps.registers_host, "host registration"},
               {caps.packs_types, "datatype packing"}};
    std::string out;
    for (const auto &c : all)
        if (c.has) out += (out.empty() ? "" : ", ") + std::string(c.name);
    return out.empty() ? "none" : out;
}

void print_config() {
    line("MPI-ACC version:", PACKAGE_VERSION);
    const char *args = MPIACC_CONFIGURE_ARGS;
    while (*args == ' ') args++;  // autoconf's ac_configure_args starts with a space
    line("MPI-ACC configure:", *args ? args : "(no arguments)");
#ifdef MPIACC_HAVE_CUDA
    line("CUDA compiled in:", "yes");
#else
    line("CUDA compiled in:", "no");
#endif
#ifdef MPIACC_HAVE_OPENCL
    line("OpenCL compiled in:", "yes");
#else
    line("OpenCL compiled in:", "no");
#endif
    int major = 0, minor = 0;
    MPI_Get_version(&major, &minor);
    line("MPI standard:", std::to_string(major) + "." + std::to_string(minor));
    for (const auto &l : mpich_lines()) line("MPI library:", l);

    // Run-time availability: compiled in and a device usable now. Safe without a driver.
    struct {
        BufKind kind;
        const char *name;
    } const kinds[] = {{BufKind::HOST, "host"}, {BufKind::CUDA, "cuda"}, {BufKind::OPENCL, "opencl"}};
    for (const auto &k : kinds) {
        std::string key = std::string("accel ") + k.name + ":";
        mpiacc::Accel *accel = mpiacc::accel_for(k.kind);
        if (!mpiacc::accel_built(k.kind) || !accel)
            line(key.c_str(), "not built");
        else
            line(key.c_str(), std::string(accel->available() ? "available" : "built, no usable device") +
                                  "; capabilities: " + capability_list(mpiacc::accel_caps(k.kind)));
    }
    // Loads libnccl.so.2 as the library would for its first collective on CUDA buffers.
    line("NCCL:", mpiacc::nccl_status());
    // What rdma-core's verbs see: the ports the verbs netmod chooses from, and which
    // netmod MPI_Init would take with this environment (MPIACC_TEST_IB).
    std::string why;
    const std::vector<mpiacc::RdmaPort> ports = mpiacc::rdma_ports(&why);
    for (const std::string &l : mpiacc::rdma_port_lines(ports, why)) line("RDMA:", l);
    std::vector<std::string> knob_errors;
    std::string choice = mpiacc::describe_netmod_choice(mpiacc::Knobs::from_environment(&knob_errors).test_ib);
    bool active = false;
    for (const mpiacc::RdmaPort &p : ports) active = active || p.state == "ACTIVE";
    if (choice.rfind("ib", 0) == 0 && !active) choice += " (no ACTIVE port here: every peer goes over mpi)";
    line("netmod:", choice);
}

// The profile MPIACC_PROFILE names (mpiacc-tune's): what it set, or why the defaults are
// in effect instead.
void print_profile(const mpiacc::ProfileUse &use) {
    if (use.path.empty()) {
        std::printf("Profile (MPIACC_PROFILE): none\n");
        return;
    }
    if (!use.error.empty()) {
        std::printf("Profile (MPIACC_PROFILE): %s not used: %s\n  defaults in effect\n", use.path.c_str(),
                    use.error.c_str());
        return;
    }
    std::printf("Profile (MPIACC_PROFILE): %s, measured on %s\n", use.path.c_str(), use.measured_on.c_str());
    for (const std::string &s : use.set) std::printf("  sets %s\n", s.c_str());
    for (const std::string &o : use.overridden) std::printf("  %s: the environment's value wins\n", o.c_str());
    if (use.set.empty() && use.overridden.empty()) std::printf("  sets nothing: defaults in effect\n");
}

// Values that do not parse or lie outside their knob's range are listed after the knobs:
// the library reports them the same way at MPI_Init and uses the defaults.
void print_knobs() {
    std::vector<std::string> errors;
    const mpiacc::Knobs knobs = mpiacc::Knobs::from_environment(&errors);
    std::printf("Knobs (environment variables; effective value, type, default):\n");
    for (const auto &k : mpiacc::Knobs::registry()) {
        std::string value = knobs.value_text(k.name);
        std::printf("  %s=%s\n", k.name, value.empty() ? "\"\"" : value.c_str());
        std::string range = k.range ? " " + mpiacc::range_words(k.range) : "";
        std::printf("      %s%s, default \"%s\": %s\n", type_name(k.type), range.c_str(), k.default_value, k.doc);
    }
    print_profile(knobs.profile_in_use);
    if (!errors.empty()) {
        std::printf("Knob values not used (malformed or out of range; the defaults are in effect):\n");
        for (const auto &e : errors) std::printf("  %s\n", e.c_str());
    }
}

// The counters a run may read (mpiacc_counter_value), which verbose output and the
// diagnostics in maint/diag name.
void print_counters() {
    std::printf("Counters (util/counters.def; name, what one count is):\n");
    for (std::size_t i = 0; i < mpiacc::kDeclaredCounters; ++i)
        std::printf("  %-42s %s\n", mpiacc::declared_counter(i).name, mpiacc::declared_counter(i).doc);
}

void usage(FILE *to) {
    std::fprintf(to,
                 "usage: mpiacc_info [--config] [--knobs] [--counters]\n"
                 "  --config    version, build configuration, MPICH, accelerators and their capabilities\n"
                 "  --knobs     every user knob (MPIACC_* environment variable) with its effective value\n"
                 "  --counters  the event counters and what each counts\n"
                 "  (no option: --config and --knobs)\n");
}

}  // namespace

int main(int argc, char **argv) {
    bool config = false, knobs = false, counters = false;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--config")) {
            config = true;
        } else if (!std::strcmp(argv[i], "--knobs")) {
            knobs = true;
        } else if (!std::strcmp(argv[i], "--counters")) {
            counters = true;
        } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            std::fprintf(stderr, "mpiacc_info: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!config && !knobs && !counters) config = knobs = true;
    const char *gap = "";
    if (config) {
        print_config();
        gap = "\n";
    }
    if (knobs) {
        std::printf("%s", gap);
        print_knobs();
        gap = "\n";
    }
    if (counters) {
        std::printf("%s", gap);
        print_counters();
    }
    return 0;
}
