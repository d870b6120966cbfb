// NCCL loaded with dlopen, its communicators cached on MPI communicators, and the
// collectives MPI-ACC hands it. Built with CUDA only (nccl_absent.cc otherwise).
#include "coll/nccl.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "accel/cuda/cuda_quiet.h"
#include "coll/issue_order.h"
#include "core/context.h"
#include "util/error.h"

namespace mpiacc {

namespace {

// The part of NCCL's ABI used here, declared here so that the build needs no nccl.h:
// from nccl.h of NCCL 2.28.9, unchanged since 2.7 (which added ncclSend and ncclRecv).
// ncclResult_t, ncclDataType_t and ncclRedOp_t are int-sized enums, passed as int.
struct NcclOpaque;                // struct ncclComm
using NcclHandle = NcclOpaque *;  // ncclComm_t
struct NcclUniqueId {             // ncclUniqueId
    char internal[128];
};
using NcclResult = int;
constexpr NcclResult kNcclSuccess = 0, kNcclInvalidArgument = 4, kNcclInvalidUsage = 5;

struct NcclApi {
    NcclResult (*get_version)(int *) = nullptr;
    NcclResult (*get_unique_id)(NcclUniqueId *) = nullptr;
    NcclResult (*comm_init_rank)(NcclHandle *, int, NcclUniqueId, int) = nullptr;
    NcclResult (*comm_destroy)(NcclHandle) = nullptr;
    NcclResult (*comm_abort)(NcclHandle) = nullptr;
    const char *(*get_error_string)(NcclResult) = nullptr;
    const char *(*get_last_error)(NcclHandle) = nullptr;  // NCCL 2.13 and later; may stay null
    NcclResult (*all_reduce)(const void *, void *, std::size_t, int, int, NcclHandle, cudaStream_t) = nullptr;
    NcclResult (*broadcast)(const void *, void *, std::size_t, int, int, NcclHandle, cudaStream_t) = nullptr;
    NcclResult (*reduce)(const void *, void *, std::size_t, int, int, int, NcclHandle, cudaStream_t) = nullptr;
    NcclResult (*all_gather)(const void *, void *, std::size_t, int, NcclHandle, cudaStream_t) = nullptr;
    NcclResult (*reduce_scatter)(const void *, void *, std::size_t, int, int, NcclHandle, cudaStream_t) = nullptr;
    NcclResult (*send)(const void *, std::size_t, int, int, NcclHandle, cudaStream_t) = nullptr;
    NcclResult (*recv)(void *, std::size_t, int, int, NcclHandle, cudaStream_t) = nullptr;
    NcclResult (*group_start)() = nullptr;
    NcclResult (*group_end)() = nullptr;
};

template <class F>
bool resolve(void *lib, const char *name, F *fn) {
    void *p = dlsym(lib, name);
    *fn = reinterpret_cast<F>(p);
    return p != nullptr;
}

// "2.28.9" from NCCL's version code (X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after).
std::string version_text(int code) {
    if (code >= 10000) return format("%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
    return format("%d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
}

// libnccl.so.2 as loaded once per process; never unloaded (NCCL keeps threads and
// handlers of its own while any communicator lives).
struct Library {
    void *handle = nullptr;
    NcclApi api;
    int version = 0;
    std::string why;  // why it is not loaded
};

Library load_library() {
    Library lib;
    if (!knobs().test_nccl) {
        lib.why = "MPIACC_TEST_NCCL=0: NCCL is never loaded";
        return lib;
    }
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        lib.why = format("libnccl.so.2 not found (%s)", e ? e : "dlopen failed");
        return lib;
    }
    NcclApi &a = lib.api;
    const char *missing = nullptr;
    const auto need = [&](const char *name, auto *fn) {
        if (!resolve(h, name, fn) && !missing) missing = name;
    };
    need("ncclGetVersion", &a.get_version);
    need("ncclGetUniqueId", &a.get_unique_id);
    need("ncclCommInitRank", &a.comm_init_rank);
    need("ncclCommDestroy", &a.comm_destroy);
    need("ncclCommAbort", &a.comm_abort);
    need("ncclGetErrorString", &a.get_error_string);
    need("ncclAllReduce", &a.all_reduce);
    need("ncclBroadcast", &a.broadcast);
    need("ncclReduce", &a.reduce);
    need("ncclAllGather", &a.all_gather);
    need("ncclReduceScatter", &a.reduce_scatter);
    need("ncclSend", &a.send);
    need("ncclRecv", &a.recv);
    need("ncclGroupStart", &a.group_start);
    need("ncclGroupEnd", &a.group_end);
    resolve(h, "ncclGetLastError", &a.get_last_error);
    int version = 0;
    if (missing)
        lib.why = format("libnccl.so.2 has no %s (NCCL 2.7 or later is needed)", missing);
    else if (a.get_version(&version) != kNcclSuccess)
        lib.why = "ncclGetVersion failed";
    if (!lib.why.empty()) {
        dlclose(h);
        lib.api = NcclApi{};
        return lib;
    }
    lib.handle = h;
    lib.version = version;
    return lib;
}

const Library &library() {
    static const Library lib = load_library();  // once, thread-safe
    return lib;
}

// "ncclAllReduce: invalid argument (NCCL error 4): NCCL's last error text", and the MPI
// class it maps to.
int nccl_error(const char *fn, NcclResult r, NcclHandle h, std::string *why) {
    const NcclApi &a = library().api;
    const char *text = a.get_error_string ? a.get_error_string(r) : nullptr;
    const char *last = a.get_last_error ? a.get_last_error(h) : nullptr;  // its argument is unused: null is fine
    *why = format("%s: %s (NCCL error %d)", fn, text ? text : "failed", r);
    if (last && *last) *why += format(": %s", last);
    return r == kNcclInvalidArgument || r == kNcclInvalidUsage ? MPI_ERR_ARG : MPI_ERR_OTHER;
}

}  // namespace

class NcclComm {
public:
    NcclComm(NcclHandle handle, int size, int rank, int device)
        : handle_(handle), size_(size), rank_(rank), device_(device) {}
    ~NcclComm() {
        if (stream_) quiet(cudaStreamDestroy(stream_));
        if (handle_) library().api.comm_destroy(handle_);
    }
    NcclComm(const NcclComm &) = delete;
    NcclComm &operator=(const NcclComm &) = delete;

