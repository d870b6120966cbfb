#include "accel/cuda/pinned_memory.h"

#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {
namespace cuda {

CudaPinnedAllocator::CudaPinnedAllocator(int device, std::string pci_bus_id, std::shared_ptr<const DriverApi> driver,
                                         std::shared_ptr<PinnedRanges> ranges)
    : device_(device),
      pci_bus_id_(std::move(pci_bus_id)),
      driver_(std::move(driver)),
      ranges_(std::move(ranges)),
      allocations_(counter("cuda.pinned.alloc")) {}

void *CudaPinnedAllocator::allocate(std::size_t bytes, std::string *why) {
    DeviceGuard guard(device_, driver_.get());
    if (guard.error() != cudaSuccess) {
        *why = format("cudaSetDevice(%d) for pinned staging memory: %s", device_, cuda_text(guard.error()).c_str());
        return nullptr;
    }
    NumaAllocationScope numa(pci_bus_id_);
    std::string huge_why;
    {
        // The registration faults the pages in, under the NUMA binding above.
        std::size_t len = 0;
        void *p = map_staging_memory(bytes, &len, &huge_why);
        if (p) {
            cudaError_t e = quiet(cudaHostRegister(p, len, cudaHostRegisterPortable | cudaHostRegisterMapped));
            if (e == cudaSuccess) {
                {
                    std::lock_guard<std::mutex> lock(mapped_mutex_);
                    mapped_[p] = len;
                }
                ranges_->add(p, len);
                allocations_.fetch_add(1, std::memory_order_relaxed);
                return p;
            }
            unmap_staging_memory(p, len);
            huge_why = format("cudaHostRegister(%zu bytes): %s", len, cuda_text(e).c_str());
        }
    }
    void *p = nullptr;
    cudaError_t e = quiet(cudaMallocHost(&p, bytes));
    if (e != cudaSuccess) {
        *why = format("cudaMallocHost(%zu bytes) for device %d staging: %s%s%s", bytes, device_, cuda_text(e).c_str(),
                      huge_why.empty() ? "" : "; before it, ", huge_why.c_str());
        return nullptr;
    }
    ranges_->add(p, bytes);
    allocations_.fetch_add(1, std::memory_order_relaxed);
    return p;
}

void CudaPinnedAllocator::release(void *ptr) {
    ranges_->remove(ptr);
    DeviceGuard guard(device_, driver_.get());
    std::size_t len = 0;
    {
        std::lock_guard<std::mutex> lock(mapped_mutex_);
        auto it = mapped_.find(ptr);
        if (it != mapped_.end()) {
            len = it->second;
            mapped_.erase(it);
        }
    }
    if (len == 0) {
        quiet(cudaFreeHost(ptr));
        return;
    }
    quiet(cudaHostUnregister(ptr));
    unmap_staging_memory(ptr, len);
}

}  // namespace cuda
}  // namespace mpiacc
