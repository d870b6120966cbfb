// A tuning profile: the pipeline parameters mpiacc-tune measured on this machine, which
// the library loads at MPI_Init as its local table for RTS proposals (BRIEF P3, P4: the
// sender proposes, the receiver takes the smaller). Text, one "key = value" a line,
// "#" comments; the first key is the format's version.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace mpiacc {

constexpr int kProfileVersion = 1;

struct Profile {
    // Where and when it was measured: shown by mpiacc_info, not used otherwise.
    std::string machine, accelerator, date;
    // The knobs a profile may set; one it leaves out keeps its default.
    bool has_chunk_size = false, has_pipeline_depth = false, has_host_rndv_threshold = false;
    std::size_t chunk_size = 0, host_rndv_threshold = 0;
    long pipeline_depth = 0;
};

// The knob each setting of a profile replaces, for messages: "MPIACC_CHUNK_SIZE".
struct ProfileField {
    const char *key;  // "chunk_size"
    const char *knob;
};
const std::vector<ProfileField> &profile_fields();

// Reads and checks a profile. A value must parse as its knob's type and lie inside the
// knob's range (knobs.def). False on any fault, with *error naming the file, the line and
// the field ("PATH:LINE: FIELD: what is wrong"; no line for an unreadable file).
bool read_profile(const std::string &path, Profile *out, std::string *error);

// The profile's text as mpiacc-tune writes it; each of `notes` becomes a "# " line after
// the settings (the measurements behind them).
std::string profile_text(const Profile &profile, const std::vector<std::string> &notes);

// How the knobs in effect came to be, for mpiacc_info: the profile named by
// MPIACC_PROFILE, what it set, and what the environment set over it.
struct ProfileUse {
    std::string path;                     // empty: no profile
    std::string error;                    // why it was not used; empty when loaded
    std::string measured_on;              // "machine, accelerator, date"
    std::vector<std::string> set;         // "MPIACC_CHUNK_SIZE=262144"
    std::vector<std::string> overridden;  // knobs it names that the environment set
};

}  // namespace mpiacc
