// GoogleTest main that speaks TAP, for automake's tap-driver: one line per test,
// "ok N - Suite.name", "not ok N - Suite.name" (failure messages follow as "#" lines), or
// "ok N - Suite.name # SKIP reason" for GTEST_SKIP, and the plan "1..N" at the end. The
// default printer is removed: its output is not TAP. A crash leaves the plan missing,
// which the driver reports as an error. The exit status is 0: the TAP lines carry the
// verdict.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

// One line of free text, safe inside a TAP line or comment.
std::string one_line(const std::string &text) {
    std::string out;
    for (char c : text) out += (c == '\n' || c == '\r') ? ' ' : c;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

class TapPrinter : public testing::EmptyTestEventListener {
public:
    void OnTestEnd(const testing::TestInfo &info) override {
        const testing::TestResult &result = *info.result();
        std::string name = std::string(info.test_suite_name()) + "." + info.name();
        ++count_;
        if (result.Skipped()) {
            std::printf("ok %d - %s # SKIP %s\n", count_, name.c_str(), skip_reason(result).c_str());
        } else if (result.Failed()) {
            std::printf("not ok %d - %s\n", count_, name.c_str());
            print_failures(result);
        } else {
            std::printf("ok %d - %s\n", count_, name.c_str());
        }
        std::fflush(stdout);
    }

    void OnTestProgramEnd(const testing::UnitTest &unit) override {
        // Failures outside any test (a suite's SetUpTestSuite, a global environment).
        if (unit.ad_hoc_test_result().Failed()) {
            std::printf("not ok %d - outside any test\n", ++count_);
            print_failures(unit.ad_hoc_test_result());
        }
        std::printf("1..%d\n", count_);
        std::fflush(stdout);
    }

private:
    static std::string skip_reason(const testing::TestResult &result) {
        for (int i = 0; i < result.total_part_count(); ++i) {
            const testing::TestPartResult &part = result.GetTestPartResult(i);
            if (part.skipped() && part.message() && *part.message()) return one_line(part.message());
        }
        return "skipped";
    }

    // Each failure as TAP comments: where, then the message line by line.
    static void print_failures(const testing::TestResult &result) {
        for (int i = 0; i < result.total_part_count(); ++i) {
            const testing::TestPartResult &part = result.GetTestPartResult(i);
            if (!part.failed()) continue;
            std::printf("# %s:%d: failure\n", part.file_name() ? part.file_name() : "?", part.line_number());
            std::string text = part.summary() ? part.summary() : "";
            for (std::size_t pos = 0, end; pos < text.size(); pos = end + 1) {
                end = text.find('\n', pos);
                if (end == std::string::npos) end = text.size();
                std::printf("#   %s\n", text.substr(pos, end - pos).c_str());
            }
        }
    }

    int count_ = 0;
};

}  // namespace

int main(int argc, char **argv) {
    testing::InitGoogleTest(&argc, argv);
    testing::TestEventListeners &listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new TapPrinter);  // the listener list owns it
    const int failed = RUN_ALL_TESTS();
    static_cast<void>(failed);  // reported by the TAP lines, not the exit status
    return 0;
}
