// CUDA events as the component holds them: per-device pools of reusable events, leases of
// them, a peer's events opened through IPC, and the completion that waits on one.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accel/accel.h"
#include "accel/cuda/driver.h"

namespace mpiacc {
namespace cuda {

// An event a completion or a dependency waits on: a leased pool event, or a peer's event
// opened through IPC.
class EventRef {
public:
    virtual ~EventRef() = default;
    virtual cudaEvent_t get() const = 0;
    // The handle a peer process opens it with; false when it cannot be exported.
    virtual bool ipc_handle(cudaIpcEventHandle_t * /*out*/) { return false; }
};

struct PooledEvent {
    cudaEvent_t event = nullptr;
    bool has_handle = false;  // cudaIpcGetEventHandle is asked once per event, not per use
    cudaIpcEventHandle_t handle{};
};

// Per-device events, reused: creating one costs more than recording it. Timing is off.
// Each device has two pools: plain events for copies and dependencies, and interprocess
// ones for dependencies sent to a peer, made only on the IPC path because recording an
// interprocess event costs many times a plain one's record (docs/performance.md,
// 'CUDA driver call costs').
class EventPool : public std::enable_shared_from_this<EventPool> {
public:
    EventPool(int device, bool interprocess, std::shared_ptr<const DriverApi> driver);
    ~EventPool() { destroy(free_); }
    EventPool(const EventPool &) = delete;
    EventPool &operator=(const EventPool &) = delete;

    // A lease of an idle event (made when none is idle), given back when the lease dies.
    std::shared_ptr<EventRef> acquire(std::string *why);
    void give_back(const PooledEvent &ev);
    // Shutdown: free the idle events now; leased ones are destroyed as they come back.
    void close();
    int device() const { return device_; }
    bool interprocess() const { return interprocess_; }
    const DriverApi *driver() const { return driver_.get(); }

private:
    void destroy(const std::vector<PooledEvent> &events);

    int device_;
    bool interprocess_;
    std::shared_ptr<const DriverApi> driver_;
    std::atomic<std::int64_t> &created_;
    std::mutex mutex_;
    std::vector<PooledEvent> free_;
    bool closed_ = false;
};

// A peer's event opened with cudaIpcOpenEventHandle, shared by every import that names it.
class ImportedEvent final : public EventRef {
public:
    ImportedEvent(cudaEvent_t ev, int device, std::shared_ptr<const DriverApi> driver)
        : ev_(ev), device_(device), driver_(std::move(driver)) {}
    ~ImportedEvent() override;
    cudaEvent_t get() const override { return ev_; }

private:
    cudaEvent_t ev_;
    int device_;
    std::shared_ptr<const DriverApi> driver_;
};

// A completion that fires when an event has been reached.
class EventCompletion final : public Completion {
public:
    explicit EventCompletion(std::shared_ptr<EventRef> ev) : ev_(std::move(ev)) {}
    bool test() override;
    int error() const override { return error_; }
    std::string what() const override { return what_; }

private:
    std::shared_ptr<EventRef> ev_;
    bool done_ = false;
    int error_ = MPI_SUCCESS;
    std::string what_;
};

}  // namespace cuda
}  // namespace mpiacc
