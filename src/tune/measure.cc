#include "tune/measure.h"

#include "config.h"

#include <hwloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

#include "accel/accel.h"
#include "core/context.h"

#ifdef MPIACC_HAVE_OPENCL
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>
#endif

namespace mpiacc {
namespace tune {

double now_seconds() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

std::vector<std::size_t> sizes_of(const Options &o) {
    std::vector<std::size_t> out;
    for (std::size_t s = o.min_size; s <= o.max_size; s *= 2) out.push_back(s);
    return out;
}

namespace {

// The machine's NUMA nodes, and the calling thread's CPUs and memory bound to one of
// them: staging from the wrong socket cost up to 49% of the bandwidth (BRIEF P5).
class Topology {
public:
    Topology() {
        if (hwloc_topology_init(&topo_) != 0 || hwloc_topology_load(topo_) != 0) topo_ = nullptr;
    }
    ~Topology() {
        if (topo_) hwloc_topology_destroy(topo_);
    }
    Topology(const Topology &) = delete;
    Topology &operator=(const Topology &) = delete;
    int nodes() const { return topo_ ? hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_NUMANODE) : 0; }
    // Binds this thread to node `index` (its CPUs, where it has any, and its memory).
    bool bind(int index, std::string *why) {
        hwloc_obj_t node = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(index));
        if (!node) {
            *why = "no NUMA node " + std::to_string(index);
            return false;
        }
        if (!hwloc_bitmap_iszero(node->cpuset) && hwloc_set_cpubind(topo_, node->cpuset, HWLOC_CPUBIND_THREAD) != 0) {
            *why = "binding the thread to NUMA node " + std::to_string(index) + "'s CPUs failed";
            return false;
        }
        if (hwloc_set_membind(topo_, node->nodeset, HWLOC_MEMBIND_BIND,
                              HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) != 0) {
            *why = "binding the thread's memory to NUMA node " + std::to_string(index) + " failed";
            return false;
        }
        return true;
    }

private:
    hwloc_topology_t topo_ = nullptr;
};

// Host memory, placed by the thread's binding when first touched.
struct HostBuffer {
    explicit HostBuffer(std::size_t bytes) : bytes(bytes), data(new char[bytes]) { std::memset(data.get(), 1, bytes); }
    std::size_t bytes;
    std::unique_ptr<char[]> data;
};

// One device buffer of a kind, captured whole, with what made it.
struct DeviceSide {
    std::string device;
    std::unique_ptr<DeviceBuffer> buffer;
    std::function<void()> release;  // after `buffer` is gone
    ~DeviceSide() {
        buffer.reset();
        if (release) release();
    }
};

bool open_cuda(Accel *accel, std::size_t bytes, DeviceSide *side, std::string *why) {
    void *p = accel->allocate_device_memory(0, bytes, why);
    if (!p) return false;
    side->release = [accel, p, bytes] { accel->free_device_memory(0, p, bytes); };
    const std::int32_t pci = accel->device_pci_location(0);
    char name[64];
    std::snprintf(name, sizeof name, "device 0, PCI %04x:%02x:%02x", pci >> 13, (pci >> 5) & 0xff, pci & 0x1f);
    side->device = pci >= 0 ? name : "device 0";
    BufferAttrs attrs;
    attrs.kind = BufKind::CUDA;
    attrs.kind_given = true;
    return accel->capture(p, bytes, attrs, &side->buffer, why) == MPI_SUCCESS;
}

#ifdef MPIACC_HAVE_OPENCL
// The platform MPIACC_OPENCL_PLATFORM picks (its first device), as the tests pick it.
bool open_opencl(Accel *accel, std::size_t bytes, DeviceSide *side, std::string *why) {
    cl_uint n = 0;
    cl_platform_id platforms[16];
    if (clGetPlatformIDs(16, platforms, &n) != CL_SUCCESS || n == 0) {
        *why = "no OpenCL platform";
        return false;
    }
    const std::string wanted = knobs().opencl_platform;
    for (cl_uint i = 0; i < std::min<cl_uint>(n, 16); ++i) {
        char name[256] = {0};
        clGetPlatformInfo(platforms[i], CL_PLATFORM_NAME, sizeof name - 1, name, nullptr);
        if (!wanted.empty() && !std::strstr(name, wanted.c_str())) continue;
        cl_device_id device = nullptr;
        if (clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_ALL, 1, &device, nullptr) != CL_SUCCESS) continue;
        char device_name[256] = {0};
        clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof device_name - 1, device_name, nullptr);
        side->device = std::string(name) + ": " + device_name;
        cl_int e = CL_SUCCESS;
        cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &e);
        if (e != CL_SUCCESS) break;
        cl_command_queue queue = clCreateCommandQueueWithProperties(context, device, nullptr, &e);
        cl_mem mem = e == CL_SUCCESS ? clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, nullptr, &e) : nullptr;
        side->release = [context, queue, mem] {
            if (mem) clReleaseMemObject(mem);
            if (queue) clReleaseCommandQueue(queue);
            clReleaseContext(context);
        };
        if (e != CL_SUCCESS) break;
        BufferAttrs attrs;
        attrs.kind = BufKind::OPENCL;
        attrs.kind_given = true;
        attrs.queue = queue;
        return accel->capture(mem, bytes, attrs, &side->buffer, why) == MPI_SUCCESS;
    }
    *why = "no OpenCL device" + (wanted.empty() ? std::string() : " on a platform matching \"" + wanted + "\"");
    return false;
}
#endif