    NcclHandle handle() const { return handle_; }
    int size() const { return size_; }
    int rank() const { return rank_; }
    int device() const { return device_; }
    // The stream its collectives run on, made on first use. A blocking stream: it waits
    // for the legacy default stream, as the CUDA-aware convention expects.
    cudaStream_t stream(cudaError_t *e) {
        std::lock_guard<std::mutex> lock(stream_mutex_);
        *e = stream_ ? cudaSuccess : quiet(cudaStreamCreate(&stream_));
        return stream_;
    }

private:
    NcclHandle handle_;
    int size_, rank_, device_;
    std::mutex stream_mutex_;
    cudaStream_t stream_ = nullptr;
};

namespace {

// One MPI communicator's answer: its NCCL communicator, or why it has none.
struct CacheEntry {
    std::unique_ptr<NcclComm> comm;
    std::string refusal;
};

// Every answer given, each also an attribute of its MPI communicator. MPI_Comm_free
// (the attribute's delete callback) destroys one; MPI_Finalize deletes MPI_COMM_SELF's
// attributes first, and the one set there destroys those still alive, before MPICH
// takes the other communicators apart.
struct Cache {
    std::mutex mutex;
    std::atomic<int> keyval{MPI_KEYVAL_INVALID};
    int finalize_keyval = MPI_KEYVAL_INVALID;
    std::vector<std::unique_ptr<CacheEntry>> entries;
};

Cache &cache() {
    static Cache *const c = new Cache();  // lives for the process: atexit order must not matter
    return *c;
}

int delete_entry(MPI_Comm, int, void *value, void *) {
    Cache &c = cache();
    std::unique_ptr<CacheEntry> gone;
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        for (auto it = c.entries.begin(); it != c.entries.end(); ++it)
            if (it->get() == value) {
                gone = std::move(*it);
                c.entries.erase(it);
                break;
            }
    }
    return MPI_SUCCESS;  // `gone` destroys its NCCL communicator outside the lock
}

int destroy_all(MPI_Comm, int, void *, void *) {
    Cache &c = cache();
    std::vector<std::unique_ptr<CacheEntry>> gone;
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        gone.swap(c.entries);
        int kv = c.keyval.exchange(MPI_KEYVAL_INVALID);
        // Attributes still set on communicators call delete_entry later, which finds nothing.
        if (kv != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&kv);
        c.finalize_keyval = MPI_KEYVAL_INVALID;
    }
    for (auto &entry : gone) entry.reset();  // in creation order
    return MPI_SUCCESS;
}

// The cache keyval, made on first use together with the finalize hook on MPI_COMM_SELF.
int cache_keyval(std::string *why) {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    int kv = c.keyval.load();
    if (kv != MPI_KEYVAL_INVALID) return kv;
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_entry, &kv, nullptr) != MPI_SUCCESS ||
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, destroy_all, &c.finalize_keyval, nullptr) != MPI_SUCCESS ||
        PMPI_Comm_set_attr(MPI_COMM_SELF, c.finalize_keyval, nullptr) != MPI_SUCCESS) {
        *why = "could not create the attribute keyvals that cache NCCL communicators";
        return MPI_KEYVAL_INVALID;
    }
    c.keyval.store(kv);
    return kv;
}

