// The memory-kind cache behind CUDA pointer autodetection, driven by a fake driver so it
// runs without a GPU; then CudaAccel itself: on a machine without a driver it must say
// so cleanly, and where a GPU exists the CudaGpu tests check the real paths.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "accel/cuda/cuda_accel.h"
#include "accel/cuda/memtype_cache.h"
#include "util/counters.h"
#include "util/error.h"
#include "pool/pinned_pool.h"

extern char **environ;

namespace mpiacc {
namespace {

constexpr std::uintptr_t kGranule = std::uintptr_t{1} << MemtypeCache::kGranuleShift;
constexpr std::uintptr_t kHostA = 0x10000000;        // fake host addresses: never dereferenced
constexpr std::uintptr_t kDevBase = 0x7f0000000000;  // fake device VA, 2 MiB aligned

const void *at(std::uintptr_t a) { return reinterpret_cast<const void *>(a); }

// A driver that knows a list of allocations; everything else is pageable host memory.
struct FakeDriver {
    std::vector<PointerInfo> allocations;
    int queries = 0;
    int id_queries = 0;
    bool fail = false;
    bool report_ranges = true;
    std::uint64_t next_id = 1;

    const PointerInfo &alloc(std::uintptr_t base, std::size_t size, int ordinal, MemoryKind kind = MemoryKind::DEVICE) {
        PointerInfo p;
        p.kind = kind;
        p.ordinal = ordinal;
        p.base = base;
        p.size = size;
        p.buffer_id = next_id++;
        allocations.push_back(p);
        return allocations.back();
    }
    void release(std::uintptr_t base) {
        for (auto it = allocations.begin(); it != allocations.end(); ++it)
            if (it->base == base) {
                allocations.erase(it);
                return;
            }
    }
    const PointerInfo *find(const void *addr) const {
        for (const auto &p : allocations)
            if (p.contains(reinterpret_cast<std::uintptr_t>(addr))) return &p;
        return nullptr;
    }
    PointerQuery query(bool with_buffer_id = true) {
        PointerQuery q;
        q.query = [this](const void *addr, PointerInfo *info, std::string *why) {
            ++queries;
            if (fail) {
                *why = "fake failure";
                return false;
            }
            const PointerInfo *p = find(addr);
            *info = p ? *p : PointerInfo{};
            if (p && !report_ranges) info->base = info->size = 0;
            return true;
        };
        if (with_buffer_id)
            q.buffer_id = [this](const void *addr, std::uint64_t *id) {
                ++id_queries;
                const PointerInfo *p = find(addr);
                if (!p) return false;
                *id = p->buffer_id;
                return true;
            };
        return q;
    }
};

TEST(MemtypeCache, host_pointer_is_queried_once_then_answered_from_the_granule_table) {
    FakeDriver drv;
    MemtypeCache cache(drv.query());
    PointerInfo info;
    EXPECT_FALSE(cache.is_cuda(at(kHostA), &info));
    EXPECT_FALSE(cache.is_cuda(at(kHostA), &info));
    EXPECT_FALSE(cache.is_cuda(at(kHostA + 100), &info));           // same granule
    EXPECT_FALSE(cache.is_cuda(at(kHostA + kGranule - 1), &info));  // last byte of it
    EXPECT_EQ(drv.queries, 1);
    EXPECT_EQ(cache.queries(), 1u);
    EXPECT_FALSE(cache.is_cuda(at(kHostA + kGranule), &info));  // next granule: asked once
    EXPECT_EQ(drv.queries, 2);
}

TEST(MemtypeCache, device_range_answers_every_address_inside_without_a_query) {
    FakeDriver drv;
    drv.alloc(kDevBase, 8 << 20, 1);
    MemtypeCache cache(drv.query());
    PointerInfo info;
    ASSERT_TRUE(cache.is_cuda(at(kDevBase + 4096), &info));
    EXPECT_EQ(info.ordinal, 1);
    EXPECT_EQ(info.base, kDevBase);
    EXPECT_EQ(info.size, std::size_t{8} << 20);
    EXPECT_TRUE(cache.is_cuda(at(kDevBase), &info));
    EXPECT_TRUE(cache.is_cuda(at(kDevBase + (8 << 20) - 1), &info));
    EXPECT_EQ(drv.queries, 1);
    EXPECT_EQ(cache.device_hits(), 2u);
    EXPECT_EQ(cache.device_ranges(), 1u);
}

TEST(MemtypeCache, device_range_end_is_exclusive) {
    FakeDriver drv;
    drv.alloc(kDevBase, 2 << 20, 0);
    MemtypeCache cache(drv.query());
    PointerInfo info;
    ASSERT_TRUE(cache.is_cuda(at(kDevBase), &info));
    EXPECT_FALSE(cache.is_cuda(at(kDevBase + (2 << 20)), &info));
    EXPECT_EQ(drv.queries, 2);
}

TEST(MemtypeCache, pinned_host_memory_is_host) {
    FakeDriver drv;
    drv.alloc(kHostA, 1 << 20, 0, MemoryKind::HOST_PINNED);
    MemtypeCache cache(drv.query());
    PointerInfo info;
    EXPECT_FALSE(cache.is_cuda(at(kHostA + 64), &info));
    EXPECT_FALSE(cache.is_cuda(at(kHostA + 64), &info));
    EXPECT_EQ(drv.queries, 2);  // pinned memory is not remembered as host
    std::string why;
    ASSERT_TRUE(cache.resolve(at(kHostA + 64), &info, nullptr, &why));
    EXPECT_EQ(info.kind, MemoryKind::HOST_PINNED);
}

TEST(MemtypeCache, device_allocation_at_a_freed_pinned_address_is_found) {
    // cudaMallocHost and cudaMalloc share the driver's address range: a freed pinned
    // buffer's address may come back as device memory (seen on the H200 machine).
    FakeDriver drv;
    drv.alloc(kHostA, 1 << 20, 0, MemoryKind::HOST_PINNED);
    MemtypeCache cache(drv.query());
    PointerInfo info;
    EXPECT_FALSE(cache.is_cuda(at(kHostA + 64), &info));
    drv.release(kHostA);
    drv.alloc(kHostA, 1 << 20, 0, MemoryKind::DEVICE);
    ASSERT_TRUE(cache.is_cuda(at(kHostA + 64), &info));
    EXPECT_EQ(info.kind, MemoryKind::DEVICE);
}

TEST(MemtypeCache, managed_memory_counts_as_cuda) {
    FakeDriver drv;
    drv.alloc(kDevBase, 1 << 20, 0, MemoryKind::MANAGED);
    MemtypeCache cache(drv.query());
    PointerInfo info;
    ASSERT_TRUE(cache.is_cuda(at(kDevBase + 8), &info));
    EXPECT_EQ(info.kind, MemoryKind::MANAGED);
}

TEST(MemtypeCache, failed_query_reads_as_host_and_is_not_cached) {
    FakeDriver drv;
    drv.fail = true;
    MemtypeCache cache(drv.query());
    PointerInfo info;
    EXPECT_FALSE(cache.is_cuda(at(kHostA), &info));
    EXPECT_FALSE(cache.is_cuda(at(kHostA), &info));
    EXPECT_EQ(drv.queries, 2);
    std::string why;
    EXPECT_FALSE(cache.resolve(at(kHostA), &info, nullptr, &why));
    EXPECT_EQ(why, "fake failure");
}

TEST(MemtypeCache, range_the_driver_cannot_bound_is_answered_but_not_cached) {
    FakeDriver drv;
    drv.report_ranges = false;
    drv.alloc(kDevBase, 1 << 20, 0);
    MemtypeCache cache(drv.query());
    PointerInfo info;
    EXPECT_TRUE(cache.is_cuda(at(kDevBase), &info));
    EXPECT_TRUE(cache.is_cuda(at(kDevBase), &info));
    EXPECT_EQ(drv.queries, 2);
    EXPECT_EQ(cache.device_ranges(), 0u);
}

TEST(MemtypeCache, resolve_keeps_a_live_range_after_checking_its_buffer_id) {
    FakeDriver drv;
    drv.alloc(kDevBase, 1 << 20, 0);
    MemtypeCache cache(drv.query());
    PointerInfo info, stale;
    std::string why;
    ASSERT_TRUE(cache.resolve(at(kDevBase + 10), &info, &stale, &why));
    ASSERT_TRUE(info.is_cuda());
    ASSERT_TRUE(cache.resolve(at(kDevBase + 20), &info, &stale, &why));
    EXPECT_TRUE(info.is_cuda());
    EXPECT_EQ(drv.queries, 1);  // the second is a buffer-id check, not a full query
    EXPECT_EQ(drv.id_queries, 1);
    EXPECT_FALSE(stale.is_cuda());
}

TEST(MemtypeCache, resolve_notices_a_freed_range_and_reports_it_stale) {
    FakeDriver drv;
    const std::uint64_t id = drv.alloc(kDevBase, 1 << 20, 2).buffer_id;
    MemtypeCache cache(drv.query());
    PointerInfo info, stale;
    std::string why;
    ASSERT_TRUE(cache.is_cuda(at(kDevBase), &info));
    drv.release(kDevBase);
    EXPECT_TRUE(cache.is_cuda(at(kDevBase), &info));                // the hot path trusts the range...
    ASSERT_TRUE(cache.resolve(at(kDevBase), &info, &stale, &why));  // ...capture does not
    EXPECT_EQ(info.kind, MemoryKind::HOST);
    EXPECT_TRUE(stale.is_cuda());
    EXPECT_EQ(stale.buffer_id, id);
    EXPECT_EQ(stale.ordinal, 2);
    EXPECT_FALSE(cache.is_cuda(at(kDevBase), &info));
}

TEST(MemtypeCache, resolve_notices_a_range_reused_by_a_new_allocation) {
    FakeDriver drv;
    drv.alloc(kDevBase, 1 << 20, 0);
    MemtypeCache cache(drv.query());
    PointerInfo info, stale;
    std::string why;
    ASSERT_TRUE(cache.is_cuda(at(kDevBase), &info));
    drv.release(kDevBase);
    const std::uint64_t new_id = drv.alloc(kDevBase, 4 << 20, 1).buffer_id;
    ASSERT_TRUE(cache.resolve(at(kDevBase + 4096), &info, &stale, &why));
    EXPECT_TRUE(info.is_cuda());
    EXPECT_EQ(info.buffer_id, new_id);
    EXPECT_EQ(info.size, std::size_t{4} << 20);
    EXPECT_EQ(info.ordinal, 1);
    EXPECT_TRUE(stale.is_cuda());  // the old one is reported, the new one used
    EXPECT_EQ(cache.device_ranges(), 1u);
    ASSERT_TRUE(cache.is_cuda(at(kDevBase + (3 << 20)), &info));
    EXPECT_EQ(info.buffer_id, new_id);
}

TEST(MemtypeCache, resolve_without_a_buffer_id_query_falls_back_to_a_full_query) {
    FakeDriver drv;
    drv.alloc(kDevBase, 1 << 20, 0);
    MemtypeCache cache(drv.query(false));
    PointerInfo info, stale;
    std::string why;
    ASSERT_TRUE(cache.resolve(at(kDevBase), &info, &stale, &why));
    ASSERT_TRUE(cache.resolve(at(kDevBase), &info, &stale, &why));
    EXPECT_EQ(drv.queries, 2);
    EXPECT_FALSE(stale.is_cuda());  // same allocation: not stale
    drv.release(kDevBase);
    ASSERT_TRUE(cache.resolve(at(kDevBase), &info, &stale, &why));
    EXPECT_TRUE(stale.is_cuda());
}

TEST(MemtypeCache, learning_a_device_range_drops_the_host_granules_it_covers) {
    // The documented staleness: host memory unmapped, its VA reused for device memory.
    FakeDriver drv;
    MemtypeCache cache(drv.query());
    PointerInfo info;
    EXPECT_FALSE(cache.is_cuda(at(kDevBase + kGranule), &info));  // host, remembered
    drv.alloc(kDevBase, 2 << 20, 0);
    EXPECT_FALSE(cache.is_cuda(at(kDevBase + kGranule), &info));  // stale answer, no query
    EXPECT_EQ(drv.queries, 1);
    std::string why;
    ASSERT_TRUE(cache.resolve(at(kDevBase), &info, nullptr, &why));  // a capture learns the range
    EXPECT_TRUE(cache.is_cuda(at(kDevBase + kGranule), &info));      // and it wins from then on
}

TEST(MemtypeCache, host_granule_table_is_bounded_and_evicts) {
    FakeDriver drv;
    MemtypeCache cache(drv.query(), 8);
    EXPECT_EQ(cache.host_slots(), 8u);
    PointerInfo info;
    for (int i = 0; i < 100; ++i) EXPECT_FALSE(cache.is_cuda(at(kHostA + i * kGranule), &info));
    EXPECT_EQ(drv.queries, 100);
    EXPECT_FALSE(cache.is_cuda(at(kHostA + 99 * kGranule), &info));  // the newest is held
    EXPECT_EQ(drv.queries, 100);
    EXPECT_FALSE(cache.is_cuda(at(kHostA), &info));  // the oldest was evicted
    EXPECT_EQ(drv.queries, 101);
}

TEST(MemtypeCache, device_range_table_is_bounded) {
    FakeDriver drv;
    MemtypeCache cache(drv.query(), 64, 4);
    PointerInfo info;
    for (int i = 0; i < 10; ++i) {
        drv.alloc(kDevBase + i * (2u << 20), 2 << 20, 0);
        ASSERT_TRUE(cache.is_cuda(at(kDevBase + i * (2u << 20)), &info));
        EXPECT_LE(cache.device_ranges(), 4u);
    }
}

TEST(MemtypeCache, new_range_replaces_the_stale_ranges_it_overlaps) {
    FakeDriver drv;
    MemtypeCache cache(drv.query());
    PointerInfo info;
    drv.alloc(kDevBase, 2 << 20, 0);
    drv.alloc(kDevBase + (2 << 20), 2 << 20, 0);
    ASSERT_TRUE(cache.is_cuda(at(kDevBase), &info));
    ASSERT_TRUE(cache.is_cuda(at(kDevBase + (2 << 20)), &info));
    EXPECT_EQ(cache.device_ranges(), 2u);
    drv.allocations.clear();
    drv.alloc(kDevBase + (1 << 20), 4 << 20, 0);  // straddles both freed ones
    std::string why;
    ASSERT_TRUE(cache.resolve(at(kDevBase + (1 << 20)), &info, nullptr, &why));
    EXPECT_EQ(cache.device_ranges(), 1u);
}

TEST(MemtypeCache, forget_drops_ranges_and_granules) {
    FakeDriver drv;
    drv.alloc(kDevBase, 2 << 20, 0);
    MemtypeCache cache(drv.query());
    PointerInfo info;
    ASSERT_TRUE(cache.is_cuda(at(kDevBase), &info));
    EXPECT_FALSE(cache.is_cuda(at(kHostA), &info));
    cache.forget(at(kDevBase), 16);
    cache.forget(at(kHostA), 1);
    EXPECT_EQ(cache.device_ranges(), 0u);
    EXPECT_TRUE(cache.is_cuda(at(kDevBase), &info));
    EXPECT_FALSE(cache.is_cuda(at(kHostA), &info));
    EXPECT_EQ(drv.queries, 4);
    cache.clear();
    EXPECT_FALSE(cache.is_cuda(at(kHostA), &info));
    EXPECT_EQ(drv.queries, 5);
}

// The view the bindings read inline (known_host.h) must say "host" only for what the
// cache itself would answer from its granule table: never a device address, never a
// granule dropped by forget or clear, and for a copy of the view taken before them too.
TEST(MemtypeCache, known_host_view_holds_exactly_the_host_granules_the_cache_answers_from) {
    FakeDriver drv;
    drv.alloc(kDevBase, 2 << 20, 0);
    MemtypeCache cache(drv.query());
    const KnownHostGranules view = cache.known_host();  // a copy, as the Context keeps
    EXPECT_FALSE(view.contains(at(kHostA)));            // not asked yet
    PointerInfo info;
    EXPECT_FALSE(cache.is_cuda(at(kHostA), &info));
    EXPECT_TRUE(cache.is_cuda(at(kDevBase), &info));
    EXPECT_TRUE(view.contains(at(kHostA)));
    EXPECT_TRUE(view.contains(at(kHostA + kGranule - 1)));
    EXPECT_FALSE(view.contains(at(kHostA + kGranule)));  // the next granule was never asked
    EXPECT_FALSE(view.contains(at(kDevBase)));
    cache.forget(at(kHostA + 8), 1);
    EXPECT_FALSE(view.contains(at(kHostA)));
    EXPECT_FALSE(cache.is_cuda(at(kHostA), &info));
    EXPECT_TRUE(view.contains(at(kHostA)));
    cache.clear();
    EXPECT_FALSE(view.contains(at(kHostA)));
    EXPECT_EQ(drv.queries, 3);
}

// Learning a device range drops host granules it covers from the view as well: a host
// granule the driver later maps device memory into must not read as host.
TEST(MemtypeCache, known_host_view_loses_a_granule_a_device_range_covers) {
    FakeDriver drv;
    MemtypeCache cache(drv.query());
    const KnownHostGranules view = cache.known_host();
    PointerInfo info;
    EXPECT_FALSE(cache.is_cuda(at(kDevBase + kGranule), &info));  // host for now
    ASSERT_TRUE(view.contains(at(kDevBase + kGranule)));
    drv.alloc(kDevBase, 2 << 20, 1);
    std::string why;
    ASSERT_TRUE(cache.resolve(at(kDevBase), &info, nullptr, &why)) << why;  // a capture learns the range
    EXPECT_FALSE(view.contains(at(kDevBase + kGranule)));
}

// A default view (autodetection off, or no CUDA) knows nothing, the null pointer included.
TEST(KnownHostGranules, empty_view_knows_nothing) {
    const KnownHostGranules none;
    EXPECT_FALSE(none.contains(nullptr));
    EXPECT_FALSE(none.contains(at(kHostA)));
    EXPECT_FALSE(none.contains(at(~std::uintptr_t{0})));
}

TEST(MemtypeCache, concurrent_lookups_agree) {
    FakeDriver drv;
    drv.alloc(kDevBase, 64 << 20, 3);
    std::mutex fake_mutex;  // the fake is not thread-safe; the real driver is
    PointerQuery q = drv.query();
    PointerQuery locked;
    locked.query = [&](const void *a, PointerInfo *i, std::string *w) {
        std::lock_guard<std::mutex> l(fake_mutex);
        return q.query(a, i, w);
    };
    locked.buffer_id = [&](const void *a, std::uint64_t *id) {
        std::lock_guard<std::mutex> l(fake_mutex);
        return q.buffer_id(a, id);
    };
    MemtypeCache cache(locked, 64);
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            PointerInfo info;
            for (int i = 0; i < 20000; ++i) {
                const std::uintptr_t h = kHostA + static_cast<std::uintptr_t>((i * 7 + t) % 200) * kGranule;
                const std::uintptr_t d = kDevBase + static_cast<std::uintptr_t>((i * 13 + t) % 1024) * 65536;
                if (cache.is_cuda(at(h), &info)) ++wrong;
                if (!cache.is_cuda(at(d), &info) || info.ordinal != 3) ++wrong;
            }
        });
    for (auto &th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0);
}

