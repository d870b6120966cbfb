// Tuning profiles (src/core/profile.h): what mpiacc-tune writes reads back; a corrupt one
// is refused naming its file, line and field; applied to the knobs, a knob set in the
// environment wins, and a refused profile leaves every default in place.
#include "core/profile.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/knobs.h"

namespace mpiacc {
namespace {

std::string write_file(const std::string &name, const std::string &text) {
    const std::string path = testing::TempDir() + "mpiacc_profile_test_" + name;
    std::ofstream(path) << text;
    return path;
}

const char *const kGood =
    "# written by hand\n"
    "version = 1\n"
    "machine = node7\n"
    "accelerator = cuda (device 0), NUMA node 1\n"
    "\n"
    "date = 2026-12-07T21:00:00Z\n"
    "chunk_size = 256K\n"
    "  pipeline_depth=6  \n"
    "host_rndv_threshold = 1048576\n"
    "# size, D2H, H2D GB/s\n";

TEST(Profile, a_good_profile_gives_every_field) {
    Profile p;
    std::string error;
    ASSERT_TRUE(read_profile(write_file("good", kGood), &p, &error)) << error;
    EXPECT_EQ(p.machine, "node7");
    EXPECT_EQ(p.accelerator, "cuda (device 0), NUMA node 1");
    EXPECT_EQ(p.date, "2026-12-07T21:00:00Z");
    EXPECT_TRUE(p.has_chunk_size && p.has_pipeline_depth && p.has_host_rndv_threshold);
    EXPECT_EQ(p.chunk_size, std::size_t{256} << 10);
    EXPECT_EQ(p.pipeline_depth, 6);
    EXPECT_EQ(p.host_rndv_threshold, std::size_t{1} << 20);
}

TEST(Profile, what_profile_text_writes_reads_back) {
    Profile p;
    p.machine = "m";
    p.accelerator = "opencl (PoCL)";
    p.date = "2026-12-07T00:00:00Z";
    p.has_chunk_size = p.has_pipeline_depth = true;
    p.chunk_size = 64u << 10;
    p.pipeline_depth = 3;
    Profile back;
    std::string error;
    ASSERT_TRUE(read_profile(write_file("written", profile_text(p, {"4K 1.0 1.0", "a note"})), &back, &error)) << error;
    EXPECT_EQ(back.chunk_size, p.chunk_size);
    EXPECT_EQ(back.pipeline_depth, 3);
    EXPECT_FALSE(back.has_host_rndv_threshold);
    EXPECT_EQ(back.accelerator, p.accelerator);
}

// Each corrupt profile, and the message that names where it went wrong.
TEST(Profile, a_corrupt_profile_is_refused_naming_file_line_and_field) {
    const std::map<std::string, std::pair<std::string, std::string>> cases = {
        {"bad_number", {"version = 1\nchunk_size = 12abc\n", ":2: chunk_size: \"12abc\" is not a valid SIZE"}},
        {"depth_out_of_range",
         {"version = 1\n# c\npipeline_depth = 1\n", ":3: pipeline_depth: \"1\" is outside the range 2..64"}},
        {"chunk_out_of_range",
         {"version = 1\nchunk_size = 128M\n", ":2: chunk_size: \"128M\" is outside the range 4K..64M"}},
        {"threshold_out_of_range",
         {"version = 1\nhost_rndv_threshold = 100\n",
          ":2: host_rndv_threshold: \"100\" is outside the range 0 or 4K..1G"}},
        {"negative_depth", {"version = 1\npipeline_depth = -4\n", ":2: pipeline_depth: \"-4\" is outside the range"}},
        {"wrong_version",
         {"version = 2\nchunk_size = 64K\n", ":1: version: \"2\" is not a version this library reads (1)"}},
        {"no_version_first", {"chunk_size = 64K\nversion = 1\n", ":1: chunk_size: the first key must be version"}},
        {"unknown_field", {"version = 1\nchunk = 64K\n", ":2: chunk: not a field of a version 1 profile"}},
        {"field_twice", {"version = 1\nchunk_size = 64K\nchunk_size = 128K\n", ":3: chunk_size: given twice"}},
        {"no_equals", {"version = 1\nchunk_size 64K\n", ":2: not a \"key = value\" line"}},
        {"no_value", {"version = 1\nmachine =\n", ":2: machine: no value"}},
        {"empty", {"", ": no version line: not a profile"}},
        {"binary",
         {std::string("\x7f"
                      "ELF\x02\x01",
                      6),
          ":1: not a \"key = value\" line"}},
    };
    for (const auto &c : cases) {
        const std::string path = write_file(c.first, c.second.first);
        Profile p;
        p.chunk_size = 77;
        std::string error;
        EXPECT_FALSE(read_profile(path, &p, &error)) << c.first;
        EXPECT_EQ(error.rfind(path + c.second.second, 0), 0u) << c.first << ": " << error;
        EXPECT_EQ(p.chunk_size, 77u) << c.first << ": a refused profile leaves the output alone";
    }
}

TEST(Profile, a_missing_file_is_refused_naming_it) {
    Profile p;
    std::string error;
    const std::string path = testing::TempDir() + "mpiacc_profile_test_no_such_file";
    EXPECT_FALSE(read_profile(path, &p, &error));
    EXPECT_EQ(error, path + ": cannot be read: No such file or directory");
}

// ---------------------------------------------------------------- applied to the knobs

class ProfileEnvironment : public testing::Test {
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

TEST_F(ProfileEnvironment, no_profile_means_the_built_in_defaults) {
    std::vector<std::string> errors;
    const Knobs k = Knobs::from_environment(&errors);
    EXPECT_TRUE(errors.empty());
    EXPECT_TRUE(k.profile_in_use.path.empty());
    EXPECT_EQ(k.chunk_size, std::size_t{2} << 20);
    EXPECT_EQ(k.pipeline_depth, 4);
}

TEST_F(ProfileEnvironment, a_profile_sets_the_knobs_it_names) {
    setenv("MPIACC_PROFILE", write_file("apply", kGood).c_str(), 1);
    std::vector<std::string> errors;
    const Knobs k = Knobs::from_environment(&errors);
    EXPECT_TRUE(errors.empty()) << errors.front();
    EXPECT_EQ(k.chunk_size, std::size_t{256} << 10);
    EXPECT_EQ(k.pipeline_depth, 6);
    EXPECT_EQ(k.host_rndv_threshold, std::size_t{1} << 20);
    EXPECT_EQ(k.value_text("MPIACC_CHUNK_SIZE"), "262144");
    EXPECT_EQ(k.profile_in_use.set, (std::vector<std::string>{"MPIACC_CHUNK_SIZE=262144", "MPIACC_PIPELINE_DEPTH=6",
                                                              "MPIACC_HOST_RNDV_THRESHOLD=1048576"}));
    EXPECT_EQ(k.profile_in_use.measured_on, "node7, cuda (device 0), NUMA node 1, 2026-12-07T21:00:00Z");
}

TEST_F(ProfileEnvironment, a_knob_set_in_the_environment_beats_the_profile) {
    setenv("MPIACC_PROFILE", write_file("beaten", kGood).c_str(), 1);
    setenv("MPIACC_CHUNK_SIZE", "1M", 1);
    setenv("MPIACC_PIPELINE_DEPTH", "8", 1);
    const Knobs k = Knobs::from_environment(nullptr);
    EXPECT_EQ(k.chunk_size, std::size_t{1} << 20);
    EXPECT_EQ(k.pipeline_depth, 8);
    EXPECT_EQ(k.host_rndv_threshold, std::size_t{1} << 20) << "the field the environment left alone";
    EXPECT_EQ(k.profile_in_use.overridden, (std::vector<std::string>{"MPIACC_CHUNK_SIZE", "MPIACC_PIPELINE_DEPTH"}));
}

TEST_F(ProfileEnvironment, a_corrupt_profile_warns_once_and_leaves_every_default) {
    const std::string path =
        write_file("corrupt", "version = 1\nchunk_size = 64K\npipeline_depth = 4\nhost_rndv_threshold = lots\n");
    setenv("MPIACC_PROFILE", path.c_str(), 1);
    std::vector<std::string> errors;
    const Knobs k = Knobs::from_environment(&errors);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0], "MPIACC_PROFILE: " + path +
                             ":4: host_rndv_threshold: \"lots\" is not a valid SIZE (MPIACC_HOST_RNDV_THRESHOLD); "
                             "using the defaults");
    EXPECT_EQ(k.chunk_size, std::size_t{2} << 20) << "no half-applied profile";
    EXPECT_EQ(k.host_rndv_threshold, std::size_t{2} << 20);
    EXPECT_FALSE(k.profile_in_use.error.empty());
    EXPECT_TRUE(k.profile_in_use.set.empty());
}

TEST_F(ProfileEnvironment, a_missing_profile_warns_and_leaves_every_default) {
    const std::string path = testing::TempDir() + "mpiacc_profile_test_missing";
    setenv("MPIACC_PROFILE", path.c_str(), 1);
    std::vector<std::string> errors;
    const Knobs k = Knobs::from_environment(&errors);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0], "MPIACC_PROFILE: " + path + ": cannot be read: No such file or directory; using the defaults");
    EXPECT_EQ(k.chunk_size, std::size_t{2} << 20);
}

TEST_F(ProfileEnvironment, a_profile_chunk_larger_than_the_pool_is_refused) {
    setenv("MPIACC_PROFILE", write_file("big_chunk", "version = 1\nchunk_size = 32M\n").c_str(), 1);
    setenv("MPIACC_POOL_SIZE", "16M", 1);
    std::vector<std::string> errors;
    const Knobs k = Knobs::from_environment(&errors);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find(": chunk_size: 33554432 is larger than the staging pool (MPIACC_POOL_SIZE=16777216)"),
              std::string::npos)
        << errors[0];
    EXPECT_EQ(k.chunk_size, std::size_t{2} << 20);
}

}  // namespace
}  // namespace mpiacc