// What each rank tells the others before an NCCL communicator is made.
struct RankRecord {
    std::uint64_t node = 0;  // context().node_id: equal ids, same host
    std::int32_t version = 0;
    std::int32_t usable = 0;  // NCCL loaded and a CUDA device current
    char bus[32] = {0};       // the current device's PCI bus id, "0000:41:00.0"
    char why[200] = {0};      // when not usable
};

void copy_text(char *dst, std::size_t n, const std::string &s) { std::snprintf(dst, n, "%s", s.c_str()); }

RankRecord local_record(int *device) {
    RankRecord r;
    r.node = context().node_id;
    std::string why;
    if (!nccl_available(&why)) {
        copy_text(r.why, sizeof r.why, why);
        return r;
    }
    r.version = library().version;
    cudaError_t e = quiet(cudaGetDevice(device));
    if (e == cudaSuccess) e = quiet(cudaDeviceGetPCIBusId(r.bus, sizeof r.bus, *device));
    if (e != cudaSuccess) {
        copy_text(r.why, sizeof r.why, format("no CUDA device (%s)", cudaGetErrorName(e)));
        r.bus[0] = 0;
        return r;
    }
    r.usable = 1;
    return r;
}

// Why these ranks cannot have an NCCL communicator, or "": the same on every rank, since
// every rank reads the same records.
std::string refusal_of(const std::vector<RankRecord> &all) {
    for (std::size_t i = 0; i < all.size(); ++i)
        if (!all[i].usable) return format("rank %zu: %s", i, all[i].why);
    for (std::size_t i = 1; i < all.size(); ++i)
        if (all[i].version != all[0].version)
            return format("ranks 0 and %zu load different NCCL versions (%s and %s)", i,
                          version_text(all[0].version).c_str(), version_text(all[i].version).c_str());
    // NCCL fails or aborts on two ranks of one communicator on one GPU.
    std::map<std::pair<std::uint64_t, std::string>, std::size_t> first_on;
    for (std::size_t i = 0; i < all.size(); ++i) {
        auto placed = first_on.emplace(std::make_pair(all[i].node, std::string(all[i].bus)), i);
        if (!placed.second)
            return format("ranks %zu and %zu share GPU %s: NCCL takes one rank per GPU", placed.first->second, i,
                          all[i].bus);
    }
    return "";
}

// Waits for MPICH's nonblocking collective `r` (when `rc` says it started) through
// MPI-ACC's own MPI_Wait: a rank waiting here still serves the transfers that other
// ranks' earlier calls need of it, which a blocking PMPI collective would stall.
int wait_for(int rc, MPI_Request *r) { return rc == MPI_SUCCESS ? MPI_Wait(r, MPI_STATUS_IGNORE) : rc; }

