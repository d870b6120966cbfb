// The knob registry: every MPIACC_* environment variable, declared once in knobs.def.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/profile.h"

namespace mpiacc {

enum class KnobType { BOOL, SIZE, INT, STRING };

struct KnobInfo {
    const char *name;
    KnobType type;
    const char *default_value;
    const char *doc;
    const char *range = nullptr;  // MPIACC_KNOB_RANGE: "MIN..MAX" or "0|MIN..MAX"; null for none
};

// Effective values, parsed once from the environment by Knobs::from_environment.
struct Knobs {
#define MPIACC_KNOB_BOOL bool
#define MPIACC_KNOB_SIZE std::size_t
#define MPIACC_KNOB_INT long
#define MPIACC_KNOB_STRING std::string
#define MPIACC_KNOB(field, env, type, def, doc) MPIACC_KNOB_##type field{};
#include "core/knobs.def"
#include "core/test_knobs.def"
#undef MPIACC_KNOB
    // The profile MPIACC_PROFILE names, as applied to the fields above.
    ProfileUse profile_in_use;

    // Parse every knob, then apply the profile (a knob set in the environment wins over it). A malformed value is
    // reported in `errors` and the default is used.
    static Knobs from_environment(std::vector<std::string> *errors);
    // The user knobs (knobs.def), in declaration order: what mpiacc_info lists.
    static const std::vector<KnobInfo> &registry();
    // The test-only knobs (test_knobs.def): fault injection and path settings for tests.
    static const std::vector<KnobInfo> &test_registry();
    // The effective value of knob `name` (either registry) as text, or "" if unknown.
    std::string value_text(const char *name) const;
};

// Parsers, exposed for tests. Return false on malformed input.
bool parse_bool(const std::string &text, bool *out);
bool parse_size(const std::string &text, std::size_t *out);
bool parse_int(const std::string &text, long *out);
// Whether `text` is a value user knob `env_name` accepts: it parses as the knob's type
// and lies inside its range. Otherwise *why says what is wrong.
bool knob_accepts(const char *env_name, const std::string &text, std::string *why);
// A knob's range as a reader sees it: "4K..64M", "0 or 4K..1G".
std::string range_words(const char *range);

}  // namespace mpiacc

// Exported for the test programs and benchmarks: the effective value of a numeric knob
// (SIZE in bytes, BOOL as 0 or 1, INT) by its environment name, once MPI_Init has read
// them; -1 for an unknown or STRING knob. Defined in core/context.cc.
extern "C" long long mpiacc_knob_value(const char *name);