// ------------------------------------------------------------------ CudaAccel, no GPU

TEST(CudaAccel, without_a_driver_is_unavailable_and_capture_fails_cleanly) {
    CudaAccel accel{AccelSettings{}};
    if (accel.available()) GTEST_SKIP() << "a CUDA device is usable here: see the CudaGpu tests";
    EXPECT_EQ(accel.kind(), BufKind::CUDA);
    EXPECT_STREQ(accel.name(), "cuda");
    EXPECT_FALSE(accel.available());  // cached, and still quiet
    EXPECT_NE(accel.unavailable_reason().find("cudaGetDeviceCount"), std::string::npos);

    int host_word = 0;
    int ordinal = -7;
    EXPECT_FALSE(accel.owns_pointer(&host_word, &ordinal));
    EXPECT_EQ(ordinal, -7);

    BufferAttrs attrs;
    attrs.kind = BufKind::CUDA;
    attrs.kind_given = true;
    std::unique_ptr<DeviceBuffer> buf;
    std::string why;
    EXPECT_EQ(accel.capture(&host_word, sizeof host_word, attrs, &buf, &why), MPI_ERR_BUFFER);
    EXPECT_EQ(buf, nullptr);
    EXPECT_NE(why.find("no CUDA device is usable"), std::string::npos) << why;
    EXPECT_NE(why.find("cudaGetDeviceCount"), std::string::npos) << why;

    IpcExport peer;
    std::memset(&peer, 0, sizeof peer);
    why.clear();
    EXPECT_NE(accel.ipc_import(peer, 16, -1, &buf, &why), MPI_SUCCESS);
    EXPECT_EQ(buf, nullptr);
    EXPECT_FALSE(why.empty());

    EXPECT_NE(accel.counters().find("cuda.available=0\n"), std::string::npos);
    accel.shutdown();
    accel.shutdown();
}