// Makes the NCCL communicator (every rank usable, on GPUs of their own). Null with *why,
// the same on every rank, when NCCL fails on any.
std::unique_ptr<NcclComm> create_comm(MPI_Comm comm, int rank, int size, int device, std::string *why) {
    const NcclApi &a = library().api;
    struct {
        std::int32_t ok;
        char why[200];
        NcclUniqueId id;
    } root{};
    if (rank == 0) {
        NcclResult r = a.get_unique_id(&root.id);
        root.ok = r == kNcclSuccess;
        if (!root.ok) {
            std::string text;
            nccl_error("ncclGetUniqueId on rank 0", r, nullptr, &text);
            copy_text(root.why, sizeof root.why, text);
        }
    }
    MPI_Request req;
    if (wait_for(PMPI_Ibcast(&root, sizeof root, MPI_BYTE, 0, comm, &req), &req) != MPI_SUCCESS) {
        *why = "PMPI_Ibcast of the NCCL unique id failed";
        return nullptr;
    }
    if (!root.ok) {
        *why = root.why;
        return nullptr;
    }
    NcclHandle handle = nullptr;
    NcclResult r = a.comm_init_rank(&handle, size, root.id, rank);
    std::string mine;
    int failed = r == kNcclSuccess ? size : rank, first_failed = size;
    if (r != kNcclSuccess) nccl_error("ncclCommInitRank", r, nullptr, &mine);
    if (wait_for(PMPI_Iallreduce(&failed, &first_failed, 1, MPI_INT, MPI_MIN, comm, &req), &req) != MPI_SUCCESS)
        first_failed = -1;
    if (first_failed == size) return std::make_unique<NcclComm>(handle, size, rank, device);
    // Another rank failed: this one's communicator may wait for it forever, so abort it.
    if (handle) a.comm_abort(handle);
    char text[200] = {0};
    if (first_failed >= 0) {
        if (rank == first_failed) copy_text(text, sizeof text, mine);
        wait_for(PMPI_Ibcast(text, sizeof text, MPI_CHAR, first_failed, comm, &req), &req);
        *why = format("rank %d: %s", first_failed, text);
    } else {
        *why = "PMPI_Iallreduce after ncclCommInitRank failed";
    }
    return nullptr;
}

}  // namespace

bool nccl_available(std::string *why) {
    const Library &lib = library();
    if (!lib.handle) *why = lib.why;
    return lib.handle != nullptr;
}

int nccl_version() { return library().version; }

std::string nccl_status() {
    const Library &lib = library();
    if (!lib.handle) return "not loaded: " + lib.why;
    return "loaded libnccl.so.2, version " + version_text(lib.version);
}

NcclComm *nccl_comm_for(MPI_Comm comm, std::string *why) {
    if (comm == MPI_COMM_NULL) {
        *why = "MPI_COMM_NULL has no NCCL communicator";
        return nullptr;
    }
    int keyval = cache_keyval(why);
    if (keyval == MPI_KEYVAL_INVALID) return nullptr;
    void *value = nullptr;
    int found = 0;
    if (PMPI_Comm_get_attr(comm, keyval, &value, &found) == MPI_SUCCESS && found) {
        auto *entry = static_cast<CacheEntry *>(value);
        if (!entry->comm) *why = entry->refusal;
        return entry->comm.get();
    }

    auto entry = std::make_unique<CacheEntry>();
    int inter = 0, rank = 0, size = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) {
        entry->refusal = "an intercommunicator: NCCL communicators have one group";
    } else {
        // A nonblocking collective still waiting for its inputs goes to MPICH first: MPICH
        // matches collectives in calling order.
        wait_for_queued_collectives(comm);
        PMPI_Comm_rank(comm, &rank);
        PMPI_Comm_size(comm, &size);
        int device = -1;
        const RankRecord mine = local_record(&device);
        std::vector<RankRecord> all(static_cast<std::size_t>(size));
        MPI_Request req;
        if (wait_for(PMPI_Iallgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm, &req),
                     &req) != MPI_SUCCESS) {
            *why = "PMPI_Iallgather of each rank's GPU failed";
            return nullptr;  // not cached: MPI itself is failing
        }
        entry->refusal = refusal_of(all);
        if (entry->refusal.empty()) entry->comm = create_comm(comm, rank, size, device, &entry->refusal);
    }
    if (knobs().verbose >= 1 && rank == 0)
        std::fprintf(stderr, "[mpiacc %d] NCCL for a communicator of %d ranks: %s\n", context().world_rank, size,
                     entry->comm ? "made" : ("refused: " + entry->refusal).c_str());

    CacheEntry *kept = entry.get();
    {
        Cache &c = cache();
        std::lock_guard<std::mutex> lock(c.mutex);
        c.entries.push_back(std::move(entry));
    }
    PMPI_Comm_set_attr(comm, keyval, kept);
    if (!kept->comm) *why = kept->refusal;
    return kept->comm.get();
}

