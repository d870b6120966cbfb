// The counter registry (src/util/counters.def): a declared counter reads 0 until bumped,
// a name not declared reads -1 (mpiacc_counter_value), and names are checked while
// compiling (MPIACC_COUNT, MPIACC_COUNTER_REF).
#include "util/counters.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

namespace mpiacc {
namespace {

static_assert(counter_index("pool.wait") >= 0, "a declared name has an index");
static_assert(counter_index("pool.no_such_counter") == -1, "an undeclared name has none");
static_assert(counter_index("pool.wai") == -1 && counter_index("pool.wait.") == -1, "whole names only");

// Runs in a fresh process (see below), where nothing has bumped a counter yet: 0 when
// every declared counter reads 0 there, 1 otherwise (the name on stderr).
int every_declared_counter_reads_0() {
    int failures = 0;
    for (std::size_t i = 0; i < kDeclaredCounters; ++i) {
        const long long value = mpiacc_counter_value(declared_counter(i).name);
        if (value != 0) {
            std::fprintf(stderr, "%s reads %lld before anything bumped it\n", declared_counter(i).name, value);
            failures = 1;
        }
    }
    return failures;
}

// A death test in the "threadsafe" style re-runs this binary for this test alone, so no
// other test has bumped anything.
TEST(Counters, a_declared_counter_never_bumped_reads_0) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::exit(every_declared_counter_reads_0()), testing::ExitedWithCode(0), "");
}

TEST(Counters, a_name_not_declared_reads_minus_1) {
    EXPECT_EQ(mpiacc_counter_value("pool.no_such_counter"), -1);
    EXPECT_EQ(mpiacc_counter_value("no.such.counter"), -1);
    EXPECT_EQ(mpiacc_counter_value("pool.wai"), -1);  // a prefix of a declared name
    EXPECT_EQ(mpiacc_counter_value(""), -1);
    EXPECT_EQ(mpiacc_counter_value(nullptr), -1);
}

TEST(Counters, a_bump_is_read_back_by_name) {
    const long long before = mpiacc_counter_value("pool.wait");
    ASSERT_GE(before, 0);
    MPIACC_COUNT("pool.wait");
    MPIACC_COUNT("pool.wait");
    EXPECT_EQ(mpiacc_counter_value("pool.wait"), before + 2);
    MPIACC_COUNTER_REF("pool.wait").fetch_add(1);
    EXPECT_EQ(mpiacc_counter_value("pool.wait"), before + 3);
    EXPECT_EQ(&counter("pool.wait"), &MPIACC_COUNTER_REF("pool.wait"));
}

TEST(Counters, a_run_time_lookup_of_an_undeclared_name_creates_nothing_readable) {
    counter("pool.no_such_counter").fetch_add(5);
    EXPECT_EQ(mpiacc_counter_value("pool.no_such_counter"), -1);
    EXPECT_EQ(counters_text().find("pool.no_such_counter"), std::string::npos);
}

TEST(Counters, every_declared_counter_has_one_name_and_a_one_line_doc) {
    std::set<std::string> seen;
    for (std::size_t i = 0; i < kDeclaredCounters; ++i) {
        const std::string name = declared_counter(i).name;
        const std::string doc = declared_counter(i).doc;
        EXPECT_TRUE(seen.insert(name).second) << "declared twice: " << name;
        const std::size_t dot = name.find('.');
        EXPECT_TRUE(dot != std::string::npos && dot > 0 && dot + 1 < name.size()) << name << ": not part.name";
        EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._"), std::string::npos) << name;
        EXPECT_FALSE(doc.empty()) << name;
        EXPECT_LE(doc.size(), 200u) << name;
        EXPECT_EQ(doc.find('\n'), std::string::npos) << name;
    }
}

TEST(Counters, counters_text_lists_every_declared_counter_sorted) {
    const std::string text = counters_text();
    std::string previous;
    std::size_t lines = 0;
    for (std::size_t at = 0; at < text.size(); ++lines) {
        const std::size_t end = text.find('\n', at);
        ASSERT_NE(end, std::string::npos);
        const std::string name = text.substr(at, text.find('=', at) - at);
        EXPECT_NE(counter_index(name.c_str()), -1) << name;
        EXPECT_LT(previous, name);
        previous = name;
        at = end + 1;
    }
    EXPECT_EQ(lines, kDeclaredCounters);
}

}  // namespace
}  // namespace mpiacc