TEST(CudaAccel, factory_makes_the_cuda_component) {
    auto accel = make_cuda_accel(accel_settings());
    ASSERT_NE(accel, nullptr);
    EXPECT_EQ(accel->kind(), BufKind::CUDA);
}

// ------------------------------------------------------------------ CudaAccel on a GPU

// "no CUDA device" where there is none (no device, or no driver: the runtime then says
// cudaErrorInsufficientDriver, which reads like a broken install); the driver's words
// for anything else.
std::string cuda_skip_reason(const std::string &why) {
    for (const char *none : {"cudaErrorInsufficientDriver", "cudaErrorNoDevice", "found no CUDA device"})
        if (why.find(none) != std::string::npos) return "no CUDA device";
    return "no usable CUDA device: " + why;
}

TEST(CudaSkips, no_driver_or_no_device_reads_no_cuda_device) {
    EXPECT_EQ(cuda_skip_reason("cudaGetDeviceCount: cudaErrorInsufficientDriver (CUDA driver version is "
                               "insufficient for CUDA runtime version)"),
              "no CUDA device");
    EXPECT_EQ(cuda_skip_reason("cudaGetDeviceCount found no CUDA device"), "no CUDA device");
    EXPECT_EQ(cuda_skip_reason("cudaSetDevice(0): cudaErrorDevicesUnavailable"),
              "no usable CUDA device: cudaSetDevice(0): cudaErrorDevicesUnavailable");
}

