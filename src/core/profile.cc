#include "core/profile.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/knobs.h"

namespace mpiacc {

const std::vector<ProfileField> &profile_fields() {
    static const std::vector<ProfileField> fields = {
        {"chunk_size", "MPIACC_CHUNK_SIZE"},
        {"pipeline_depth", "MPIACC_PIPELINE_DEPTH"},
        {"host_rndv_threshold", "MPIACC_HOST_RNDV_THRESHOLD"},
    };
    return fields;
}

namespace {

std::string trimmed(const std::string &text) {
    const char *space = " \t\r\n";
    const std::size_t first = text.find_first_not_of(space);
    if (first == std::string::npos) return "";
    return text.substr(first, text.find_last_not_of(space) - first + 1);
}

// Stores a checked setting into the profile.
void store(Profile *p, const std::string &key, const std::string &value) {
    if (key == "chunk_size") {
        p->has_chunk_size = parse_size(value, &p->chunk_size);
    } else if (key == "pipeline_depth") {
        p->has_pipeline_depth = parse_int(value, &p->pipeline_depth);
    } else if (key == "host_rndv_threshold") {
        p->has_host_rndv_threshold = parse_size(value, &p->host_rndv_threshold);
    }
}

}  // namespace

bool read_profile(const std::string &path, Profile *out, std::string *error) {
    std::ifstream in(path);
    if (!in) {
        *error = path + ": cannot be read: " + std::strerror(errno ? errno : ENOENT);
        return false;
    }
    Profile p;
    std::vector<std::string> seen;
    std::string text;
    int line = 0;
    auto fail = [&](const std::string &field, const std::string &why) {
        *error = path + ":" + std::to_string(line) + ": " + (field.empty() ? "" : field + ": ") + why;
        return false;
    };
    while (std::getline(in, text)) {
        ++line;
        text = trimmed(text);
        if (text.empty() || text[0] == '#') continue;
        const std::size_t eq = text.find('=');
        if (eq == std::string::npos) return fail("", "not a \"key = value\" line");
        const std::string key = trimmed(text.substr(0, eq)), value = trimmed(text.substr(eq + 1));
        if (key.empty()) return fail("", "no key before '='");
        for (const std::string &s : seen)
            if (s == key) return fail(key, "given twice");
        // The version comes first, so that a later format is refused before its keys are.
        if (seen.empty() && key != "version") return fail(key, "the first key must be version");
        seen.push_back(key);
        if (value.empty()) return fail(key, "no value");
        if (key == "version") {
            if (value != std::to_string(kProfileVersion))
                return fail(key, "\"" + value + "\" is not a version this library reads (" +
                                     std::to_string(kProfileVersion) + ")");
        } else if (key == "machine") {
            p.machine = value;
        } else if (key == "accelerator") {
            p.accelerator = value;
        } else if (key == "date") {
            p.date = value;
        } else {
            const char *knob = nullptr;
            for (const ProfileField &f : profile_fields())
                if (key == f.key) knob = f.knob;
            if (!knob) return fail(key, "not a field of a version " + std::to_string(kProfileVersion) + " profile");
            std::string why;
            if (!knob_accepts(knob, value, &why)) return fail(key, "\"" + value + "\" " + why + " (" + knob + ")");
            store(&p, key, value);
        }
    }
    if (in.bad()) return fail("", "read error");
    if (seen.empty()) {
        *error = path + ": no version line: not a profile";
        return false;
    }
    *out = p;
    return true;
}

std::string profile_text(const Profile &profile, const std::vector<std::string> &notes) {
    std::ostringstream out;
    out << "# MPI-ACC tuning profile, written by mpiacc-tune; load it with MPIACC_PROFILE=<this file>.\n"
        << "version = " << kProfileVersion << "\n"
        << "machine = " << profile.machine << "\n"
        << "accelerator = " << profile.accelerator << "\n"
        << "date = " << profile.date << "\n";
    if (profile.has_chunk_size) out << "chunk_size = " << profile.chunk_size << "\n";
    if (profile.has_pipeline_depth) out << "pipeline_depth = " << profile.pipeline_depth << "\n";
    if (profile.has_host_rndv_threshold) out << "host_rndv_threshold = " << profile.host_rndv_threshold << "\n";
    for (const std::string &n : notes) out << "# " << n << "\n";
    return out.str();
}

}  // namespace mpiacc