int nccl_comm_size(const NcclComm *nc) { return nc ? nc->size() : 0; }
int nccl_comm_device(const NcclComm *nc) { return nc ? nc->device() : -1; }

// ---------------------------------------------------------------- the collectives

namespace {

cudaStream_t as_stream(void *stream) { return static_cast<cudaStream_t>(stream); }
int as_int(NcclType t) { return static_cast<int>(t); }
int as_int(NcclOp op) { return static_cast<int>(op); }
// Element `elements` of a buffer of NCCL type `t`.
template <class T>
T *at(T *base, std::size_t elements, NcclType t) {
    using Byte = typename std::conditional<std::is_const<T>::value, const char, char>::type;
    return reinterpret_cast<Byte *>(base) + elements * nccl_type_size(t);
}

}  // namespace

int nccl_run(NcclComm *nc, void *user_stream, const std::function<int(void *stream)> &enqueue, std::string *why) {
    cudaError_t e = cudaSuccess;
    cudaStream_t s = nc->stream(&e);
    const char *step = "cudaStreamCreate";
    cudaEvent_t after = nullptr;
    if (e == cudaSuccess && user_stream) {
        step = "ordering after the buffers' stream";
        e = quiet(cudaEventCreateWithFlags(&after, cudaEventDisableTiming));
        if (e == cudaSuccess) e = quiet(cudaEventRecord(after, as_stream(user_stream)));
        if (e == cudaSuccess) e = quiet(cudaStreamWaitEvent(s, after, 0));
        if (after) quiet(cudaEventDestroy(after));
    }
    if (e != cudaSuccess) {
        *why = format("%s: %s", step, cudaGetErrorString(e));
        return MPI_ERR_OTHER;
    }
    int rc = enqueue(s);
    e = quiet(cudaStreamSynchronize(s));
    if (rc == MPI_SUCCESS && e != cudaSuccess) {
        *why = format("an NCCL collective failed on the GPU: %s", cudaGetErrorString(e));
        rc = MPI_ERR_OTHER;
    }
    return rc;
}

int nccl_allreduce(NcclComm *nc, const void *sendbuf, void *recvbuf, std::size_t count, const NcclReduction &red,
                   void *stream, std::string *why) {
    const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    NcclResult r =
        library().api.all_reduce(in, recvbuf, count, as_int(red.type), as_int(red.op), nc->handle(), as_stream(stream));
    return r == kNcclSuccess ? MPI_SUCCESS : nccl_error("ncclAllReduce", r, nc->handle(), why);
}

int nccl_bcast(NcclComm *nc, void *buf, std::size_t count, NcclType type, int root, void *stream, std::string *why) {
    NcclResult r = library().api.broadcast(buf, buf, count, as_int(type), root, nc->handle(), as_stream(stream));
    return r == kNcclSuccess ? MPI_SUCCESS : nccl_error("ncclBroadcast", r, nc->handle(), why);
}