class CudaGpu : public ::testing::Test {
protected:
    void SetUp() override {
        if (!accel.available()) GTEST_SKIP() << cuda_skip_reason(accel.unavailable_reason());
    }
    BufferAttrs cuda_attrs() const {
        BufferAttrs a;
        a.kind = BufKind::CUDA;
        a.kind_given = true;
        return a;
    }
    // Polls a completion for up to 10 s.
    static bool wait(Completion &c) {
        auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!c.test())
            if (std::chrono::steady_clock::now() > end) return false;
        return true;
    }
    static void CUDART_CB sleep_ms(void *ms) {
        std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<std::intptr_t>(ms)));
    }
    CudaAccel accel{AccelSettings{}};
};

TEST_F(CudaGpu, autodetection_tells_device_from_host_and_pinned_memory) {
    void *dev = nullptr, *pinned = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, 1 << 20), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(&pinned, 1 << 16), cudaSuccess);
    std::vector<char> host(1 << 16);
    int current = -1;
    cudaGetDevice(&current);
    int ordinal = -1;
    EXPECT_TRUE(accel.owns_pointer(static_cast<char *>(dev) + 100, &ordinal));
    EXPECT_EQ(ordinal, current);
    EXPECT_FALSE(accel.owns_pointer(host.data(), &ordinal));
    EXPECT_FALSE(accel.owns_pointer(pinned, &ordinal));
    // Pinned host memory tagged CUDA: success, treated as host.
    std::unique_ptr<DeviceBuffer> buf;
    std::string why;
    EXPECT_EQ(accel.capture(pinned, 1 << 16, cuda_attrs(), &buf, &why), MPI_SUCCESS) << why;
    EXPECT_EQ(buf, nullptr);
    // Repeated host lookups are answered without the driver.
    const std::string before = accel.counters();
    for (int i = 0; i < 1000; ++i) EXPECT_FALSE(accel.owns_pointer(host.data(), nullptr));
    EXPECT_EQ(accel.counters(), before);
    cudaFree(dev);
    cudaFreeHost(pinned);
}