// Issues one copy of `len` bytes; `done` stays null for a copy that ended in the call.
using IssueCopy = std::function<int(std::size_t len, std::unique_ptr<Completion> *done, std::string *why)>;

// The best seconds of one copy, from issue to a test() that saw it end, as a pipeline
// stage sees it. Negative on failure, with *why.
double time_copy(const Options &o, std::size_t len, const IssueCopy &issue, std::string *why) {
    double best = -1, spent = 0;
    std::size_t moved = 0;
    for (int rep = 0; rep < 1000; ++rep) {
        std::unique_ptr<Completion> done;
        const double t0 = now_seconds();
        if (issue(len, &done, why) != MPI_SUCCESS) return -1;
        while (done && !done->test()) {
        }
        const double t = now_seconds() - t0;
        if (done && done->error() != MPI_SUCCESS) {
            *why = "a copy failed: " + done->what();
            return -1;
        }
        if (rep > 0 && (best < 0 || t < best)) best = t;  // the first one warms up
        spent += t;
        moved += len;
        if (rep >= 3 && (moved >= o.bytes_per_point || spent >= o.seconds_per_point)) break;
    }
    return best;
}

// One test() of a copy that has ended: what every progress round pays per chunk in flight.
double time_query(std::size_t len, const IssueCopy &issue) {
    std::unique_ptr<Completion> done;
    std::string why;
    if (issue(len, &done, &why) != MPI_SUCCESS || !done) return 0;
    while (!done->test()) {
    }
    const int n = 2000;
    const double t0 = now_seconds();
    for (int i = 0; i < n; ++i) done->test();
    return (now_seconds() - t0) / n;
}

bool measure_curve(const Options &o, const IssueCopy &d2h, const IssueCopy &h2d, CopyCurve *curve, std::string *why) {
    for (std::size_t s : sizes_of(o)) {
        const double down = time_copy(o, s, d2h, why), up = time_copy(o, s, h2d, why);
        if (down < 0 || up < 0) return false;
        curve->d2h.push_back(down);
        curve->h2d.push_back(up);
    }
    return true;
}

}  // namespace