int nccl_reduce(NcclComm *nc, const void *sendbuf, void *recvbuf, std::size_t count, const NcclReduction &red, int root,
                void *stream, std::string *why) {
    if (sendbuf == MPI_IN_PLACE && nc->rank() != root) {
        *why = "sendbuf: MPI_IN_PLACE is for the root of MPI_Reduce only";
        return MPI_ERR_BUFFER;
    }
    const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    NcclResult r = library().api.reduce(in, recvbuf, count, as_int(red.type), as_int(red.op), root, nc->handle(),
                                        as_stream(stream));
    return r == kNcclSuccess ? MPI_SUCCESS : nccl_error("ncclReduce", r, nc->handle(), why);
}

int nccl_allgather(NcclComm *nc, const void *sendbuf, void *recvbuf, std::size_t sendcount, NcclType type, void *stream,
                   std::string *why) {
    // NCCL's in place: this rank's block read from its place in recvbuf.
    const void *in = sendbuf == MPI_IN_PLACE ? at(recvbuf, sendcount * nc->rank(), type) : sendbuf;
    NcclResult r = library().api.all_gather(in, recvbuf, sendcount, as_int(type), nc->handle(), as_stream(stream));
    return r == kNcclSuccess ? MPI_SUCCESS : nccl_error("ncclAllGather", r, nc->handle(), why);
}

int nccl_reduce_scatter_block(NcclComm *nc, const void *sendbuf, void *recvbuf, std::size_t recvcount,
                              const NcclReduction &red, void *stream, std::string *why) {
    const NcclApi &a = library().api;
    if (sendbuf != MPI_IN_PLACE) {
        NcclResult r = a.reduce_scatter(sendbuf, recvbuf, recvcount, as_int(red.type), as_int(red.op), nc->handle(),
                                        as_stream(stream));
        return r == kNcclSuccess ? MPI_SUCCESS : nccl_error("ncclReduceScatter", r, nc->handle(), why);
    }
    // NCCL's in place leaves the result in this rank's block; MPI's wants it at the start.
    void *block = at(recvbuf, recvcount * nc->rank(), red.type);
    NcclResult r =
        a.reduce_scatter(recvbuf, block, recvcount, as_int(red.type), as_int(red.op), nc->handle(), as_stream(stream));
    if (r != kNcclSuccess) return nccl_error("ncclReduceScatter", r, nc->handle(), why);
    if (nc->rank() == 0 || recvcount == 0) return MPI_SUCCESS;
    cudaError_t e = quiet(cudaMemcpyAsync(recvbuf, block, recvcount * nccl_type_size(red.type),
                                          cudaMemcpyDeviceToDevice, as_stream(stream)));
    if (e == cudaSuccess) return MPI_SUCCESS;
    *why = format("cudaMemcpyAsync of the in-place result to the start of recvbuf: %s", cudaGetErrorString(e));
    return MPI_ERR_OTHER;
}

int nccl_alltoall(NcclComm *nc, const void *sendbuf, void *recvbuf, std::size_t count, NcclType type, void *stream,
                  std::string *why) {
    if (sendbuf == MPI_IN_PLACE) {
        *why = "sendbuf: MPI_IN_PLACE alltoall is not served by NCCL";
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    const NcclApi &a = library().api;
    NcclResult r = a.group_start();
    if (r != kNcclSuccess) return nccl_error("ncclGroupStart", r, nc->handle(), why);
    const char *failed = nullptr;
    NcclResult first = kNcclSuccess;
    for (int peer = 0; peer < nc->size() && !failed; ++peer) {
        r = a.send(at(sendbuf, count * peer, type), count, as_int(type), peer, nc->handle(), as_stream(stream));
        if (r != kNcclSuccess) failed = "ncclSend", first = r;
        if (!failed) {
            r = a.recv(at(recvbuf, count * peer, type), count, as_int(type), peer, nc->handle(), as_stream(stream));
            if (r != kNcclSuccess) failed = "ncclRecv", first = r;
        }
    }
    // The group is ended even after a failure: NCCL keeps the group open until then.
    r = a.group_end();
    if (failed) return nccl_error(failed, first, nc->handle(), why);
    return r == kNcclSuccess ? MPI_SUCCESS : nccl_error("ncclGroupEnd", r, nc->handle(), why);
}

}  // namespace mpiacc