TEST_F(CudaGpu, capture_rejects_bad_buffers_with_the_right_class) {
    void *dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, 1 << 20), cudaSuccess);
    std::vector<char> host(64);
    std::unique_ptr<DeviceBuffer> buf;
    std::string why;
    EXPECT_EQ(accel.capture(host.data(), 64, cuda_attrs(), &buf, &why), MPI_ERR_BUFFER);
    EXPECT_NE(why.find("not CUDA memory"), std::string::npos) << why;
    EXPECT_EQ(accel.capture(static_cast<char *>(dev) + 1000, 1 << 20, cuda_attrs(), &buf, &why), MPI_ERR_COUNT);
    EXPECT_NE(why.find("past the end"), std::string::npos) << why;
    BufferAttrs attrs = cuda_attrs();
    int count = 0;
    cudaGetDeviceCount(&count);
    attrs.device_given = true;
    attrs.device = reinterpret_cast<void *>(static_cast<std::intptr_t>(count));
    EXPECT_EQ(accel.capture(dev, 64, attrs, &buf, &why), MPI_ERR_ARG);
    EXPECT_NE(why.find("MPIX_ACC_DEVICE"), std::string::npos) << why;
    // Untagged (autodetected) host memory is fine.
    BufferAttrs detected;
    detected.kind = BufKind::CUDA;
    EXPECT_EQ(accel.capture(host.data(), 64, detected, &buf, &why), MPI_SUCCESS);
    EXPECT_EQ(buf, nullptr);
    // A freed allocation the cache knew.
    ASSERT_EQ(accel.capture(dev, 64, cuda_attrs(), &buf, &why), MPI_SUCCESS) << why;
    buf.reset();
    cudaFree(dev);
    EXPECT_EQ(accel.capture(dev, 64, cuda_attrs(), &buf, &why), MPI_ERR_BUFFER);
    EXPECT_NE(why.find("freed"), std::string::npos) << why;
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // our failed calls left no error behind
}

TEST_F(CudaGpu, stream_of_another_device_is_rejected) {
    int count = 0;
    cudaGetDeviceCount(&count);
    if (count < 2) GTEST_SKIP() << "needs two devices";
    int current = 0;
    cudaGetDevice(&current);
    void *dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, 4096), cudaSuccess);
    cudaSetDevice(1 - current);
    cudaStream_t other;
    ASSERT_EQ(cudaStreamCreate(&other), cudaSuccess);
    cudaSetDevice(current);
    BufferAttrs attrs = cuda_attrs();
    attrs.stream = other;
    std::unique_ptr<DeviceBuffer> buf;
    std::string why;
    EXPECT_EQ(accel.capture(dev, 4096, attrs, &buf, &why), MPI_ERR_ARG);
    EXPECT_NE(why.find("MPIX_ACC_STREAM"), std::string::npos) << why;
    cudaStreamDestroy(other);
    cudaFree(dev);
}

TEST_F(CudaGpu, copies_round_trip_through_the_staging_pool) {
    const std::size_t n = 1 << 20;
    void *dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, n), cudaSuccess);
    std::unique_ptr<DeviceBuffer> buf;
    std::string why;
    ASSERT_EQ(accel.capture(dev, n, cuda_attrs(), &buf, &why), MPI_SUCCESS) << why;
    ASSERT_NE(buf, nullptr);
    EXPECT_EQ(buf->capacity(), n);
    PinnedPool *pool = buf->staging_pool();
    ASSERT_NE(pool, nullptr);
    auto *slot = static_cast<unsigned char *>(pool->acquire());
    ASSERT_NE(slot, nullptr) << pool->last_error();
    const std::size_t chunk = std::min(pool->slot_size(), n);
    for (std::size_t i = 0; i < chunk; ++i) slot[i] = static_cast<unsigned char>(i * 31 + 7);
    std::unique_ptr<Completion> done;
    ASSERT_EQ(buf->copy_from_host(4096, slot, chunk - 4096, &done, &why), MPI_SUCCESS) << why;
    ASSERT_TRUE(wait(*done));
    EXPECT_EQ(done->error(), MPI_SUCCESS);
    std::vector<unsigned char> back(chunk - 4096);  // pageable destination
    ASSERT_EQ(buf->copy_to_host(4096, back.data(), back.size(), &done, &why), MPI_SUCCESS) << why;
    ASSERT_TRUE(wait(*done));
    EXPECT_EQ(std::memcmp(back.data(), slot, back.size()), 0);
    EXPECT_NE(buf->copy_to_host(n - 10, back.data(), 11, &done, &why), MPI_SUCCESS);  // out of bounds
    pool->release(slot);
    EXPECT_NE(accel.counters().find("cuda.pinned.alloc="), std::string::npos);
    buf.reset();
    cudaFree(dev);
}

