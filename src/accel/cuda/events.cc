#include "accel/cuda/events.h"

#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {
namespace cuda {

namespace {

class PoolEventLease final : public EventRef {
public:
    PoolEventLease(std::shared_ptr<EventPool> pool, const PooledEvent &ev) : pool_(std::move(pool)), ev_(ev) {}
    ~PoolEventLease() override { pool_->give_back(ev_); }
    cudaEvent_t get() const override { return ev_.event; }
    bool ipc_handle(cudaIpcEventHandle_t *out) override {
        if (!pool_->interprocess()) return false;
        std::lock_guard<std::mutex> lock(mutex_);
        if (!ev_.has_handle) {
            DeviceGuard guard(pool_->device(), pool_->driver());
            if (quiet(cudaIpcGetEventHandle(&ev_.handle, ev_.event)) != cudaSuccess) return false;
            ev_.has_handle = true;
        }
        *out = ev_.handle;
        return true;
    }

private:
    std::shared_ptr<EventPool> pool_;
    PooledEvent ev_;
    std::mutex mutex_;
};

}  // namespace

EventPool::EventPool(int device, bool interprocess, std::shared_ptr<const DriverApi> driver)
    : device_(device),
      interprocess_(interprocess),
      driver_(std::move(driver)),
      created_(counter("cuda.event.created")) {}

std::shared_ptr<EventRef> EventPool::acquire(std::string *why) {
    PooledEvent ev;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!free_.empty()) {
            ev = free_.back();
            free_.pop_back();
        }
    }
    if (!ev.event) {
        DeviceGuard guard(device_, driver_.get());
        cudaError_t e = guard.error();
        const unsigned flags = cudaEventDisableTiming | (interprocess_ ? cudaEventInterprocess : 0u);
        if (e == cudaSuccess) e = quiet(cudaEventCreateWithFlags(&ev.event, flags));
        if (e != cudaSuccess) {
            *why = format("cudaEventCreateWithFlags on device %d: %s", device_, cuda_text(e).c_str());
            return nullptr;
        }
        created_.fetch_add(1, std::memory_order_relaxed);
    }
    return std::make_shared<PoolEventLease>(shared_from_this(), ev);
}

void EventPool::give_back(const PooledEvent &ev) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!closed_) {
            free_.push_back(ev);
            return;
        }
    }
    destroy({ev});
}

void EventPool::close() {
    std::vector<PooledEvent> idle;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        closed_ = true;
        idle.swap(free_);
    }
    destroy(idle);
}

void EventPool::destroy(const std::vector<PooledEvent> &events) {
    if (events.empty()) return;
    DeviceGuard guard(device_, driver_.get());
    for (const auto &ev : events) quiet(cudaEventDestroy(ev.event));
}

ImportedEvent::~ImportedEvent() {
    DeviceGuard guard(device_, driver_.get());
    quiet(cudaEventDestroy(ev_));
}

bool EventCompletion::test() {
    if (done_) return true;
    cudaError_t e = cudaEventQuery(ev_->get());
    if (e == cudaErrorNotReady) return false;
    if (e != cudaSuccess) {
        quiet(e);
        error_ = MPI_ERR_OTHER;
        what_ = "cudaEventQuery on the captured dependency: " + cuda_text(e);
    }
    done_ = true;
    ev_.reset();
    return true;
}

}  // namespace cuda
}  // namespace mpiacc
