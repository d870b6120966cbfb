#include "accel/cuda/resident_copier.h"

#include <cstring>

#include "core/context.h"
#include "core/counters.h"
#include "core/knobs.h"

namespace mpiacc {

namespace {

// However busy, a kernel leaves after this long and the next copy launches another: an
// application's cudaDeviceSynchronize in another thread never waits longer for it.
constexpr unsigned long long kLifeNs = 10ull * 1000 * 1000;
// A posted copy not resolved after this long makes the host ask the kernel's stream
// whether the kernel still runs (a fault would end it without its exit word).
constexpr std::chrono::microseconds kStreamPatience{200};
// Copies on the ring at once. The kernel takes them one after another, each with a
// round trip to host memory to read it, one across NVLink to copy it and a system-wide
// fence: on two H200s windows of 32 pulls of 1-4 KiB ran at 0.28-0.89 GB/s through it,
// against 0.37-1.5 for copy engines batching them. So it takes the latency of a lone pull
// and copy engines the rest of a window.
constexpr std::size_t kMaxInFlight = 1;
constexpr std::uint64_t kLow40 = (std::uint64_t{1} << MPIACC_RESIDENT_GEN_SHIFT) - 1;
constexpr std::uint64_t kGenMask = (std::uint64_t{1} << (64 - MPIACC_RESIDENT_GEN_SHIFT)) - 1;

cudaError_t quiet(cudaError_t e) {
    if (e != cudaSuccess) (void)cudaGetLastError();
    return e;
}

std::uint64_t load(const unsigned long long *w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }
void store(unsigned long long *w, std::uint64_t v) { __atomic_store_n(w, v, __ATOMIC_RELEASE); }

}  // namespace

std::unique_ptr<ResidentCopier> ResidentCopier::create(int ordinal, cudaKernel_t kernel, std::string *why) {
    std::unique_ptr<ResidentCopier> c(new ResidentCopier);
    c->ordinal_ = ordinal;
    c->kernel_ = kernel;
    void *ring = nullptr, *dev = nullptr;
    cudaError_t e =
        quiet(cudaHostAlloc(&ring, sizeof(mpiacc_resident_ring), cudaHostAllocMapped | cudaHostAllocPortable));
    if (e != cudaSuccess) {
        *why = std::string("cudaHostAlloc of the resident copier's ring: ") + cudaGetErrorString(e);
        return nullptr;
    }
    std::memset(ring, 0, sizeof(mpiacc_resident_ring));
    c->ring_ = static_cast<mpiacc_resident_ring *>(ring);
    e = quiet(cudaHostGetDevicePointer(&dev, ring, 0));
    if (e == cudaSuccess) {
        c->ring_dev_ = static_cast<mpiacc_resident_ring *>(dev);
        int least = 0, greatest = 0;
        if (quiet(cudaDeviceGetStreamPriorityRange(&least, &greatest)) != cudaSuccess) greatest = 0;
        e = quiet(cudaStreamCreateWithPriority(&c->stream_, cudaStreamNonBlocking, greatest));
    }
    if (e != cudaSuccess) {
        *why = std::string("setting up the resident copier: ") + cudaGetErrorString(e);
        return nullptr;  // the destructor frees the ring
    }
    return c;
}

ResidentCopier::~ResidentCopier() {
    if (stream_) {
        if (launched_) store(&ring_->stop.word[0], 1);
        // The kernel reads the stop word within one poll (~1 us); a faulted one is over.
        quiet(cudaStreamSynchronize(stream_));
        quiet(cudaStreamDestroy(stream_));
    }
    for (Record &r : records_) r.keep.clear();
    if (ring_) quiet(cudaFreeHost(ring_));
}

bool ResidentCopier::post(void *dst, const void *src, std::size_t len, const std::vector<std::shared_ptr<void>> &keep,
                          std::uint64_t *command) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_ || !launched_) return false;
    refresh();
    // Gone, or not on the GPU yet (the kernel writes its generation as launched: masked).
    if (!launched_ || load(&ring_->started.word[0]) != (gen_ & kGenMask)) return false;
    Record &r = records_[posted_ % MPIACC_RESIDENT_SLOTS];
    if (r.busy || in_flight_ >= kMaxInFlight) return false;
    ++in_flight_;
    const Context &ctx = context();
    const bool garble = !ctx.knobs.fault_resident.empty() &&
                        fault_planned(ctx.knobs.fault_resident, ctx.world_rank, static_cast<long>(posted_ + 1));
    r.busy = true;
    r.declined = false;
    r.abandoned = false;
    r.command = posted_;
    r.posted_at = std::chrono::steady_clock::now();
    r.keep = keep;
    const auto s = reinterpret_cast<std::uint64_t>(src), d = reinterpret_cast<std::uint64_t>(dst);
    const std::uint64_t data[MPIACC_RESIDENT_WORDS] = {s & 0xffffffffu, s >> 32, d & 0xffffffffu, d >> 32, len};
    std::uint64_t flag = static_cast<std::uint32_t>(posted_ + 1);
    if (garble) flag ^= 0x80000000u;
    unsigned long long *w = ring_->slot[posted_ % MPIACC_RESIDENT_SLOTS].word;
    for (int i = 0; i < MPIACC_RESIDENT_WORDS; ++i) store(&w[i], flag << 32 | data[i]);
    if (garble) store(&ring_->stop.word[0], 1);
    *command = posted_++;
    return true;
}