// A copy that a blocking call waits for at once (CopyUse::WAITED_AT_ONCE) has no event
// behind it: wait_bounded synchronizes the stream, test() asks the stream. One with a
// captured dependency keeps its event, and wait_bounded still does not wait for the user.
TEST_F(CudaGpu, copy_waited_at_once_goes_without_an_event_unless_it_has_a_dependency) {
    const std::size_t n = 4096;
    void *dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, 2 * n), cudaSuccess);
    ASSERT_EQ(cudaMemset(dev, 0x3C, 2 * n), cudaSuccess);
    std::unique_ptr<DeviceBuffer> buf;
    std::string why;
    ASSERT_EQ(accel.capture(dev, n, cuda_attrs(), &buf, &why), MPI_SUCCESS) << why;
    PinnedPool *pool = buf->staging_pool();
    auto *slot = static_cast<unsigned char *>(pool->acquire());
    ASSERT_NE(slot, nullptr) << pool->last_error();
    auto waited_at_once = [] { return mpiacc_counter_value("cuda.copy.waited_at_once"); };

    // Waited for: the stream ends it.
    long long before = waited_at_once();
    std::unique_ptr<Completion> done;
    ASSERT_EQ(buf->copy_to_host(0, slot, n, &done, &why, CopyUse::WAITED_AT_ONCE), MPI_SUCCESS) << why;
    EXPECT_EQ(waited_at_once(), before + 1);
    done->wait_bounded();
    EXPECT_TRUE(done->test());
    EXPECT_EQ(done->error(), MPI_SUCCESS);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(slot[i], 0x3C) << i;

    // Polled after all: test() gets there by the stream.
    for (std::size_t i = 0; i < n; ++i) slot[i] = static_cast<unsigned char>(i * 13 + 1);
    ASSERT_EQ(buf->copy_from_host(0, slot, n, &done, &why, CopyUse::WAITED_AT_ONCE), MPI_SUCCESS) << why;
    ASSERT_TRUE(wait(*done));
    EXPECT_EQ(done->error(), MPI_SUCCESS);
    std::vector<unsigned char> back(n);
    ASSERT_EQ(cudaMemcpy(back.data(), dev, n, cudaMemcpyDeviceToHost), cudaSuccess);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], static_cast<unsigned char>(i * 13 + 1)) << i;

    // A dependency on the user's stream: the copy keeps its event and wait_bounded returns
    // while the user's work still runs.
    cudaStream_t user;
    ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaLaunchHostFunc(user, sleep_ms, reinterpret_cast<void *>(300)), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(static_cast<char *>(dev) + n, 0x5A, n, user), cudaSuccess);
    BufferAttrs attrs = cuda_attrs();
    attrs.stream = user;
    std::unique_ptr<DeviceBuffer> dependent;
    ASSERT_EQ(accel.capture(static_cast<char *>(dev) + n, n, attrs, &dependent, &why), MPI_SUCCESS) << why;
    before = waited_at_once();
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(dependent->copy_to_host(0, slot, n, &done, &why, CopyUse::WAITED_AT_ONCE), MPI_SUCCESS) << why;
    EXPECT_EQ(waited_at_once(), before);
    done->wait_bounded();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
    ASSERT_TRUE(wait(*done));
    EXPECT_EQ(done->error(), MPI_SUCCESS);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(slot[i], 0x5A) << i;

    pool->release(slot);
    dependent.reset();
    buf.reset();
    cudaStreamSynchronize(user);
    cudaStreamDestroy(user);
    cudaFree(dev);
}

TEST_F(CudaGpu, stream_dependency_is_captured_at_call_time) {
    const std::size_t n = 1 << 16;
    void *dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, n), cudaSuccess);
    ASSERT_EQ(cudaMemset(dev, 0, n), cudaSuccess);
    cudaStream_t user;
    ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
    // The user's stream: 300 ms of work, then the data.
    ASSERT_EQ(cudaLaunchHostFunc(user, sleep_ms, reinterpret_cast<void *>(300)), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(dev, 0x5A, n, user), cudaSuccess);
    BufferAttrs attrs = cuda_attrs();
    attrs.stream = user;
    std::unique_ptr<DeviceBuffer> buf;
    std::string why;
    ASSERT_EQ(accel.capture(dev, n, attrs, &buf, &why), MPI_SUCCESS) << why;
    // Work the user adds later is not waited for.
    ASSERT_EQ(cudaLaunchHostFunc(user, sleep_ms, reinterpret_cast<void *>(3000)), cudaSuccess);
    auto dep = buf->dependency();
    ASSERT_NE(dep, nullptr);
    EXPECT_FALSE(dep->test());
    std::vector<unsigned char> host(n);  // pageable: the copy must still not block
    std::unique_ptr<Completion> done;
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(buf->copy_to_host(0, host.data(), n, &done, &why), MPI_SUCCESS) << why;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
    ASSERT_TRUE(wait(*done));
    auto elapsed = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(elapsed, std::chrono::milliseconds(2500));  // did not wait for the later 3 s
    EXPECT_TRUE(dep->test());
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(host[i], 0x5A) << i;
    buf.reset();
    cudaStreamSynchronize(user);
    cudaStreamDestroy(user);
    cudaFree(dev);
}

// copies_wait_for_user_work() is true exactly when the capture recorded a dependency on
// the user's work (MPIX_ACC_STREAM, MPIX_ACC_EVENT or both); the copies deliver the bytes
// either way.
TEST_F(CudaGpu, copies_wait_for_user_work_exactly_when_a_stream_or_event_was_given) {
    const std::size_t n = 4096;
    void *dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, n), cudaSuccess);
    cudaStream_t user;
    ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(dev, 0x21, n, user), cudaSuccess);
    cudaEvent_t ready;
    ASSERT_EQ(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(ready, user), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(user), cudaSuccess);
    const struct { bool stream, event; } cases[] = {{false, false}, {true, false}, {false, true}, {true, true}};
    for (const auto &c : cases) {
        BufferAttrs attrs = cuda_attrs();
        if (c.stream) attrs.stream = user;
        if (c.event) attrs.event = ready;
        std::unique_ptr<DeviceBuffer> buf;
        std::string why;
        ASSERT_EQ(accel.capture(dev, n, attrs, &buf, &why), MPI_SUCCESS) << why;
        ASSERT_NE(buf, nullptr);
        EXPECT_EQ(buf->copies_wait_for_user_work(), c.stream || c.event)
            << "stream " << c.stream << ", event " << c.event;
        std::vector<unsigned char> host(n, 0);
        std::unique_ptr<Completion> done;
        ASSERT_EQ(buf->copy_to_host(0, host.data(), n, &done, &why), MPI_SUCCESS) << why;
        ASSERT_TRUE(wait(*done));
        EXPECT_EQ(done->error(), MPI_SUCCESS) << done->what();
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(host[i], 0x21) << i;
    }
    cudaEventDestroy(ready);
    cudaStreamDestroy(user);
    cudaFree(dev);
}

TEST_F(CudaGpu, event_dependency_survives_a_later_re_record) {
    const std::size_t n = 1 << 16;
    void *dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, n), cudaSuccess);
    ASSERT_EQ(cudaMemset(dev, 0, n), cudaSuccess);
    cudaStream_t user, idle;
    ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking), cudaSuccess);
    cudaEvent_t ev;
    ASSERT_EQ(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
    ASSERT_EQ(cudaLaunchHostFunc(user, sleep_ms, reinterpret_cast<void *>(300)), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(dev, 0x3C, n, user), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(ev, user), cudaSuccess);
    BufferAttrs attrs = cuda_attrs();
    attrs.event = ev;
    std::unique_ptr<DeviceBuffer> buf;
    std::string why;
    ASSERT_EQ(accel.capture(dev, n, attrs, &buf, &why), MPI_SUCCESS) << why;
    ASSERT_EQ(cudaEventRecord(ev, idle), cudaSuccess);  // re-recorded: now complete at once
    std::unique_ptr<Completion> done;
    auto *pinned = static_cast<unsigned char *>(buf->staging_pool()->acquire());
    ASSERT_NE(pinned, nullptr);
    ASSERT_EQ(buf->copy_to_host(0, pinned, std::min<std::size_t>(n, buf->staging_pool()->slot_size()), &done, &why),
              MPI_SUCCESS);
    ASSERT_TRUE(wait(*done));
    for (std::size_t i = 0; i < std::min<std::size_t>(n, buf->staging_pool()->slot_size()); ++i)
        ASSERT_EQ(pinned[i], 0x3C) << i;
    buf->staging_pool()->release(pinned);
    buf.reset();
    cudaStreamSynchronize(user);
    cudaEventDestroy(ev);
    cudaStreamDestroy(user);
    cudaStreamDestroy(idle);
    cudaFree(dev);
}

