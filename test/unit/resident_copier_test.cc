// ResidentCopier's side of the protocol with the kernel that stays on the GPU
// (src/accel/cuda/resident_copier.h), against a stand-in that plays the kernel's part on
// the same ring in a host thread, as copy_kernel.cu's mpiacc_resident_copy does: so the
// copier's rules (post only to a kernel that said it runs, one copy at a time, declined
// when the kernel leaves first, abandoned copies held until resolved, no launch after a
// fault) run without a GPU. The GPU tests (test/gpu/cuda_p2p*) run the real kernel.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "accel/cuda/resident_copier.h"

namespace mpiacc {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t load(const unsigned long long *w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }
void store(unsigned long long *w, std::uint64_t v) { __atomic_store_n(w, v, __ATOMIC_RELEASE); }

// The kernel's loop (copy_kernel.cu) in a thread; a launch queues behind the last, as on
// one stream. The test holds it, makes it leave or makes it fault at chosen moments.
class StandIn final : public ResidentCopier::Device {
public:
    explicit StandIn(mpiacc_resident_ring *ring) : ring_(ring) {}
    ~StandIn() override { synchronize(); }

    bool launch(std::uint64_t next, std::uint64_t idle_ns, std::uint64_t life_ns, std::uint64_t gen) override {
        if (refuse_launch) return false;
        ++launches;
        idle_asked_ns = idle_ns;
        // It leaves when told, not after its idle time or life: a thread the machine
        // preempts would otherwise leave with a copy just posted (declined, which the
        // library handles, but the tests would not be deterministic).
        idle_ns = life_ns = ~std::uint64_t{0} / 2;
        running_ = true;
        std::thread previous = std::move(thread_);
        thread_ = std::thread([=, previous = std::move(previous)]() mutable {
            if (previous.joinable()) previous.join();
            run(next, idle_ns, life_ns, gen);
        });
        return true;
    }
    Ended ended() override {
        if (running_) return Ended::NO;
        return faulted_ ? Ended::FAULTED : Ended::YES;
    }
    void synchronize() override {
        if (thread_.joinable()) thread_.join();
    }

    std::atomic<bool> hold{false};       // it does not look at the ring while set
    std::atomic<bool> leave_now{false};  // it leaves at its next look, reading nothing
    std::atomic<bool> fault{false};      // it ends at its next look without its exit word
    std::atomic<int> launches{0};
    std::atomic<bool> refuse_launch{false};
    std::atomic<std::uint64_t> idle_asked_ns{0};  // what the copier asked for

private:
    void run(std::uint64_t next, std::uint64_t idle_ns, std::uint64_t life_ns, std::uint64_t gen) {
        store(&ring_->started.word[0], gen);
        const auto born = Clock::now();
        auto last = born;
        const auto idle = std::chrono::nanoseconds(static_cast<std::int64_t>(idle_ns));
        for (;;) {
            if (hold) {
                last = Clock::now();
                std::this_thread::yield();
                continue;
            }
            if (fault) {
                faulted_ = true;
                running_ = false;
                return;
            }
            if (leave_now) break;
            const unsigned long long *w = ring_->slot[next % MPIACC_RESIDENT_SLOTS].word;
            std::uint64_t v[MPIACC_RESIDENT_WORDS];
            bool current = true;
            for (int i = 0; i < MPIACC_RESIDENT_WORDS; ++i) {
                v[i] = load(&w[i]);
                current = current && static_cast<std::uint32_t>(v[i] >> 32) == static_cast<std::uint32_t>(next + 1);
            }
            if (current) {
                auto lo = [&](int i) { return v[i] & 0xffffffffu; };
                std::memcpy(reinterpret_cast<void *>(lo(2) | lo(3) << 32),
                            reinterpret_cast<void *>(lo(0) | lo(1) << 32), lo(4));
                store(&ring_->done[next % MPIACC_RESIDENT_SLOTS].word[0], next + 1);
                ++next;
                last = Clock::now();
                continue;
            }
            const auto now = Clock::now();
            if (load(&ring_->stop.word[0]) || now - last > idle ||
                now - born > std::chrono::nanoseconds(static_cast<std::int64_t>(life_ns)))
                break;
            std::this_thread::yield();
        }
        store(&ring_->exited.word[0],
              gen << MPIACC_RESIDENT_GEN_SHIFT | (next & ((std::uint64_t{1} << MPIACC_RESIDENT_GEN_SHIFT) - 1)));
        running_ = false;
    }

    mpiacc_resident_ring *ring_;
    std::thread thread_;
    std::atomic<bool> running_{false};
    std::atomic<bool> faulted_{false};
};

class ResidentCopierTest : public ::testing::Test {
protected:
    void SetUp() override {
        ring_ = std::make_unique<mpiacc_resident_ring>();
        std::memset(ring_.get(), 0, sizeof(mpiacc_resident_ring));
        auto device = std::make_unique<StandIn>(ring_.get());
        kernel_ = device.get();
        copier_ = std::make_unique<ResidentCopier>(ring_.get(), std::move(device));
    }
    void TearDown() override {
        kernel_->hold = false;
        copier_.reset();
    }

