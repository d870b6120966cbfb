#include "accel/cuda/cuda_accel.h"

#include "accel/cuda/accel_state.h"
#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {

using cuda::cuda_text;

// ------------------------------------------------------------------------------ state

CudaAccel::State::State(const AccelSettings &initial)
    : settings(initial),
      cache(PointerQuery{
          [this](const void *addr, PointerInfo *info, std::string *why) { return query_pointer(addr, info, why); },
          [this](const void *addr, std::uint64_t *id) {
              if (!driver->pointer_get_attribute) return false;
              unsigned long long v = 0;
              if (driver->pointer_get_attribute(&v, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                                static_cast<CUdeviceptr>(cuda::as_addr(addr))) != CUDA_SUCCESS)
                  return false;
              *id = v;
              return true;
          }}),
      peer_pins{[this](void *base, std::size_t bytes, std::string *why) {
                    // Portable: whichever device's receive copies out of it. Mapped, as all
                    // that `pinned` knows: a resident copier's kernel may read it.
                    cudaError_t e =
                        quiet(cudaHostRegister(base, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
                    if (e != cudaSuccess) {
                        *why = format("cudaHostRegister of a peer's staging segment (%zu bytes) failed: ", bytes) +
                               cuda_text(e);
                        return false;
                    }
                    pinned->add(base, bytes);
                    return true;
                },
                [this](void *base) {
                    pinned->remove(base);
                    quiet(cudaHostUnregister(base));
                },
                counter("cuda.peer_pin"), counter("cuda.peer_unpin")} {}

void CudaAccel::State::probe() {
    // Without a driver this returns cudaErrorInsufficientDriver (or NoDevice) quietly.
    int n = 0;
    cudaError_t e = quiet(cudaGetDeviceCount(&n));
    if (e != cudaSuccess) {
        unavailable_why = "cudaGetDeviceCount: " + cuda_text(e);
        avail.store(2, std::memory_order_release);
        return;
    }
    if (n <= 0) {
        unavailable_why = "cudaGetDeviceCount found no CUDA device";
        avail.store(2, std::memory_order_release);
        return;
    }
    device_count = n;
    cuda::resolve_driver_api(driver.get());
    avail.store(1, std::memory_order_release);
}

void CudaAccel::State::reconfigure(const AccelSettings &new_settings) {
    std::lock_guard<std::mutex> lock(mutex);
    settings = new_settings;
    for (auto &d : devices) d.second->configure(settings);
}

bool CudaAccel::State::query_pointer(const void *addr, PointerInfo *info, std::string *why) {
    memtype_queries.fetch_add(1, std::memory_order_relaxed);
    return cuda::query_pointer(*driver, addr, info, why);
}

bool CudaAccel::State::driver_pinned(const void *p) {
    PointerInfo info;
    std::string why;
    return query_pointer(p, &info, &why) && info.kind == MemoryKind::HOST_PINNED;
}

std::shared_ptr<cuda::DeviceState> CudaAccel::State::device_state(int ordinal, std::string *why) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = devices.find(ordinal);
    if (it != devices.end()) return it->second;
    cuda::DeviceSetup setup;
    setup.driver = driver;
    setup.pinned = pinned;
    setup.kernels = &kernels;
    setup.settings = &settings;
    auto state = cuda::make_device_state(ordinal, setup, why);
    if (state) devices.emplace(ordinal, state);
    return state;
}

bool CudaAccel::State::pin_peer_segment(void *base, std::size_t bytes, std::uint64_t mapping, std::string *why) {
    std::lock_guard<std::mutex> lock(mutex);
    return peer_pins.pin(base, bytes, mapping, why);
}

void CudaAccel::State::unpin_peer_segment(void *base) {
    std::lock_guard<std::mutex> lock(mutex);
    peer_pins.unpin(base);
}

void CudaAccel::State::shutdown() {
    std::map<int, std::shared_ptr<cuda::DeviceState>> old_devices;
    {
        std::lock_guard<std::mutex> lock(mutex);
        // Before MPI_Finalize unmaps them (unmap_peer_segments).
        peer_pins.unpin_all();
        old_devices.swap(devices);
    }
    // CUDA calls happen outside the lock, and only for what was created.
    for (auto &d : old_devices)
        for (auto *pool : {d.second->events.get(), d.second->ipc_events.get()})
            if (pool) pool->close();
    ipc.clear();
    old_devices.clear();
    cache.clear();
}

// ------------------------------------------------------------------------------ CudaAccel

CudaAccel::CudaAccel(const AccelSettings &settings) : state_(std::make_shared<State>(settings)) {
    std::weak_ptr<State> state = state_;
    unmap_hook_ = add_peer_segment_unmap_hook([state](void *base) {
        if (auto live = state.lock()) live->unpin_peer_segment(base);
    });
}

CudaAccel::~CudaAccel() {
    remove_peer_segment_unmap_hook(unmap_hook_);
    state_->shutdown();
}

void CudaAccel::reconfigure(const AccelSettings &settings) { state_->reconfigure(settings); }

bool CudaAccel::available() { return state_->available(); }

int CudaAccel::capture(void *addr, std::size_t bytes, const BufferAttrs &attrs, std::unique_ptr<DeviceBuffer> *out,
                       std::string *why) {
    return state_->capture(addr, bytes, attrs, out, why);
}

bool CudaAccel::register_host(void *p, std::size_t bytes) {
    if (!p || bytes == 0 || !available()) return false;
    // Portable: pinned for every device's context, whichever device copies from it.
    // Mapped, as all that `pinned` knows: a resident copier's kernel may use it.
    if (quiet(cudaHostRegister(p, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped)) != cudaSuccess)
        return false;
    state_->pinned->add(p, bytes);
    counter("cuda.host.registered")++;
    return true;
}

void CudaAccel::unregister_host(void *p) {
    state_->pinned->remove(p);
    quiet(cudaHostUnregister(p));
}

bool CudaAccel::owns_pointer(const void *addr, int *device_ordinal) {
    if (!addr || !state_->available()) return false;
    PointerInfo info;
    if (!state_->cache.is_cuda(addr, &info)) return false;
    if (device_ordinal) *device_ordinal = info.ordinal;
    return true;
}

void *CudaAccel::allocate_device_memory(int ordinal, std::size_t bytes, std::string *why) {
    if (!state_->available()) {
        *why = "no CUDA device";
        return nullptr;
    }
    cuda::DeviceGuard guard(ordinal, state_->driver.get());
    void *p = nullptr;
    cudaError_t e = guard.error();
    if (e == cudaSuccess) e = quiet(cudaMalloc(&p, bytes));
    if (e != cudaSuccess) {
        *why = format("cudaMalloc of %zu bytes on device %d: %s", bytes, ordinal, cudaGetErrorString(e));
        return nullptr;
    }
    return p;
}

void CudaAccel::free_device_memory(int ordinal, void *p, std::size_t bytes) {
    if (!p) return;
    cuda::DeviceGuard guard(ordinal, state_->driver.get());
    // cudaFree waits for the device: no copy or kernel still uses the memory.
    quiet(cudaFree(p));
    state_->cache.forget(p, bytes);
}

std::int32_t CudaAccel::device_pci_location(int ordinal) {
    return state_->available() ? cuda::pci_location(ordinal) : -1;
}

KnownHostGranules CudaAccel::known_host_memory() const { return state_->cache.known_host(); }

int CudaAccel::ipc_import(const IpcExport &peer, std::size_t bytes, int device, std::unique_ptr<DeviceBuffer> *out,
                          std::string *why) {
    return state_->ipc_import(peer, bytes, device, out, why);
}

bool CudaAccel::device_in_use() {
    if (!available()) return false;
    int device = 0;
    if (quiet(cudaGetDevice(&device)) != cudaSuccess || device < 0) return false;
    State &s = *state_;
    const std::uint64_t bit = device < 64 ? std::uint64_t{1} << device : 0;
    if (s.contexts_seen.load(std::memory_order_relaxed) & bit) return true;
    const cuda::DriverApi &d = *s.driver;
    CUdevice dev = 0;
    unsigned flags = 0;
    int active = 0;
    if (!d.device_get || !d.primary_ctx_state || d.device_get(&dev, device) != CUDA_SUCCESS ||
        d.primary_ctx_state(dev, &flags, &active) != CUDA_SUCCESS || !active)
        return false;
    s.contexts_seen.fetch_or(bit, std::memory_order_relaxed);  // a primary context stays
    return true;
}

void CudaAccel::shutdown() { state_->shutdown(); }

std::string CudaAccel::unavailable_reason() const {
    return state_->avail.load(std::memory_order_acquire) == 2 ? state_->unavailable_why : std::string();
}

std::string CudaAccel::counters() const {
    auto line = [](const char *name, long long v) { return format("%s=%lld\n", name, v); };
    auto named = [](const char *name) -> long long { return counter(name).load(std::memory_order_relaxed); };
    const State &s = *state_;
    std::string out;
    out += line("cuda.available", s.avail.load(std::memory_order_acquire) == 1);
    out += line("cuda.copy.kernel", named("cuda.copy.kernel"));
    out += line("cuda.event.created", named("cuda.event.created"));
    out += line("cuda.ipc.export", s.ipc.exports());
    out += line("cuda.ipc.hit", s.ipc.hits());
    out += line("cuda.ipc.open", s.ipc.opened());
    out += line("cuda.memtype.device_hit", static_cast<long long>(s.cache.device_hits()));
    out += line("cuda.memtype.query", s.memtype_queries.load(std::memory_order_relaxed));
    out += line("cuda.peer_pin", named("cuda.peer_pin"));
    out += line("cuda.peer_unpin", named("cuda.peer_unpin"));
    out += line("cuda.pinned.alloc", named("cuda.pinned.alloc"));
    out += line("cuda.stream.created", s.streams_created.load(std::memory_order_relaxed));
    return out;
}

std::unique_ptr<Accel> make_cuda_accel(const AccelSettings &settings) { return std::make_unique<CudaAccel>(settings); }

}  // namespace mpiacc