TEST_F(CudaGpu, device_to_device_copy_between_captured_buffers) {
    const std::size_t n = 1 << 20;
    void *a = nullptr, *b = nullptr;
    ASSERT_EQ(cudaMalloc(&a, n), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&b, n), cudaSuccess);
    ASSERT_EQ(cudaMemset(a, 0x11, n), cudaSuccess);
    ASSERT_EQ(cudaMemset(b, 0, n), cudaSuccess);
    std::unique_ptr<DeviceBuffer> src, dst;
    std::string why;
    ASSERT_EQ(accel.capture(a, n, cuda_attrs(), &src, &why), MPI_SUCCESS) << why;
    ASSERT_EQ(accel.capture(b, n, cuda_attrs(), &dst, &why), MPI_SUCCESS) << why;
    std::unique_ptr<Completion> done;
    ASSERT_EQ(src->copy_to_device(0, *dst, 512, n - 512, &done, &why), MPI_SUCCESS) << why;
    ASSERT_TRUE(wait(*done));
    std::vector<unsigned char> host(n);
    ASSERT_EQ(cudaMemcpy(host.data(), b, n, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(host[511], 0);
    EXPECT_EQ(host[512], 0x11);
    EXPECT_EQ(host[n - 1], 0x11);
    src.reset();
    dst.reset();
    cudaFree(a);
    cudaFree(b);
}

TEST_F(CudaGpu, managed_memory_is_cuda_but_not_exportable) {
    void *m = nullptr;
    ASSERT_EQ(cudaMallocManaged(&m, 1 << 16), cudaSuccess);
    EXPECT_TRUE(accel.owns_pointer(m, nullptr));
    std::unique_ptr<DeviceBuffer> buf;
    std::string why;
    ASSERT_EQ(accel.capture(m, 1 << 16, cuda_attrs(), &buf, &why), MPI_SUCCESS) << why;
    ASSERT_NE(buf, nullptr);
    IpcExport e;
    EXPECT_FALSE(buf->ipc_export(&e));
    buf.reset();
    cudaFree(m);
}

// A send offered for an IPC pull (BufferAttrs::ipc_offer) captures its stream dependency as
// an interprocess event and exports that very event: the export makes no event of its own
// (a buffer captured without the offer does), and the dependency still ends with the work
// captured, not with work the user adds later.
TEST_F(CudaGpu, send_offered_for_a_pull_exports_its_captured_event_itself) {
    const std::size_t n = 1 << 16;
    void *dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, 2 * n), cudaSuccess);
    ASSERT_EQ(cudaMemset(dev, 0, 2 * n), cudaSuccess);
    cudaStream_t user;
    ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaLaunchHostFunc(user, sleep_ms, reinterpret_cast<void *>(300)), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(dev, 0x5A, 2 * n, user), cudaSuccess);
    BufferAttrs attrs = cuda_attrs();
    attrs.stream = user;
    attrs.ipc_offer = true;
    std::unique_ptr<DeviceBuffer> offered, plain;
    std::string why;
    ASSERT_EQ(accel.capture(dev, n, attrs, &offered, &why), MPI_SUCCESS) << why;
    attrs.ipc_offer = false;
    ASSERT_EQ(accel.capture(static_cast<char *>(dev) + n, n, attrs, &plain, &why), MPI_SUCCESS) << why;
    ASSERT_EQ(cudaLaunchHostFunc(user, sleep_ms, reinterpret_cast<void *>(3000)), cudaSuccess);

    // This accel's event pools are new: an export that needed an event would create one.
    const long long before = mpiacc_counter_value("cuda.event.created");
    IpcExport e, again, other;
    ASSERT_TRUE(offered->ipc_export(&e));
    EXPECT_EQ(e.has_event, 1u);
    EXPECT_EQ(mpiacc_counter_value("cuda.event.created"), before);
    ASSERT_TRUE(offered->ipc_export(&again));
    EXPECT_EQ(std::memcmp(e.event_handle, again.event_handle, sizeof e.event_handle), 0);
    ASSERT_TRUE(plain->ipc_export(&other));
    EXPECT_EQ(other.has_event, 1u);
    EXPECT_EQ(mpiacc_counter_value("cuda.event.created"), before + 1);

    auto dep = offered->dependency();
    ASSERT_NE(dep, nullptr);
    EXPECT_FALSE(dep->test());
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(wait(*dep));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));  // not the later 3 s
    offered.reset();
    plain.reset();
    cudaStreamSynchronize(user);
    cudaStreamDestroy(user);
    cudaFree(dev);
}

// The exporting side of ipc_import_reads_a_peer_allocation, run as a child process: prints
// two exports of one allocation, then waits for the parent's "done" on stdin.
TEST_F(CudaGpu, DISABLED_ipc_child) {
    int count = 0;
    cudaGetDeviceCount(&count);
    if (count >= 2) cudaSetDevice(1);  // the parent then maps a peer device's memory
    const std::size_t n = 1 << 20;
    void *dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, n), cudaSuccess);
    cudaStream_t user;
    ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(dev, 0xC3, n, user), cudaSuccess);
    BufferAttrs attrs = cuda_attrs();
    attrs.stream = user;
    std::unique_ptr<DeviceBuffer> whole, tail;
    std::string why;
    ASSERT_EQ(accel.capture(dev, n, attrs, &whole, &why), MPI_SUCCESS) << why;
    ASSERT_EQ(accel.capture(static_cast<char *>(dev) + 4096, n - 4096, attrs, &tail, &why), MPI_SUCCESS) << why;
    for (DeviceBuffer *b : {whole.get(), tail.get()}) {
        IpcExport e;
        ASSERT_TRUE(b->ipc_export(&e));
        std::string hex = "IPC-EXPORT ";
        const auto *p = reinterpret_cast<const unsigned char *>(&e);
        for (std::size_t i = 0; i < sizeof e; ++i) hex += format("%02x", p[i]);
        std::printf("%s\n", hex.c_str());
    }
    std::fflush(stdout);
    char line[64];
    while (std::fgets(line, sizeof line, stdin) && std::strncmp(line, "done", 4) != 0) {
    }
    whole.reset();
    tail.reset();
    cudaStreamDestroy(user);
    cudaFree(dev);
}

