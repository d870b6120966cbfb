#include "core/knobs.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mpiacc {

bool parse_bool(const std::string &text, bool *out) {
    std::string t;
    for (char c : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (t == "1" || t == "yes" || t == "on" || t == "true") {
        *out = true;
        return true;
    }
    if (t == "0" || t == "no" || t == "off" || t == "false") {
        *out = false;
        return true;
    }
    return false;
}

bool parse_size(const std::string &text, std::size_t *out) {
    if (text.empty() || text[0] == '-') return false;
    errno = 0;
    char *end = nullptr;
    unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (end == text.c_str() || errno != 0) return false;
    unsigned long long mult = 1;
    std::string suffix(end);
    if (suffix == "K" || suffix == "k" || suffix == "KiB")
        mult = 1ull << 10;
    else if (suffix == "M" || suffix == "m" || suffix == "MiB")
        mult = 1ull << 20;
    else if (suffix == "G" || suffix == "g" || suffix == "GiB")
        mult = 1ull << 30;
    else if (!suffix.empty())
        return false;
    if (v > (~0ull) / mult) return false;
    *out = static_cast<std::size_t>(v * mult);
    return true;
}

bool parse_int(const std::string &text, long *out) {
    if (text.empty()) return false;
    errno = 0;
    char *end = nullptr;
    long v = std::strtol(text.c_str(), &end, 10);
    if (*end != '\0' || errno != 0) return false;
    *out = v;
    return true;
}

namespace {

bool parse_into(KnobType type, const std::string &text, void *field) {
    switch (type) {
        case KnobType::BOOL: return parse_bool(text, static_cast<bool *>(field));
        case KnobType::SIZE: return parse_size(text, static_cast<std::size_t *>(field));
        case KnobType::INT: return parse_int(text, static_cast<long *>(field));
        case KnobType::STRING: *static_cast<std::string *>(field) = text; return true;
    }
    return false;
}

}  // namespace

const std::vector<KnobInfo> &Knobs::registry() {
    static const std::vector<KnobInfo> knobs = {
#define MPIACC_KNOB(field, env, type, def, doc) {#env, KnobType::type, def, doc},
#include "core/knobs.def"
#undef MPIACC_KNOB
    };
    return knobs;
}

const std::vector<KnobInfo> &Knobs::test_registry() {
    static const std::vector<KnobInfo> knobs = {
#define MPIACC_KNOB(field, env, type, def, doc) {#env, KnobType::type, def, doc},
#include "core/test_knobs.def"
#undef MPIACC_KNOB
    };
    return knobs;
}

// The one place in the library that reads the environment for knobs.
Knobs Knobs::from_environment(std::vector<std::string> *errors) {
    Knobs k;
#define MPIACC_KNOB(field, env, type, def, doc)                                                                   \
    {                                                                                                             \
        parse_into(KnobType::type, def, &k.field);                                                                \
        if (const char *v = std::getenv(#env)) {                                                                  \
            if (!parse_into(KnobType::type, v, &k.field)) {                                                       \
                parse_into(KnobType::type, def, &k.field);                                                        \
                if (errors)                                                                                       \
                    errors->push_back(std::string(#env) + "=\"" + v + "\" is not a valid " #type "; using " def); \
            }                                                                                                     \
        }                                                                                                         \
    }
#include "core/knobs.def"
#include "core/test_knobs.def"
#undef MPIACC_KNOB
    return k;
}

std::string Knobs::value_text(const char *name) const {
#define MPIACC_KNOB_TEXT_BOOL(v) std::string((v) ? "1" : "0")
#define MPIACC_KNOB_TEXT_SIZE(v) std::to_string(v)
#define MPIACC_KNOB_TEXT_INT(v) std::to_string(v)
#define MPIACC_KNOB_TEXT_STRING(v) (v)
#define MPIACC_KNOB(field, env, type, def, doc) \
    if (std::strcmp(name, #env) == 0) return MPIACC_KNOB_TEXT_##type(field);
#include "core/knobs.def"
#include "core/test_knobs.def"
#undef MPIACC_KNOB
    return "";
}

}  // namespace mpiacc