std::vector<CopyMeasurement> measure_copies(const Options &o, std::vector<std::string> *notes) {
    std::vector<CopyMeasurement> out;
    Topology topo;
    const int nodes = topo.nodes();
    struct Kind {
        BufKind kind;
        const char *name;
    };
    const Kind kinds[] = {{BufKind::CUDA, "cuda"}, {BufKind::OPENCL, "opencl"}, {BufKind::HOST, "host"}};
    for (const Kind &k : kinds) {
        Accel *accel = accel_for(k.kind);
        if (k.kind != BufKind::HOST && (!accel || !accel->available())) continue;
        for (int node = nodes > 0 ? 0 : -1; node < std::max(nodes, 0); ++node) {
            std::string why;
            if (node >= 0 && !topo.bind(node, &why)) {
                notes->push_back(std::string(k.name) + ": " + why + "; measured unbound");
            }
            CopyMeasurement m;
            m.kind = k.name;
            m.numa_node = node;
            HostBuffer host(o.max_size);
            bool ok = true;
            if (k.kind == BufKind::HOST) {
                // Host-only: a staging copy is a memcpy between two buffers of the node,
                // walking through them so that a small copy does not stay in the cache.
                HostBuffer other(o.max_size);
                m.device = "host memory";
                std::size_t at = 0;
                IssueCopy copy = [&](std::size_t len, std::unique_ptr<Completion> *, std::string *) {
                    if (at + len > o.max_size) at = 0;
                    std::memcpy(other.data.get() + at, host.data.get() + at, len);
                    at += len;
                    return MPI_SUCCESS;
                };
                ok = measure_curve(o, copy, copy, &m.curve, &why);
            } else {
                DeviceSide side;
                ok = k.kind == BufKind::CUDA ? open_cuda(accel, o.max_size, &side, &why) : false;
#ifdef MPIACC_HAVE_OPENCL
                if (k.kind == BufKind::OPENCL) ok = open_opencl(accel, o.max_size, &side, &why);
#endif
                // Pinned memory as the staging pools have it: lent by the kind (OpenCL pins
                // per context), else the node's buffer page-locked.
                std::unique_ptr<HostScratch> scratch = ok ? side.buffer->acquire_host_scratch(o.max_size) : nullptr;
                const bool registered = ok && !scratch && accel->register_host(host.data.get(), o.max_size);
                char *staging = scratch ? scratch->data() : host.data.get();
                DeviceBuffer *dev = side.buffer.get();
                IssueCopy d2h = [&](std::size_t len, std::unique_ptr<Completion> *done, std::string *w) {
                    return dev->copy_to_host(0, staging, len, done, w);
                };
                IssueCopy h2d = [&](std::size_t len, std::unique_ptr<Completion> *done, std::string *w) {
                    return dev->copy_from_host(0, staging, len, done, w);
                };
                m.device = side.device;
                if (ok) ok = measure_curve(o, d2h, h2d, &m.curve, &why);
                if (ok) m.query_seconds = time_query(o.min_size, d2h);
                scratch.reset();
                if (registered) accel->unregister_host(host.data.get());
            }
            if (!ok) {
                notes->push_back(std::string(k.name) + " not measured: " + why);
                break;
            }
            out.push_back(std::move(m));
        }
    }
    return out;
}

NetMeasurement measure_net(const Options &o, MPI_Comm comm) {
    NetMeasurement net;
    int rank = 0, size = 1;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    if (size < 2 || rank > 1) return net;
    const int peer = 1 - rank;
    std::vector<char> buf(o.max_size, 1);
    // Both ranks run the same repetitions: a count from the size alone, never a clock.
    auto one_way = [&](std::size_t len) {
        const std::size_t reps = std::clamp<std::size_t>(o.bytes_per_point / len, 3, 200);
        double best = -1;
        for (std::size_t r = 0; r <= reps; ++r) {
            const double t0 = now_seconds();
            if (rank == 0) {
                PMPI_Send(buf.data(), static_cast<int>(len), MPI_BYTE, peer, 0, comm);
                PMPI_Recv(buf.data(), static_cast<int>(len), MPI_BYTE, peer, 0, comm, MPI_STATUS_IGNORE);
            } else {
                PMPI_Recv(buf.data(), static_cast<int>(len), MPI_BYTE, peer, 0, comm, MPI_STATUS_IGNORE);
                PMPI_Send(buf.data(), static_cast<int>(len), MPI_BYTE, peer, 0, comm);
            }
            const double t = (now_seconds() - t0) / 2;
            if (r > 0 && (best < 0 || t < best)) best = t;
        }
        return best;
    };
    net.small_seconds = one_way(8);
    for (std::size_t s : sizes_of(o)) net.seconds.push_back(one_way(s));
    return net;
}

}  // namespace tune
}  // namespace mpiacc
