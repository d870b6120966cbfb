// The knob registry (src/core/knobs.def): parsers, environment overrides, malformed
// values, and that every knob is listed and documented.
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
    EXPECT_NE(all.find("four"), std::string::npos) << all;
    EXPECT_NE(all.find("MPIACC_POOL_SIZE"), std::string::npos) << all;
    EXPECT_EQ(knobs.pipeline_depth, 4);
    EXPECT_EQ(knobs.pool_size, std::size_t{64} << 20);
    EXPECT_EQ(knobs.chunk_size, std::size_t{512} << 10);
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
    EXPECT_EQ(mpiacc_knob_value("MPIACC_PIPELINE_DEPTH"), 4);  // the default
    EXPECT_EQ(mpiacc_knob_value("MPIACC_NODE_PIPELINE_DEPTH"), -1);  // not a knob (a constant)
    EXPECT_EQ(mpiacc_knob_value("MPIACC_OPENCL_PLATFORM"), -1);  // text, not a number
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

TEST(Knobs, registry_lists_every_knob_of_knobs_def_in_order) {
    const std::vector<std::string> declared = {
#define MPIACC_KNOB(field, env, type, def, doc) #env,
#include "core/knobs.def"
#undef MPIACC_KNOB
    };
    const auto &registry = Knobs::registry();
    ASSERT_EQ(registry.size(), declared.size());
    for (std::size_t i = 0; i < declared.size(); ++i) EXPECT_EQ(registry[i].name, declared[i]);
}

TEST(Knobs, every_knob_is_named_mpiacc_unique_and_documented) {
    std::set<std::string> seen;
    for (const auto &k : Knobs::registry()) {
        std::string name = k.name;
        EXPECT_EQ(name.rfind("MPIACC_", 0), 0u) << name;
        EXPECT_TRUE(seen.insert(name).second) << "declared twice: " << name;
        ASSERT_NE(k.doc, nullptr) << name;
        EXPECT_GT(std::string(k.doc).size(), 10u) << name << " has no real doc";
        ASSERT_NE(k.default_value, nullptr) << name;
    }
}

TEST(Knobs, every_declared_default_parses_as_its_type) {
    for (const auto &k : Knobs::registry()) EXPECT_NE(canonical_default(k), "<malformed>") << k.name;
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
