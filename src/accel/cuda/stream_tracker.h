// What is known about the copies enqueued on one internal stream. A stream runs its
// copies in order, so "copy n is done" means every copy before n is done too; and asking
// the driver is dear (a query costs several times an event record: docs/performance.md,
// 'CUDA driver call costs'). With a window of transfers in flight, polling each copy's
// event every progress round spent most of the round in the driver and starved MPICH's
// own progress. So a copy is asked about only when nothing already known answers it, and
// a "not yet" stands for the whole stream for a moment.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "accel/cuda/events.h"

namespace mpiacc {
namespace cuda {

class StreamTracker {
public:
    // Reserve the sequence number of the next copy; the caller enqueues it while holding
    // `enqueue_mutex`, so numbers follow the stream's order.
    std::uint64_t next() { return ++issued_; }
    std::mutex enqueue_mutex;

    // True when copy `seq` is known done without asking the driver: a copy at or after it
    // said so, by its event or (a kernel copy or memop write) by the word it wrote into
    // host memory.
    bool known_done(std::uint64_t seq) const {
        if (seq <= completed_.load(std::memory_order_acquire)) return true;
        return done_word_ && seq <= __atomic_load_n(done_word_, __ATOMIC_ACQUIRE);
    }
    // The sequence number the next copy will get; valid while holding `enqueue_mutex`.
    std::uint64_t peek_next() const { return issued_ + 1; }
    // Pinned host memory where this stream's kernel copies and memop writes write their
    // sequence number.
    void set_done_word(const std::uint64_t *w) { done_word_ = w; }
    // True when asking about copy `seq` now would only repeat a "not yet" that was just
    // given for it or an earlier copy of this stream.
    bool recently_pending(std::uint64_t seq) const {
        std::lock_guard<std::mutex> lock(mutex_);
        return seq >= pending_seq_ && clock::now() - pending_at_ < kRecheck;
    }
    void note_done(std::uint64_t seq) {
        std::uint64_t c = completed_.load(std::memory_order_relaxed);
        while (c < seq && !completed_.compare_exchange_weak(c, seq, std::memory_order_release)) {
        }
    }
    void note_pending(std::uint64_t seq) {
        std::lock_guard<std::mutex> lock(mutex_);
        pending_seq_ = seq;
        pending_at_ = clock::now();
    }
    // The latest copy enqueued and the event recorded after it.
    void set_tail(std::uint64_t seq, std::shared_ptr<EventRef> done) {
        std::lock_guard<std::mutex> lock(mutex_);
        tail_seq_ = seq;
        tail_ = std::move(done);
    }
    // Copy `seq` was just seen done: ask once whether the latest copy is done too, which
    // answers for every copy between. A window of pulls otherwise took one query per copy
    // to retire, after the last was issued.
    void probe_tail(std::uint64_t seq);

private:
    using clock = std::chrono::steady_clock;
    // Shorter than a query itself: one transfer polled alone never waits on it, while
    // a round over many transfers asks each stream once.
    static constexpr std::chrono::nanoseconds kRecheck{1000};
    std::uint64_t issued_ = 0;
    std::atomic<std::uint64_t> completed_{0};
    const std::uint64_t *done_word_ = nullptr;
    mutable std::mutex mutex_;
    std::uint64_t pending_seq_ = ~std::uint64_t{0};
    clock::time_point pending_at_{};
    std::uint64_t tail_seq_ = 0;
    std::shared_ptr<EventRef> tail_;
};

}  // namespace cuda
}  // namespace mpiacc