    // Posts, launching the kernel whenever it is not running, until a post goes through
    // (up to 5 s), as the library's pulls do.
    bool post_when_running(void *dst, const void *src, std::size_t len, std::uint64_t *command,
                           const std::vector<std::shared_ptr<void>> &keep = {}) {
        const auto until = Clock::now() + std::chrono::seconds(5);
        while (Clock::now() < until) {
            if (copier_->post(dst, src, len, keep, command)) return true;
            copier_->launch_if_idle();
        }
        return false;
    }
    // Polls (up to 5 s) until the copy is resolved.
    ResidentCopier::State resolve(std::uint64_t command) {
        const auto until = Clock::now() + std::chrono::seconds(5);
        ResidentCopier::State s = ResidentCopier::State::PENDING;
        while (s == ResidentCopier::State::PENDING && Clock::now() < until) s = copier_->poll(command);
        return s;
    }
    bool wait_done_word(std::uint64_t command) {
        const auto until = Clock::now() + std::chrono::seconds(5);
        while (Clock::now() < until)
            if (load(&ring_->done[command % MPIACC_RESIDENT_SLOTS].word[0]) == command + 1) return true;
        return false;
    }

    std::unique_ptr<mpiacc_resident_ring> ring_;
    StandIn *kernel_ = nullptr;
    std::unique_ptr<ResidentCopier> copier_;
};

TEST_F(ResidentCopierTest, PostsOnlyToARunningKernelAndEachCopyArrives) {
    char src[300], dst[300] = {};
    for (int i = 0; i < 300; ++i) src[i] = static_cast<char>(i * 7 + 1);
    std::uint64_t n;
    EXPECT_FALSE(copier_->post(dst, src, sizeof src, {}, &n)) << "posted before any launch";
    // Past the ring's 64 slots, so that every slot is reused with the next flag.
    for (int k = 0; k < 150; ++k) {
        ASSERT_TRUE(post_when_running(dst, src + k % 10, 200, &n)) << "copy " << k;
        ASSERT_EQ(resolve(n), ResidentCopier::State::DONE) << "copy " << k;
        ASSERT_EQ(std::memcmp(dst, src + k % 10, 200), 0) << "copy " << k;
    }
    EXPECT_GE(kernel_->launches.load(), 1);
    EXPECT_EQ(kernel_->idle_asked_ns.load(), static_cast<std::uint64_t>(kResidentIdleMicroseconds) * 1000)
        << "not the built-in idle time";
}

TEST_F(ResidentCopierTest, TakesOneCopyAtATime) {
    char src[8] = "abcdefg", a[8] = {}, b[8] = {};
    std::uint64_t na, nb;
    ASSERT_TRUE(post_when_running(a, src, 8, &na));
    kernel_->hold = true;  // may already have copied a: then b is posted at once below
    const bool a_done = copier_->poll(na) == ResidentCopier::State::DONE;
    if (!a_done) {
        EXPECT_FALSE(copier_->post(b, src, 8, {}, &nb)) << "a second copy while the first is pending";
    }
    kernel_->hold = false;
    if (!a_done) {
        EXPECT_EQ(resolve(na), ResidentCopier::State::DONE);
    }
    ASSERT_TRUE(post_when_running(b, src, 8, &nb));
    EXPECT_EQ(resolve(nb), ResidentCopier::State::DONE);
    EXPECT_EQ(std::memcmp(a, src, 8), 0);
    EXPECT_EQ(std::memcmp(b, src, 8), 0);
}

TEST_F(ResidentCopierTest, KernelThatLeftIsLaunchedAgainAndNumberingGoesOn) {
    char src[16] = "0123456789abcde", dst[16] = {};
    std::uint64_t n1, n2;
    ASSERT_TRUE(post_when_running(dst, src, 16, &n1));
    ASSERT_EQ(resolve(n1), ResidentCopier::State::DONE);
    kernel_->leave_now = true;  // as after its idle time without a copy
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (kernel_->ended() == ResidentCopier::Device::Ended::NO && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    kernel_->leave_now = false;
    EXPECT_FALSE(copier_->post(dst, src, 16, {}, &n2)) << "posted to a kernel that has left";
    std::memset(dst, 0, sizeof dst);
    ASSERT_TRUE(post_when_running(dst, src, 16, &n2));
    EXPECT_EQ(n2, n1 + 1);
    EXPECT_EQ(resolve(n2), ResidentCopier::State::DONE);
    EXPECT_EQ(std::memcmp(dst, src, 16), 0);
    EXPECT_GE(kernel_->launches.load(), 2);
}

TEST_F(ResidentCopierTest, CopyPostedAsTheKernelLeavesIsDeclined) {
    char src[8] = "1234567", dst[8] = {};
    std::uint64_t n;
    copier_->launch_if_idle();
    kernel_->hold = true;  // started, and looking nowhere
    const auto until = Clock::now() + std::chrono::seconds(5);
    bool posted = false;
    while (!posted && Clock::now() < until) posted = copier_->post(dst, src, 8, {}, &n);
    ASSERT_TRUE(posted);
    kernel_->leave_now = true;  // it had decided to leave before it saw the copy
    kernel_->hold = false;
    EXPECT_EQ(resolve(n), ResidentCopier::State::DECLINED);
    EXPECT_EQ(dst[0], 0) << "a declined copy was made";
    kernel_->leave_now = false;
    std::uint64_t m;
    ASSERT_TRUE(post_when_running(dst, src, 8, &m)) << "no kernel after a decline";
    EXPECT_EQ(resolve(m), ResidentCopier::State::DONE);
}

TEST_F(ResidentCopierTest, AbandonedCopyKeepsWhatItReadsUntilItIsResolved) {
    char src[8] = "abcdefg", dst[8] = {};
    auto mapping = std::make_shared<int>(1);
    std::uint64_t n, m;
    copier_->launch_if_idle();
    kernel_->hold = true;
    const auto until = Clock::now() + std::chrono::seconds(5);
    bool posted = false;
    while (!posted && Clock::now() < until) posted = copier_->post(dst, src, 8, {mapping}, &n);
    ASSERT_TRUE(posted);
    copier_->abandon(n);
    EXPECT_EQ(mapping.use_count(), 2) << "the copier let go of the mapping while the kernel may still read it";
    EXPECT_FALSE(copier_->post(dst, src, 8, {}, &m)) << "posted beside an unresolved abandoned copy";
    kernel_->hold = false;
    ASSERT_TRUE(wait_done_word(n));
    ASSERT_TRUE(post_when_running(dst, src, 8, &m));  // resolves the abandoned copy first
    EXPECT_EQ(mapping.use_count(), 1);
    EXPECT_EQ(resolve(m), ResidentCopier::State::DONE);
}

TEST_F(ResidentCopierTest, KernelThatFaultsDeclinesItsCopyAndIsNotLaunchedAgain) {
    char src[8] = "abcdefg", dst[8] = {};
    std::uint64_t n, m;
    copier_->launch_if_idle();
    kernel_->hold = true;
    const auto until = Clock::now() + std::chrono::seconds(5);
    bool posted = false;
    while (!posted && Clock::now() < until) posted = copier_->post(dst, src, 8, {}, &n);
    ASSERT_TRUE(posted);
    kernel_->fault = true;  // ends without its exit word
    kernel_->hold = false;
    EXPECT_EQ(resolve(n), ResidentCopier::State::DECLINED);  // after the copier's patience with the device
    copier_->launch_if_idle();
    EXPECT_EQ(kernel_->launches.load(), 1) << "launched again after a fault";
    EXPECT_FALSE(copier_->post(dst, src, 8, {}, &m));
}

// The component gives the copier its settings (AccelSettings: MPIACC_FAULT_RESIDENT, the
// world rank, MPIACC_TEST_RESIDENT_IDLE_US): the launches after configure() ask for its
// idle time, and the post its fault spec names for this rank is declined, not copied.
TEST_F(ResidentCopierTest, IdleTimeAndPlannedFaultsComeFromItsSettings) {
    ResidentCopier::Settings settings;
    settings.idle_us = 500;
    settings.fault_spec = "1:1,0:2";  // another rank's first post, this rank's second
    settings.world_rank = 0;
    copier_->configure(settings);
    char src[16] = "0123456789abcde", a[16] = {}, b[16] = {}, c[16] = {};
    const char untouched[16] = {};
    std::uint64_t na, nb, nc;
    ASSERT_TRUE(post_when_running(a, src, 16, &na));
    EXPECT_EQ(kernel_->idle_asked_ns.load(), std::uint64_t{500} * 1000) << "not the configured idle time";
    ASSERT_EQ(resolve(na), ResidentCopier::State::DONE) << "the first post was planted (rank 1's)";
    EXPECT_EQ(std::memcmp(a, src, 16), 0);
    ASSERT_TRUE(post_when_running(b, src, 16, &nb));
    EXPECT_EQ(resolve(nb), ResidentCopier::State::DECLINED) << "the planted post was taken";
    EXPECT_EQ(std::memcmp(b, untouched, 16), 0) << "the planted post was copied";
    ASSERT_TRUE(post_when_running(c, src, 16, &nc)) << "no kernel after the planted decline";
    EXPECT_EQ(resolve(nc), ResidentCopier::State::DONE);
    EXPECT_EQ(std::memcmp(c, src, 16), 0);
}

TEST_F(ResidentCopierTest, FailedLaunchIsNotTriedAgain) {
    char src[8] = "abcdefg", dst[8] = {};
    std::uint64_t n;
    kernel_->refuse_launch = true;
    copier_->launch_if_idle();
    EXPECT_FALSE(copier_->post(dst, src, 8, {}, &n));
    kernel_->refuse_launch = false;
    copier_->launch_if_idle();
    EXPECT_EQ(kernel_->launches.load(), 0);
    EXPECT_FALSE(copier_->post(dst, src, 8, {}, &n));
}

}  // namespace
}  // namespace mpiacc
