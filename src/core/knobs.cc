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
    static const std::vector<KnobInfo> knobs = [] {
        std::vector<KnobInfo> list;
#define MPIACC_KNOB(field, env, type, def, doc) list.push_back({#env, KnobType::type, def, doc});
#define MPIACC_KNOB_RANGE(field, text) list.back().range = text;
#include "core/knobs.def"
#undef MPIACC_KNOB
#undef MPIACC_KNOB_RANGE
        return list;
    }();
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

namespace {

// A numeric knob's accepted values, from its MPIACC_KNOB_RANGE text ("MIN..MAX" or
// "0|MIN..MAX"), read with the knob's own parser so that sizes keep their suffixes.
template <typename T>
bool parse_range(const char *range, bool (*parse)(const std::string &, T *), bool *zero_ok, T *min, T *max) {
    std::string text(range);
    *zero_ok = text.rfind("0|", 0) == 0;
    if (*zero_ok) text = text.substr(2);
    const std::size_t dots = text.find("..");
    return dots != std::string::npos && parse(text.substr(0, dots), min) && parse(text.substr(dots + 2), max);
}

bool parse_int_value(const std::string &text, long *out) { return parse_int(text, out); }
bool parse_size_value(const std::string &text, std::size_t *out) { return parse_size(text, out); }

template <typename T>
bool in_range(T value, const char *range, bool (*parse)(const std::string &, T *)) {
    bool zero_ok = false;
    T min{}, max{};
    if (!parse_range(range, parse, &zero_ok, &min, &max)) return false;
    return (zero_ok && value == 0) || (value >= min && value <= max);
}

bool knob_in_range(std::size_t value, const char *range) { return in_range(value, range, parse_size_value); }
bool knob_in_range(long value, const char *range) { return in_range(value, range, parse_int_value); }

}  // namespace

std::string range_words(const char *range) {
    std::string text(range ? range : "");
    if (text.rfind("0|", 0) == 0) text = "0 or " + text.substr(2);
    return text;
}

bool knob_accepts(const char *env_name, const std::string &text, std::string *why) {
    for (const KnobInfo &k : Knobs::registry()) {
        if (std::strcmp(k.name, env_name) != 0) continue;
        bool ok = true, in_range = true;
        std::size_t size = 0;
        long number = 0;
        bool flag = false;
        switch (k.type) {
            case KnobType::BOOL: ok = parse_bool(text, &flag); break;
            case KnobType::SIZE:
                ok = parse_size(text, &size);
                in_range = !ok || !k.range || knob_in_range(size, k.range);
                break;
            case KnobType::INT:
                ok = parse_int(text, &number);
                in_range = !ok || !k.range || knob_in_range(number, k.range);
                break;
            case KnobType::STRING: break;
        }
        static const char *const type_words[] = {"BOOL", "SIZE", "INT", "STRING"};
        if (!ok) *why = std::string("is not a valid ") + type_words[static_cast<int>(k.type)];
        if (ok && !in_range) *why = "is outside the range " + range_words(k.range);
        return ok && in_range;
    }
    *why = "is for no knob";
    return false;
}

// " (range 2..64)" for a user knob that has one, to follow "is not a valid INT".
static std::string range_of(const char *env) {
    for (const KnobInfo &k : Knobs::registry())
        if (k.range && std::strcmp(k.name, env) == 0) return " (range " + range_words(k.range) + ")";
    return "";
}

namespace {

// Puts the profile's settings into the knobs the environment left alone. A profile with
// any fault is not used at all, so that no run mixes half a table with the defaults.
void apply_profile(Knobs *k, std::vector<std::string> *errors) {
    ProfileUse &use = k->profile_in_use;
    use.path = k->profile;
    Profile p;
    if (read_profile(use.path, &p, &use.error) && p.has_chunk_size && !std::getenv("MPIACC_CHUNK_SIZE") &&
        p.chunk_size > k->pool_size)
        use.error = use.path + ": chunk_size: " + std::to_string(p.chunk_size) +
                    " is larger than the staging pool (MPIACC_POOL_SIZE=" + std::to_string(k->pool_size) + ")";
    if (!use.error.empty()) {
        if (errors) errors->push_back("MPIACC_PROFILE: " + use.error + "; using the defaults");
        return;
    }
    use.measured_on = p.machine + ", " + p.accelerator + ", " + p.date;
    auto take = [&use](const char *knob, bool has, auto value, auto *field) {
        if (!has) return;
        if (std::getenv(knob)) {
            use.overridden.push_back(knob);
            return;
        }
        *field = value;
        use.set.push_back(std::string(knob) + "=" + std::to_string(value));
    };
    take("MPIACC_CHUNK_SIZE", p.has_chunk_size, p.chunk_size, &k->chunk_size);
    take("MPIACC_PIPELINE_DEPTH", p.has_pipeline_depth, p.pipeline_depth, &k->pipeline_depth);
    take("MPIACC_HOST_RNDV_THRESHOLD", p.has_host_rndv_threshold, p.host_rndv_threshold, &k->host_rndv_threshold);
}

}  // namespace

// The one place in the library that reads the environment for knobs. A value that does
// not parse, or lies outside the knob's range, is reported and the default used: a
// chunk size of 0 or a negative depth would break every transfer later, far from its cause.
Knobs Knobs::from_environment(std::vector<std::string> *errors) {
    Knobs k;
    auto report = [errors](const char *env, const char *value, const std::string &why, const char *def) {
        if (errors)
            errors->push_back(std::string(env) + "=" + value + " " + why + "; using the default " +
                              (*def ? def : "\"\""));
    };
    // The knob just read, for the MPIACC_KNOB_RANGE line that follows it in knobs.def.
    const char *env_name = nullptr, *def_text = nullptr;
    KnobType knob_type = KnobType::STRING;
#define MPIACC_KNOB(field, env, type, def, doc)                                          \
    env_name = #env;                                                                     \
    def_text = def;                                                                      \
    knob_type = KnobType::type;                                                          \
    parse_into(knob_type, def, &k.field);                                                \
    if (const char *v = std::getenv(#env)) {                                             \
        if (!parse_into(knob_type, v, &k.field)) {                                       \
            parse_into(knob_type, def, &k.field);                                        \
            report(#env, v, std::string("is not a valid " #type) + range_of(#env), def); \
        }                                                                                \
    }
#define MPIACC_KNOB_RANGE(field, range)                                                                    \
    if (!knob_in_range(k.field, range)) {                                                                  \
        const char *v = std::getenv(env_name);                                                             \
        report(env_name, v ? v : "", std::string("is outside its range ") + range_words(range), def_text); \
        parse_into(knob_type, def_text, &k.field);                                                         \
    }
#include "core/knobs.def"
#include "core/test_knobs.def"
#undef MPIACC_KNOB
#undef MPIACC_KNOB_RANGE
    // A staging pool holds whole chunks: one smaller than a chunk has no slot at all.
    if (k.pool_size < k.chunk_size) {
        const char *v = std::getenv("MPIACC_POOL_SIZE");
        const char *def = "";
        for (const KnobInfo &info : registry())
            if (std::strcmp(info.name, "MPIACC_POOL_SIZE") == 0) def = info.default_value;
        report("MPIACC_POOL_SIZE", v ? v : "", "is smaller than one chunk (MPIACC_CHUNK_SIZE)", def);
        parse_size(def, &k.pool_size);
    }
    if (!k.profile.empty()) apply_profile(&k, errors);
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
