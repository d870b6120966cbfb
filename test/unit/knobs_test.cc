// The knob registry (src/core/knobs.def): parsers, environment overrides, malformed
// values, and the registry against the list of user knobs written out below.
#include "core/knobs.h"
#include "util/fault.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/context.h"

namespace mpiacc {
namespace {

// ---------------------------------------------------------------- parse_bool

TEST(ParseBool, accepts_true_words_in_any_case) {
    for (const char *text : {"1", "yes", "on", "true", "YES", "On", "True"}) {
        bool v = false;
        EXPECT_TRUE(parse_bool(text, &v)) << text;
        EXPECT_TRUE(v) << text;
    }
}

TEST(ParseBool, accepts_false_words_in_any_case) {
    for (const char *text : {"0", "no", "off", "false", "NO", "Off", "FALSE"}) {
        bool v = true;
        EXPECT_TRUE(parse_bool(text, &v)) << text;
        EXPECT_FALSE(v) << text;
    }
}

TEST(ParseBool, rejects_anything_else) {
    for (const char *text : {"", "2", "-1", "maybe", "y", "n", "enable", "1 ", "yes please"}) {
        bool v = false;
        EXPECT_FALSE(parse_bool(text, &v)) << '"' << text << '"';
    }
}

// ---------------------------------------------------------------- parse_size

TEST(ParseSize, reads_plain_byte_counts) {
    std::size_t v = 1;
    EXPECT_TRUE(parse_size("0", &v));
    EXPECT_EQ(v, 0u);
    EXPECT_TRUE(parse_size("4096", &v));
    EXPECT_EQ(v, 4096u);
    EXPECT_TRUE(parse_size("18446744073709551615", &v));  // the largest size_t
    EXPECT_EQ(v, ~std::size_t{0});
}

TEST(ParseSize, k_m_g_suffixes_are_powers_of_1024) {
    const std::map<std::string, std::size_t> cases = {
        {"1K", 1u << 10},
        {"16k", 16u << 10},
        {"256K", 256u << 10},
        {"1M", 1u << 20},
        {"8m", 8u << 20},
        {"64MiB", 64u << 20},
        {"1G", std::size_t{1} << 30},
        {"3g", std::size_t{3} << 30},
        {"2GiB", std::size_t{2} << 30},
        {"4KiB", 4u << 10},
    };
    for (const auto &c : cases) {
        std::size_t v = 0;
        EXPECT_TRUE(parse_size(c.first, &v)) << c.first;
        EXPECT_EQ(v, c.second) << c.first;
    }
}

TEST(ParseSize, rejects_malformed_text) {
    for (const char *text : {"", "K", "abc", "-1", "-1K", "1.5M", "1X", "1KB", "1 K", "1T", "12abc", "0x10"}) {
        std::size_t v = 0;
        EXPECT_FALSE(parse_size(text, &v)) << '"' << text << '"';
    }
}

TEST(ParseSize, rejects_values_that_overflow) {
    std::size_t v = 0;
    EXPECT_FALSE(parse_size("18446744073709551616", &v));  // 2^64
    EXPECT_FALSE(parse_size("99999999999999999999999", &v));
    EXPECT_FALSE(parse_size("17179869184G", &v));        // 2^34 GiB = 2^64
    EXPECT_FALSE(parse_size("18014398509481984K", &v));  // 2^54 KiB = 2^64
    EXPECT_TRUE(parse_size("17179869183G", &v));         // just below
    EXPECT_EQ(v, std::size_t{17179869183} << 30);
}

// ---------------------------------------------------------------- parse_int

TEST(ParseInt, reads_signed_decimal_integers) {
    long v = 0;
    EXPECT_TRUE(parse_int("42", &v));
    EXPECT_EQ(v, 42);
    EXPECT_TRUE(parse_int("-7", &v));
    EXPECT_EQ(v, -7);
    EXPECT_TRUE(parse_int("0", &v));
    EXPECT_EQ(v, 0);
    EXPECT_TRUE(parse_int("9223372036854775807", &v));
    EXPECT_EQ(v, 9223372036854775807L);
}

TEST(ParseInt, rejects_malformed_text_and_suffixes) {
    for (const char *text : {"", "abc", "4x", "1K", "1.0", "--1", "2 "}) {
        long v = 0;
        EXPECT_FALSE(parse_int(text, &v)) << '"' << text << '"';
    }
}

TEST(ParseInt, rejects_values_that_overflow) {
    long v = 0;
    EXPECT_FALSE(parse_int("9223372036854775808", &v));
    EXPECT_FALSE(parse_int("-9223372036854775809", &v));
    EXPECT_FALSE(parse_int("100000000000000000000", &v));
}

// ---------------------------------------------------------------- the environment

// Every knob unset for the test, restored afterwards.
class KnobEnvironment : public testing::Test {
protected:
    void SetUp() override {
        for (const auto &k : Knobs::registry()) {
            if (const char *v = std::getenv(k.name)) saved_[k.name] = v;
            unsetenv(k.name);
        }
    }
    void TearDown() override {
        for (const auto &k : Knobs::registry()) {
            auto it = saved_.find(k.name);
            if (it != saved_.end())
                setenv(k.name, it->second.c_str(), 1);
            else
                unsetenv(k.name);
        }
    }