TEST_F(CudaGpu, ipc_import_reads_a_peer_allocation) {
    int to_child[2], from_child[2];
    ASSERT_EQ(pipe(to_child), 0);
    ASSERT_EQ(pipe(from_child), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
    posix_spawn_file_actions_addclose(&fa, to_child[1]);
    posix_spawn_file_actions_addclose(&fa, from_child[0]);
    std::string self = "/proc/self/exe";
    std::string filter = "--gtest_filter=CudaGpu.DISABLED_ipc_child";
    std::string disabled = "--gtest_also_run_disabled_tests";
    char *argv[] = {&self[0], &filter[0], &disabled[0], nullptr};
    pid_t child = -1;
    ASSERT_EQ(posix_spawn(&child, "/proc/self/exe", &fa, nullptr, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(to_child[0]);
    close(from_child[1]);

    std::vector<IpcExport> exports;
    std::string pending;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (exports.size() < 2 && std::chrono::steady_clock::now() < deadline) {
        pollfd p{from_child[0], POLLIN, 0};
        if (poll(&p, 1, 1000) <= 0) continue;
        char chunk[4096];
        ssize_t got = read(from_child[0], chunk, sizeof chunk);
        if (got <= 0) break;
        pending.append(chunk, static_cast<std::size_t>(got));
        std::size_t nl;
        while ((nl = pending.find('\n')) != std::string::npos) {
            std::string line = pending.substr(0, nl);
            pending.erase(0, nl + 1);
            const std::string tag = "IPC-EXPORT ";
            if (line.compare(0, tag.size(), tag) != 0 || line.size() != tag.size() + 2 * sizeof(IpcExport)) continue;
            IpcExport e;
            auto *bytes = reinterpret_cast<unsigned char *>(&e);
            for (std::size_t i = 0; i < sizeof e; ++i)
                bytes[i] = static_cast<unsigned char>(std::stoul(line.substr(tag.size() + 2 * i, 2), nullptr, 16));
            exports.push_back(e);
        }
    }
    auto finish_child = [&] {
        if (write(to_child[1], "done\n", 5) != 5) kill(child, SIGTERM);
        close(to_child[1]);
        char sink[4096];  // drain to EOF: the child still prints its test summary
        while (read(from_child[0], sink, sizeof sink) > 0) {
        }
        close(from_child[0]);
        int status = 0;
        waitpid(child, &status, 0);
        return status;
    };
    if (exports.size() != 2) {
        finish_child();
        FAIL() << "the child printed " << exports.size() << " exports";
    }
    EXPECT_EQ(exports[0].offset, 0u);
    EXPECT_EQ(exports[1].offset, 4096u);
    EXPECT_EQ(exports[0].buffer_id, exports[1].buffer_id);
    EXPECT_EQ(exports[0].has_event, 1u);
    EXPECT_EQ(std::memcmp(exports[0].mem_handle, exports[1].mem_handle, sizeof exports[0].mem_handle), 0);

    const std::size_t n = 1 << 20;
    std::unique_ptr<DeviceBuffer> remote;
    std::string why;
    ASSERT_EQ(accel.ipc_import(exports[0], n, -1, &remote, &why), MPI_SUCCESS) << why;
    ASSERT_NE(remote->dependency(), nullptr);
    std::vector<unsigned char> host(n);
    std::unique_ptr<Completion> done;
    ASSERT_EQ(remote->copy_to_host(0, host.data(), n, &done, &why), MPI_SUCCESS) << why;
    ASSERT_TRUE(wait(*done));
    EXPECT_EQ(done->error(), MPI_SUCCESS);
    EXPECT_EQ(host[0], 0xC3);
    EXPECT_EQ(host[n - 1], 0xC3);

    void *local = nullptr;
    ASSERT_EQ(cudaMalloc(&local, n), cudaSuccess);
    ASSERT_EQ(cudaMemset(local, 0, n), cudaSuccess);
    std::unique_ptr<DeviceBuffer> mine, remote_tail;
    ASSERT_EQ(accel.capture(local, n, cuda_attrs(), &mine, &why), MPI_SUCCESS) << why;
    const std::string counters_before = accel.counters();
    ASSERT_EQ(accel.ipc_import(exports[1], n - 4096, -1, &remote_tail, &why), MPI_SUCCESS) << why;
    ASSERT_EQ(remote_tail->copy_to_device(0, *mine, 4096, n - 4096, &done, &why), MPI_SUCCESS) << why;
    ASSERT_TRUE(wait(*done));
    ASSERT_EQ(cudaMemcpy(host.data(), local, n, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(host[4095], 0);
    EXPECT_EQ(host[4096], 0xC3);
    EXPECT_EQ(host[n - 1], 0xC3);
    const std::string counters_after = accel.counters();
    auto value = [](const std::string &text, const std::string &name) {
        auto at = text.find(name + "=");
        return at == std::string::npos ? -1 : std::stoll(text.substr(at + name.size() + 1));
    };
    EXPECT_EQ(value(counters_after, "cuda.ipc.open"), value(counters_before, "cuda.ipc.open"));  // cached mapping
    EXPECT_EQ(value(counters_after, "cuda.ipc.hit"), value(counters_before, "cuda.ipc.hit") + 1);

    remote.reset();
    remote_tail.reset();
    mine.reset();
    accel.shutdown();  // closes the mapping before the child frees its memory
    int status = finish_child();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    cudaFree(local);
}

}  // namespace
}  // namespace mpiacc