void ResidentCopier::launch_if_idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_) return;
    refresh();
    if (launched_) return;
    ++gen_;
    store(&ring_->stop.word[0], 0);
    mpiacc_resident_ring *ring = ring_dev_;
    unsigned long long next = posted_, gen = gen_ & kGenMask, life = kLifeNs;
    unsigned long long idle = static_cast<unsigned long long>(std::max(0L, knobs().cuda_resident_idle_us)) * 1000;
    void *args[] = {&ring, &next, &idle, &life, &gen};
    cudaError_t e =
        quiet(cudaLaunchKernel(reinterpret_cast<const void *>(kernel_), dim3(1), dim3(32), args, 0, stream_));
    if (e != cudaSuccess) {
        broken_ = true;
        MPIACC_COUNT("cuda.resident.launch_failed");
        return;
    }
    launched_ = true;
    MPIACC_COUNT("cuda.resident.launch");
}

ResidentCopier::State ResidentCopier::poll(std::uint64_t command) {
    Record &r = records_[command % MPIACC_RESIDENT_SLOTS];
    const bool done = done_word(command) == command + 1;
    std::lock_guard<std::mutex> lock(mutex_);
    if (done) {
        release(r);
        return State::DONE;
    }
    if (!r.declined) refresh();
    if (!r.declined && std::chrono::steady_clock::now() - r.posted_at > kStreamPatience) check_stream();
    if (r.declined) {
        release(r);
        return State::DECLINED;
    }
    return State::PENDING;
}

void ResidentCopier::abandon(std::uint64_t command) {
    std::lock_guard<std::mutex> lock(mutex_);
    Record &r = records_[command % MPIACC_RESIDENT_SLOTS];
    if (r.declined || done_word(command) == command + 1) {
        release(r);
        return;
    }
    r.abandoned = true;
    ++abandoned_;
}

void ResidentCopier::refresh() {
    if (launched_) {
        const std::uint64_t e = load(&ring_->exited.word[0]);
        if ((e >> MPIACC_RESIDENT_GEN_SHIFT) == (gen_ & kGenMask)) {
            launched_ = false;
            const std::uint64_t stopped_at = e & kLow40;
            for (Record &r : records_)
                if (r.busy && !r.declined && (r.command & kLow40) >= stopped_at &&
                    done_word(r.command) != r.command + 1) {
                    r.declined = true;
                    MPIACC_COUNT("cuda.copy.resident_declined");
                }
        }
    }
    if (abandoned_ == 0) return;
    for (Record &r : records_)
        if (r.busy && r.abandoned && (r.declined || done_word(r.command) == r.command + 1)) release(r);
}

void ResidentCopier::check_stream() {
    if (!launched_) return;
    cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaErrorNotReady) return;
    quiet(e);
    refresh();  // its exit word is visible once the stream says it ended
    if (!launched_) return;
    // Ended without its word: it faulted. No more launches; every busy copy goes elsewhere.
    launched_ = false;
    broken_ = true;
    MPIACC_COUNT("cuda.resident.lost");
    for (Record &r : records_)
        if (r.busy && !r.declined && done_word(r.command) != r.command + 1) r.declined = true;
}

void ResidentCopier::release(Record &r) {
    if (r.busy) --in_flight_;
    if (r.abandoned) --abandoned_;
    r.busy = false;
    r.declined = false;
    r.abandoned = false;
    r.keep.clear();
}

}  // namespace mpiacc