    std::map<std::string, std::string> saved_;
};

// The text value_text gives for a knob's declared default.
std::string canonical_default(const KnobInfo &k) {
    switch (k.type) {
        case KnobType::BOOL: {
            bool b = false;
            return parse_bool(k.default_value, &b) ? (b ? "1" : "0") : "<malformed>";
        }
        case KnobType::SIZE: {
            std::size_t s = 0;
            return parse_size(k.default_value, &s) ? std::to_string(s) : "<malformed>";
        }
        case KnobType::INT: {
            long i = 0;
            return parse_int(k.default_value, &i) ? std::to_string(i) : "<malformed>";
        }
        case KnobType::STRING: return k.default_value;
    }
    return "<unknown type>";
}

TEST_F(KnobEnvironment, unset_knobs_take_their_declared_defaults) {
    std::vector<std::string> errors;
    Knobs knobs = Knobs::from_environment(&errors);
    EXPECT_TRUE(errors.empty());
    for (const auto &k : Knobs::registry()) EXPECT_EQ(knobs.value_text(k.name), canonical_default(k)) << k.name;
    EXPECT_TRUE(knobs.cuda_autodetect);
    EXPECT_EQ(knobs.host_rndv_threshold, std::size_t{2} << 20);
    EXPECT_EQ(knobs.chunk_size, std::size_t{2} << 20);
    EXPECT_EQ(knobs.pipeline_depth, 4);
}

TEST_F(KnobEnvironment, valid_override_is_used) {
    setenv("MPIACC_CHUNK_SIZE", "512K", 1);
    setenv("MPIACC_IPC", "off", 1);
    setenv("MPIACC_PIPELINE_DEPTH", "8", 1);
    setenv("MPIACC_OPENCL_PLATFORM", "Portable", 1);
    std::vector<std::string> errors;
    Knobs knobs = Knobs::from_environment(&errors);
    EXPECT_TRUE(errors.empty());
    EXPECT_EQ(knobs.chunk_size, std::size_t{512} << 10);
    EXPECT_FALSE(knobs.ipc);
    EXPECT_EQ(knobs.pipeline_depth, 8);
    EXPECT_EQ(knobs.opencl_platform, "Portable");
}

TEST_F(KnobEnvironment, malformed_value_is_reported_and_default_used) {
    setenv("MPIACC_PIPELINE_DEPTH", "four", 1);
    setenv("MPIACC_POOL_SIZE", "-1", 1);
    setenv("MPIACC_CHUNK_SIZE", "512K", 1);  // a valid neighbour still applies
    std::vector<std::string> errors;
    Knobs knobs = Knobs::from_environment(&errors);
    ASSERT_EQ(errors.size(), 2u);
    const std::string all = errors[0] + "\n" + errors[1];
    EXPECT_NE(all.find("MPIACC_PIPELINE_DEPTH"), std::string::npos) << all;
    EXPECT_NE(all.find("MPIACC_PIPELINE_DEPTH=four is not a valid INT (range 2..64); using the default 4"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find("MPIACC_POOL_SIZE"), std::string::npos) << all;
    EXPECT_EQ(knobs.pipeline_depth, 4);
    EXPECT_EQ(knobs.pool_size, std::size_t{64} << 20);
    EXPECT_EQ(knobs.chunk_size, std::size_t{512} << 10);
}

TEST_F(KnobEnvironment, out_of_range_value_is_reported_with_range_and_default_used) {
    setenv("MPIACC_CHUNK_SIZE", "0", 1);
    setenv("MPIACC_PIPELINE_DEPTH", "-5", 1);
    setenv("MPIACC_HOST_RNDV_THRESHOLD", "0", 1);  // 0 is in its range: "never"
    std::vector<std::string> errors;
    Knobs knobs = Knobs::from_environment(&errors);
    ASSERT_EQ(errors.size(), 2u);
    EXPECT_EQ(errors[0], "MPIACC_CHUNK_SIZE=0 is outside its range 4K..64M; using the default 2M");
    EXPECT_EQ(errors[1], "MPIACC_PIPELINE_DEPTH=-5 is outside its range 2..64; using the default 4");
    EXPECT_EQ(knobs.chunk_size, std::size_t{2} << 20);
    EXPECT_EQ(knobs.pipeline_depth, 4);
    EXPECT_EQ(knobs.host_rndv_threshold, 0u);
}

TEST_F(KnobEnvironment, range_ends_are_accepted_and_values_past_them_are_not) {
    setenv("MPIACC_CHUNK_SIZE", "4K", 1);
    setenv("MPIACC_PIPELINE_DEPTH", "64", 1);
    std::vector<std::string> errors;
    Knobs knobs = Knobs::from_environment(&errors);
    EXPECT_TRUE(errors.empty());
    EXPECT_EQ(knobs.chunk_size, std::size_t{4} << 10);
    EXPECT_EQ(knobs.pipeline_depth, 64);
    setenv("MPIACC_CHUNK_SIZE", "4095", 1);
    setenv("MPIACC_PIPELINE_DEPTH", "65", 1);
    setenv("MPIACC_HOST_RNDV_THRESHOLD", "1", 1);  // neither 0 nor in 4K..1G
    errors.clear();
    knobs = Knobs::from_environment(&errors);
    EXPECT_EQ(errors.size(), 3u);
    EXPECT_EQ(knobs.chunk_size, std::size_t{2} << 20);
    EXPECT_EQ(knobs.pipeline_depth, 4);
    EXPECT_EQ(knobs.host_rndv_threshold, std::size_t{2} << 20);
}

TEST_F(KnobEnvironment, pool_smaller_than_a_chunk_is_reported) {
    setenv("MPIACC_CHUNK_SIZE", "16M", 1);
    setenv("MPIACC_POOL_SIZE", "8M", 1);
    std::vector<std::string> errors;
    Knobs knobs = Knobs::from_environment(&errors);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0], "MPIACC_POOL_SIZE=8M is smaller than one chunk (MPIACC_CHUNK_SIZE); using the default 64M");
    EXPECT_EQ(knobs.pool_size, std::size_t{64} << 20);
    EXPECT_EQ(knobs.chunk_size, std::size_t{16} << 20);
}

TEST_F(KnobEnvironment, every_numeric_user_knob_has_a_range_holding_its_default) {
    for (const KnobInfo &k : Knobs::registry()) {
        if (k.type != KnobType::SIZE && k.type != KnobType::INT) continue;
        ASSERT_NE(k.range, nullptr) << k.name << " has no MPIACC_KNOB_RANGE";
    }
    // The defaults parse with no report: each lies in its range.
    std::vector<std::string> errors;
    Knobs::from_environment(&errors);
    for (const auto &e : errors) ADD_FAILURE() << e;
}

TEST_F(KnobEnvironment, malformed_value_without_error_list_still_uses_default) {
    setenv("MPIACC_CUDA_AUTODETECT", "sometimes", 1);
    Knobs knobs = Knobs::from_environment(nullptr);
    EXPECT_TRUE(knobs.cuda_autodetect);
}

TEST_F(KnobEnvironment, value_text_reports_effective_values) {
    setenv("MPIACC_VERBOSE", "2", 1);
    setenv("MPIACC_ASYNC_PROGRESS", "yes", 1);
    setenv("MPIACC_DEVICE_EAGER_MAX", "32K", 1);
    setenv("MPIACC_OPENCL_PLATFORM", "NVIDIA CUDA", 1);
    Knobs knobs = Knobs::from_environment(nullptr);
    EXPECT_EQ(knobs.value_text("MPIACC_VERBOSE"), "2");
    EXPECT_EQ(knobs.value_text("MPIACC_ASYNC_PROGRESS"), "1");
    EXPECT_EQ(knobs.value_text("MPIACC_DEVICE_EAGER_MAX"), "32768");
    EXPECT_EQ(knobs.value_text("MPIACC_OPENCL_PLATFORM"), "NVIDIA CUDA");
}

TEST_F(KnobEnvironment, mpiacc_knob_value_gives_numeric_knobs_in_effect_to_c_programs) {
    setenv("MPIACC_HOST_RNDV_THRESHOLD", "64K", 1);
    setenv("MPIACC_IPC", "off", 1);
    setenv("MPIACC_OPENCL_PLATFORM", "Portable", 1);
    reload_knobs();
    EXPECT_EQ(mpiacc_knob_value("MPIACC_HOST_RNDV_THRESHOLD"), 64 << 10);
    EXPECT_EQ(mpiacc_knob_value("MPIACC_IPC"), 0);
    EXPECT_EQ(mpiacc_knob_value("MPIACC_PIPELINE_DEPTH"), 4);        // the default
    EXPECT_EQ(mpiacc_knob_value("MPIACC_NODE_PIPELINE_DEPTH"), -1);  // not a knob (a constant)
    EXPECT_EQ(mpiacc_knob_value("MPIACC_OPENCL_PLATFORM"), -1);      // text, not a number
    EXPECT_EQ(mpiacc_knob_value("MPIACC_NO_SUCH_KNOB"), -1);
    TearDown();
    reload_knobs();  // the process's own values again, for the tests after this one
}

TEST(Knobs, value_text_of_an_unknown_name_is_empty) {
    Knobs knobs;
    EXPECT_EQ(knobs.value_text("MPIACC_NO_SUCH_KNOB"), "");
    EXPECT_EQ(knobs.value_text(""), "");
}

// ---------------------------------------------------------------- the registry

// The user knobs, their types and their defaults (as value_text gives them), written out
// here and not expanded from knobs.def, so that the registry is checked against a
// statement of the contract rather than against itself. A knob added, removed or
// changed is a decision: change this list with it.
struct UserKnob {
    const char *name;
    KnobType type;
    const char *default_text;
};
const UserKnob kUserKnobs[] = {
    {"MPIACC_CUDA_AUTODETECT", KnobType::BOOL, "1"},
    {"MPIACC_IPC", KnobType::BOOL, "1"},
    {"MPIACC_SHARED_STAGING", KnobType::BOOL, "1"},
    {"MPIACC_HOST_RNDV_THRESHOLD", KnobType::SIZE, "2097152"},
    {"MPIACC_DEVICE_EAGER_MAX", KnobType::SIZE, "16384"},
    {"MPIACC_DEVICE_ISEND_EAGER_MAX", KnobType::SIZE, "65536"},
    {"MPIACC_CHUNK_SIZE", KnobType::SIZE, "2097152"},
    {"MPIACC_PIPELINE_DEPTH", KnobType::INT, "4"},
    {"MPIACC_PIPELINE_TRANSFERS", KnobType::INT, "3"},
    {"MPIACC_POOL_SIZE", KnobType::SIZE, "67108864"},
    {"MPIACC_CUDA_KERNEL_COPY_MAX", KnobType::SIZE, "32768"},
    {"MPIACC_OPENCL_PLATFORM", KnobType::STRING, ""},
    {"MPIACC_PROFILE", KnobType::STRING, ""},
    {"MPIACC_ASYNC_PROGRESS", KnobType::BOOL, "0"},
    {"MPIACC_VERBOSE", KnobType::INT, "0"},
};

std::string names_of(const std::set<std::string> &names) {
    std::string out;
    for (const auto &n : names) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? "(none)" : out;
}

TEST(Knobs, registry_holds_exactly_the_user_knobs) {
    std::set<std::string> expected, declared;
    for (const auto &k : kUserKnobs) expected.insert(k.name);
    for (const auto &k : Knobs::registry()) declared.insert(k.name);
    std::set<std::string> missing, extra;
    for (const auto &n : expected)
        if (!declared.count(n)) missing.insert(n);
    for (const auto &n : declared)
        if (!expected.count(n)) extra.insert(n);
    EXPECT_EQ(Knobs::registry().size(), declared.size()) << "a knob is declared twice";
    EXPECT_TRUE(missing.empty()) << "user knobs missing from knobs.def: " << names_of(missing);
    EXPECT_TRUE(extra.empty()) << "knobs.def declares knobs that are not user knobs: " << names_of(extra);
}

TEST(Knobs, each_user_knob_has_its_type_and_default) {
    for (const auto &want : kUserKnobs)
        for (const auto &k : Knobs::registry()) {
            if (std::string(k.name) != want.name) continue;
            EXPECT_EQ(k.type, want.type) << k.name;
            EXPECT_EQ(canonical_default(k), want.default_text) << k.name << " declares \"" << k.default_value << '"';
        }
}

// mpiacc_info prints the docs under each knob: one or two lines a user reads, and no
// measurements (those are in docs/performance.md).
TEST(Knobs, every_user_knob_doc_is_short_and_present) {
    for (const auto &k : Knobs::registry()) {
        ASSERT_NE(k.doc, nullptr) << k.name;
        const std::string doc = k.doc;
        EXPECT_FALSE(doc.empty()) << k.name << " has no doc";
        EXPECT_LE(doc.size(), 200u) << k.name << "'s doc is " << doc.size() << " characters";
        EXPECT_EQ(doc.find('\n'), std::string::npos) << k.name;
    }
}

TEST(Knobs, every_declared_default_parses_as_its_type) {
    for (const auto &k : Knobs::registry()) EXPECT_NE(canonical_default(k), "<malformed>") << k.name;
    for (const auto &k : Knobs::test_registry()) EXPECT_NE(canonical_default(k), "<malformed>") << k.name;
}

// Test-only knobs (core/test_knobs.def) are read like the others but never listed to
// users: they are fault specs (MPIACC_FAULT_*) and test settings (MPIACC_TEST_*).
TEST(Knobs, no_test_only_knob_is_a_user_knob) {
    std::set<std::string> user;
    for (const auto &k : Knobs::registry()) {
        user.insert(k.name);
        const std::string name = k.name;
        EXPECT_NE(name.rfind("MPIACC_FAULT_", 0), 0u) << name << " is a test-only name in the user registry";
        EXPECT_NE(name.rfind("MPIACC_TEST_", 0), 0u) << name << " is a test-only name in the user registry";
    }
    EXPECT_FALSE(Knobs::test_registry().empty());
    for (const auto &k : Knobs::test_registry()) {
        const std::string name = k.name;
        EXPECT_EQ(user.count(name), 0u) << name << " is in both registries";
        EXPECT_TRUE(name.rfind("MPIACC_FAULT_", 0) == 0 || name.rfind("MPIACC_TEST_", 0) == 0)
            << name << ": a test-only knob is named MPIACC_FAULT_* or MPIACC_TEST_*";
        EXPECT_NE(k.doc, nullptr) << name;
    }
}

TEST(FaultPlan, NamesTheNthEventOfOneRank) {
    EXPECT_TRUE(fault_planned("1:3,1:10", 1, 3));
    EXPECT_TRUE(fault_planned("1:3,1:10", 1, 10));
    EXPECT_FALSE(fault_planned("1:3,1:10", 1, 4));
    EXPECT_FALSE(fault_planned("1:3,1:10", 0, 3)) << "another rank's fault";
    EXPECT_FALSE(fault_planned("", 0, 1));
}

TEST(FaultPlan, MalformedEntriesNameNothingAndSpoilNoOther) {
    EXPECT_FALSE(fault_planned("x", 0, 1));
    EXPECT_FALSE(fault_planned("1:", 1, 1));
    EXPECT_TRUE(fault_planned("junk,,2:5", 2, 5));
}

}  // namespace
}  // namespace mpiacc
