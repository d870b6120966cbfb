#include "accel/cuda/resident_copier.h"

#include <algorithm>
#include <cstring>

#include "accel/cuda/cuda_quiet.h"
#include "util/counters.h"
#include "util/error.h"
#include "util/fault.h"

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
// fence, so windows of pulls ran slower through it than on copy engines batching them
// (docs/performance.md, 'Resident copy kernel'): it takes the latency of a lone pull and
// copy engines the rest of a window.
constexpr std::size_t kMaxInFlight = 1;
constexpr std::uint64_t kLow40 = (std::uint64_t{1} << MPIACC_RESIDENT_GEN_SHIFT) - 1;
constexpr std::uint64_t kGenMask = (std::uint64_t{1} << (64 - MPIACC_RESIDENT_GEN_SHIFT)) - 1;

std::uint64_t load(const unsigned long long *w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }
void store(unsigned long long *w, std::uint64_t v) { __atomic_store_n(w, v, __ATOMIC_RELEASE); }

// The GPU: mpiacc_resident_copy on a stream of its own, over a ring in pinned memory.
class CudaDevice final : public ResidentCopier::Device {
public:
    CudaDevice(cudaKernel_t kernel, void *ring, void *ring_dev, cudaStream_t stream)
        : kernel_(kernel), ring_(ring), ring_dev_(ring_dev), stream_(stream) {}
    ~CudaDevice() override {
        quiet(cudaStreamSynchronize(stream_));
        quiet(cudaStreamDestroy(stream_));
        quiet(cudaFreeHost(ring_));
    }
    bool launch(std::uint64_t next, std::uint64_t idle_ns, std::uint64_t life_ns, std::uint64_t gen) override {
        void *ring = ring_dev_;
        unsigned long long n = next, idle = idle_ns, life = life_ns, g = gen;
        void *args[] = {&ring, &n, &idle, &life, &g};
        return quiet(cudaLaunchKernel(reinterpret_cast<const void *>(kernel_), dim3(1), dim3(32), args, 0, stream_)) ==
               cudaSuccess;
    }
    Ended ended() override {
        const cudaError_t e = cudaStreamQuery(stream_);
        if (e == cudaErrorNotReady) return Ended::NO;
        return quiet(e) == cudaSuccess ? Ended::YES : Ended::FAULTED;
    }
    // A faulted kernel is over; the stream's error is taken back.
    void synchronize() override { quiet(cudaStreamSynchronize(stream_)); }

private:
    cudaKernel_t kernel_;
    void *ring_;
    void *ring_dev_;
    cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<ResidentCopier> ResidentCopier::create(int ordinal, cudaKernel_t kernel, const Settings &settings,
                                                       std::string *why) {
    void *ring = nullptr, *dev = nullptr;
    cudaError_t e =
        quiet(cudaHostAlloc(&ring, sizeof(mpiacc_resident_ring), cudaHostAllocMapped | cudaHostAllocPortable));
    if (e != cudaSuccess) {
        *why = format("cudaHostAlloc of device %d's resident copier ring: %s", ordinal, cudaGetErrorString(e));
        return nullptr;
    }
    std::memset(ring, 0, sizeof(mpiacc_resident_ring));
    cudaStream_t stream = nullptr;
    e = quiet(cudaHostGetDevicePointer(&dev, ring, 0));
    if (e == cudaSuccess) {
        int least = 0, greatest = 0;
        if (quiet(cudaDeviceGetStreamPriorityRange(&least, &greatest)) != cudaSuccess) greatest = 0;
        e = quiet(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest));
    }
    if (e != cudaSuccess) {
        *why = format("setting up device %d's resident copier: %s", ordinal, cudaGetErrorString(e));
        quiet(cudaFreeHost(ring));
        return nullptr;
    }
    return std::make_unique<ResidentCopier>(static_cast<mpiacc_resident_ring *>(ring),
                                            std::make_unique<CudaDevice>(kernel, ring, dev, stream), settings);
}

ResidentCopier::ResidentCopier(mpiacc_resident_ring *ring, std::unique_ptr<Device> device, Settings settings)
    : settings_(std::move(settings)), ring_(ring), device_(std::move(device)) {}

void ResidentCopier::configure(const Settings &settings) {
    std::lock_guard<std::mutex> lock(mutex_);
    settings_ = settings;
}

ResidentCopier::~ResidentCopier() {
    // The kernel reads the stop word within one poll (~1 us); a faulted one is over.
    if (launched_) store(&ring_->stop.word[0], 1);
    device_->synchronize();
    for (Record &r : records_) r.keep.clear();
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
    const bool garble = !settings_.fault_spec.empty() &&
                        fault_planned(settings_.fault_spec, settings_.world_rank, static_cast<long>(posted_ + 1));
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
    const std::uint64_t idle = static_cast<std::uint64_t>(std::max(0L, settings_.idle_us)) * 1000;
    if (!device_->launch(posted_, idle, kLifeNs, gen_ & kGenMask)) {
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
    if (!r.declined && std::chrono::steady_clock::now() - r.posted_at > kStreamPatience) check_device();
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

void ResidentCopier::check_device() {
    if (!launched_) return;
    const Device::Ended ended = device_->ended();
    if (ended == Device::Ended::NO) return;
    refresh();  // its exit word is visible once the device says it ended
    if (!launched_ && ended == Device::Ended::YES) return;
    // Ended without its word, or faulted: no more launches; every busy copy goes elsewhere.
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
