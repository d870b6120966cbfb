#include "pool/host_staging.h"

#include <mpi.h>

namespace mpiacc {

SharedHostAllocator::~SharedHostAllocator() {
    for (auto &kv : segments_) destroy_shared_segment(&kv.second);
}

void *SharedHostAllocator::allocate(std::size_t bytes, std::string *why) {
    SharedSegment segment;
    if (create_shared_segment(bytes, &segment, why) != MPI_SUCCESS) return nullptr;
    segments_.emplace(segment.base, segment);
    return segment.base;
}

void SharedHostAllocator::release(void *ptr) {
    auto found = segments_.find(ptr);
    if (found == segments_.end()) return;
    destroy_shared_segment(&found->second);
    segments_.erase(found);
}

bool SharedHostAllocator::shared_identity(const void *allocation, SharedLocation *out) const {
    auto found = segments_.find(const_cast<void *>(allocation));
    if (found == segments_.end()) return false;
    *out = shared_location(found->second);
    return true;
}

std::unique_ptr<PinnedPool> make_host_staging_pool(std::size_t slot_size, std::size_t capacity_bytes) {
    return std::make_unique<PinnedPool>(std::make_unique<SharedHostAllocator>(), slot_size, capacity_bytes);
}

HugePageHostAllocator::~HugePageHostAllocator() {
    for (auto &kv : mapped_) unmap_staging_memory(kv.first, kv.second);
}

void *HugePageHostAllocator::allocate(std::size_t bytes, std::string *why) {
    std::size_t mapped = 0;
    void *p = map_staging_memory(bytes, &mapped, why);
    if (p) mapped_.emplace(p, mapped);
    return p;
}

void HugePageHostAllocator::release(void *ptr) {
    auto found = mapped_.find(ptr);
    if (found == mapped_.end()) return;
    unmap_staging_memory(found->first, found->second);
    mapped_.erase(found);
}

std::unique_ptr<PinnedPool> make_host_chunk_pool(std::size_t slot_size, std::size_t capacity_bytes) {
    return std::make_unique<PinnedPool>(std::make_unique<HugePageHostAllocator>(), slot_size, capacity_bytes);
}

}  // namespace mpiacc
