#include "coll/device_algorithms.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accel/accel.h"
#include "accel/reduce_op.h"
#include "coll/device_copies.h"
#include "coll/issue_order.h"
#include "coll/nccl.h"
#include "coll/one_gpu.h"
#include "core/buffer_desc.h"
#include "core/context.h"
#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {
namespace {

// Smallest collectives (bytes of the whole buffer) MPI-ACC's algorithms take; below,
// staging through host memory and MPICH's collective. Ranks on one GPU, measured on one
// H100 with 2 and 4 ranks (docs/performance.md, "Device collectives"): the leader beats
// staging at every size but for the smallest broadcasts, where staging pays no context
// switch. Ranks with GPUs of their own: not yet measured, the first forms' crossover.
enum class Coll { ALLREDUCE, BCAST, ALLGATHER, REDUCE_SCATTER_BLOCK };
std::size_t one_gpu_min(Coll c) { return c == Coll::BCAST ? 4u << 10 : 1; }
constexpr std::size_t kSpreadMin = 256u << 10;

// The private duplicate's tags, one per step, so that a step never matches another's.
enum : int { kTagReduceScatter = 1, kTagAllgather = 2, kTagBcast = 3 };

// ---------------------------------------------------------------- per communicator

// What a user communicator keeps for these collectives (an attribute, freed with it):
// the private duplicate the algorithms' messages use, made when one first runs, and where
// the ranks' buffers were found by the last agreement in which all of them were CUDA
// memory. Every field changes only in calls that every rank makes alike, so it is the
// same at every rank.
struct CommPaths {
    enum class Seen { NOTHING, ONE_GPU, OTHER };
    MPI_Comm dup = MPI_COMM_NULL;
    Seen seen = Seen::NOTHING;
    std::uint64_t unseen_calls = 0;  // filtered calls while nothing was seen
};

int free_comm_paths(MPI_Comm, int, void *value, void *) {
    auto *paths = static_cast<CommPaths *>(value);
    if (paths->dup != MPI_COMM_NULL) PMPI_Comm_free(&paths->dup);
    delete paths;
    return MPI_SUCCESS;
}

int paths_keyval() {
    static int keyval = MPI_KEYVAL_INVALID;
    static std::once_flag once;
    std::call_once(once, [] { PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_comm_paths, &keyval, nullptr); });
    return keyval;
}

// The communicator's CommPaths, made at its first filtered collective; null where the
// attribute cannot be kept.
CommPaths *comm_paths(MPI_Comm comm) {
    const int keyval = paths_keyval();
    if (keyval == MPI_KEYVAL_INVALID) return nullptr;
    CommPaths *paths = nullptr;
    int flag = 0;
    PMPI_Comm_get_attr(comm, keyval, &paths, &flag);
    if (flag) return paths;
    auto made = std::make_unique<CommPaths>();
    if (PMPI_Comm_set_attr(comm, keyval, made.get()) != MPI_SUCCESS) return nullptr;
    return made.release();
}

// The private duplicate, made by every rank in the same call (the first that runs an
// algorithm). Errors on it are returned, not fatal: they are reported on the user's
// communicator.
int private_comm(CommPaths *paths, MPI_Comm comm, MPI_Comm *out) {
    if (paths->dup == MPI_COMM_NULL) {
        MPI_Comm made = MPI_COMM_NULL;
        MPI_Request r;
        int rc = PMPI_Comm_idup(comm, &made, &r);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);  // with MPI-ACC's progress
        if (rc != MPI_SUCCESS) return rc;
        PMPI_Comm_set_name(made, "MPI-ACC collectives");
        PMPI_Comm_set_errhandler(made, MPI_ERRORS_RETURN);
        paths->dup = made;
    }
    *out = paths->dup;
    return MPI_SUCCESS;
}

// ---------------------------------------------------------------- device scratch

// Device memory kept between calls: cudaMalloc costs more than a large collective's copies.
struct ScratchBlock {
    int device;
    std::size_t bytes;
    void *p;
};
std::mutex scratch_mutex;
std::vector<ScratchBlock> scratch_free;

class Scratch {
public:
    Scratch() = default;
    Scratch(const Scratch &) = delete;
    Scratch &operator=(const Scratch &) = delete;
    ~Scratch() {
        if (!block_.p) return;
        std::lock_guard<std::mutex> lock(scratch_mutex);
        scratch_free.push_back(block_);
    }
    // At least `bytes` on `device`; null with *why.
    char *take(int device, std::size_t bytes, std::string *why) {
        {
            std::lock_guard<std::mutex> lock(scratch_mutex);
            auto fits = std::find_if(scratch_free.begin(), scratch_free.end(),
                                     [&](const ScratchBlock &b) { return b.device == device && b.bytes >= bytes; });
            if (fits != scratch_free.end()) {
                block_ = *fits;
                scratch_free.erase(fits);
                return static_cast<char *>(block_.p);
            }
        }
        // Rounded up, so that a slightly larger call next time finds it big enough.
        std::size_t rounded = std::max<std::size_t>(bytes, 1u << 20);
        rounded = (rounded + (1u << 20) - 1) & ~((std::size_t{1} << 20) - 1);
        void *p = accel_for(BufKind::CUDA)->allocate_device_memory(device, rounded, why);
        if (!p) return nullptr;
        MPIACC_COUNT("coll.device_scratch_alloc");
        block_ = {device, rounded, p};
        return static_cast<char *>(p);
    }

private:
    ScratchBlock block_{-1, 0, nullptr};
};

// ---------------------------------------------------------------- the agreement

// What one rank's arguments allow: its buffers are CUDA memory (by attribute or
// autodetection) and the type is a predefined one, or a tagged duplicate of one, laid
// out densely.
// *attrs: what its datatype's attributes and the pointer said, for the capture.
bool cuda_buffer(const void *buf, MPI_Datatype type, int *device, BufferAttrs *attrs) {
    if (buf == nullptr || buf == MPI_IN_PLACE) return false;
    std::string why;
    if (classify_buffer(buf, type, attrs, &why) != MPI_SUCCESS || attrs->kind != BufKind::CUDA) return false;
    return accel_for(BufKind::CUDA)->owns_pointer(buf, device);
}

bool dense_predefined(MPI_Datatype type, std::size_t *size) {
    MPI_Datatype base = undup_type(type);
    int n = 0, na = 0, nt = 0, combiner = 0;
    if (PMPI_Type_get_envelope(base, &n, &na, &nt, &combiner) != MPI_SUCCESS || combiner != MPI_COMBINER_NAMED)
        return false;
    int bytes = 0;
    MPI_Aint lb = 0, extent = 0;
    PMPI_Type_size(base, &bytes);
    PMPI_Type_get_extent(base, &lb, &extent);
    *size = static_cast<std::size_t>(bytes);
    return bytes > 0 && lb == 0 && extent == bytes;
}

// A failure, reported on the user's communicator with the call's name.
int report(MPI_Comm comm, const char *call, int rc, const std::string &why) {
    if (rc == MPI_SUCCESS) return rc;
    MPIACC_COUNT("coll.device_failed");
    return raise_error(comm, rc, call, why.empty() ? "MPI-ACC's device algorithm failed" : why);
}

// Bytes of `count` elements of `type`: the same at every rank (type signatures match),
// unlike the type's layout, so the filter before the agreement reads nothing else.
std::size_t signature_bytes(MPI_Count count, MPI_Datatype type) {
    int size = 0;
    if (count <= 0 || PMPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0) return 0;
    return static_cast<std::size_t>(count) * static_cast<std::size_t>(size);
}

// How the algorithms run: every rank's buffers on one GPU (one_gpu.h), or not.
struct Shape {
    bool one_gpu = false;
};

// A call that passed the filter: its communicator's state, and the bytes of its whole
// buffer.
struct Filtered {
    CommPaths *paths = nullptr;
    Coll coll = Coll::ALLREDUCE;
    std::size_t bytes = 0;
};

std::size_t min_for(Coll coll, bool one_gpu) {
    const std::size_t knob = context().knobs.test_coll_device_min;
    return knob ? knob : one_gpu ? one_gpu_min(coll) : kSpreadMin;
}

// The filter every rank applies alike (the same count, type signature and communicator
// everywhere, and the communicator's CommPaths): `count` elements of `type`, times the
// rank count where `per_rank`, on an intracommunicator of at least two ranks, from the
// minimum of the ranks' placing the last agreement found. Until one has found it, calls
// below kSpreadMin still ask, the 1st, 2nd, 4th, 8th... so that a program of small
// collectives learns it soon and one of host collectives pays a few agreements. Sets
// the communicator's size and this rank's place. Cheapest test first: it runs for every
// blocking call of these four where some rank has CUDA, host calls too.
bool large_call(MPI_Comm comm, MPI_Count count, MPI_Datatype type, bool per_rank, Coll coll, int *p, int *me,
                Filtered *f) {
    if (!context().device_collectives) return false;
    std::size_t bytes = signature_bytes(count, type);
    if (bytes == 0 || (!per_rank && bytes < min_for(coll, true))) return false;
    PMPI_Comm_size(comm, p);
    if (per_rank) bytes *= static_cast<std::size_t>(*p);
    if (*p < 2 || bytes < min_for(coll, true)) return false;
    int inter = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return false;
    CommPaths *paths = comm_paths(comm);
    if (!paths) return false;
    if (bytes < min_for(coll, false)) {
        using Seen = CommPaths::Seen;
        if (paths->seen == Seen::OTHER) return false;
        if (paths->seen == Seen::NOTHING) {
            const std::uint64_t n = ++paths->unseen_calls;
            if ((n & (n - 1)) != 0) return false;
        }
    }
    PMPI_Comm_rank(comm, me);
    *f = {paths, coll, bytes};
    return true;
}

// The agreement on the user's communicator, after large_call: a collective every rank
// makes there in the same place. `mappable`: the leader may map this rank's buffers
// (one_gpu.h). True when the algorithms run (*shape says how, *priv is the private
// duplicate), or when the agreement failed: *rc is then its error, reported.
bool agree(MPI_Comm comm, const char *call, const Filtered &f, bool mine, bool mappable, int device, MPI_Comm *priv,
           Shape *shape, int *rc) {
    const Context &ctx = context();
    // A nonblocking collective still waiting for its inputs goes to MPICH before this
    // call's own: MPICH matches them in calling order.
    wait_for_queued_collectives(comm);
    // Each rank's refusals, node and GPU, as the maxima of the values and of their
    // negations: equal maxima mean every rank has the same.
    const std::int64_t node = static_cast<std::int64_t>(ctx.node_id >> 1);
    const std::int64_t gpu = mine ? accel_for(BufKind::CUDA)->device_pci_location(device) : -1;
    std::int64_t v[6] = {mine ? 0 : 1, node, -node, gpu, -gpu, mine && mappable && ctx.knobs.ipc ? 0 : 1};
    MPI_Request r;
    *rc = PMPI_Iallreduce(MPI_IN_PLACE, v, 6, MPI_INT64_T, MPI_MAX, comm, &r);
    if (*rc == MPI_SUCCESS) *rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (*rc != MPI_SUCCESS) {
        *rc = report(comm, call, *rc, "agreeing on the collective's path");
        return true;
    }
    const bool one_gpu = v[1] == -v[2] && v[3] == -v[4] && v[3] >= 0 && !ctx.knobs.test_coll_spread;
    // Ranks on one GPU whose buffers the leader cannot map (IPC off, managed memory)
    // would each copy, paying the GPU's context switches: staging is faster.
    const bool leader_maps = one_gpu && v[5] == 0;
    if (v[0] == 0) f.paths->seen = leader_maps ? CommPaths::Seen::ONE_GPU : CommPaths::Seen::OTHER;
    if (v[0] != 0 || (one_gpu && !leader_maps) || f.bytes < min_for(f.coll, one_gpu)) {
        MPIACC_COUNT("coll.device_declined");
        return false;
    }
    *rc = private_comm(f.paths, comm, priv);
    if (*rc != MPI_SUCCESS) {
        *rc = report(comm, call, *rc, "duplicating the communicator for MPI-ACC's collectives");
        return true;
    }
    shape->one_gpu = one_gpu;
    return true;
}

// ---------------------------------------------------------------- steps

// Posted point-to-point requests of one step, waited for together; the first error is
// kept (every request is still waited for, so nothing is left in flight).
class Step {
public:
    explicit Step(MPI_Comm comm) : comm_(comm) {}
    void send(const char *buf, MPI_Count n, MPI_Datatype t, int peer, int tag) {
        if (n == 0) return;
        reqs_.push_back(MPI_REQUEST_NULL);
        note(MPI_Isend(buf, static_cast<int>(n), t, peer, tag, comm_, &reqs_.back()));
    }
    void recv(char *buf, MPI_Count n, MPI_Datatype t, int peer, int tag) {
        if (n == 0) return;
        reqs_.push_back(MPI_REQUEST_NULL);
        note(MPI_Irecv(buf, static_cast<int>(n), t, peer, tag, comm_, &reqs_.back()));
    }
    int wait() {
        if (!reqs_.empty()) note(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
        reqs_.clear();
        return rc_;
    }

private:
    void note(int rc) {
        if (rc_ == MPI_SUCCESS) rc_ = rc;
    }
    MPI_Comm comm_;
    std::vector<MPI_Request> reqs_;
    int rc_ = MPI_SUCCESS;
};

// `count` elements in `parts` blocks, the first count % parts of them one longer.
struct Blocks {
    Blocks(MPI_Count count, int parts) : first(parts + 1) {
        for (int i = 0; i < parts; ++i) first[i + 1] = first[i] + count / parts + (i < count % parts ? 1 : 0);
    }
    MPI_Count at(int i) const { return first[i]; }
    MPI_Count size(int i) const { return first[i + 1] - first[i]; }
    std::vector<MPI_Count> first;
};

// dst[0, bytes) = src[0, bytes), both CUDA memory, ordered after the streams their
// types' attributes name.
int copy_on_device(void *dst, MPI_Datatype dst_type, const void *src, MPI_Datatype src_type, std::size_t bytes,
                   std::string *why) {
    if (bytes == 0 || dst == src) return MPI_SUCCESS;
    BufferAttrs from_attrs, to_attrs;
    int rc = classify_buffer(src, src_type, &from_attrs, why, "sendbuf");
    if (rc == MPI_SUCCESS) rc = classify_buffer(dst, dst_type, &to_attrs, why, "recvbuf");
    if (rc != MPI_SUCCESS) return rc;
    from_attrs.within_call = to_attrs.within_call = true;
    Accel *cuda = accel_for(BufKind::CUDA);
    std::unique_ptr<DeviceBuffer> from, to;
    rc = cuda->capture(const_cast<void *>(src), bytes, from_attrs, &from, why);
    if (rc == MPI_SUCCESS) rc = cuda->capture(dst, bytes, to_attrs, &to, why);
    DeviceCopies copies;
    if (rc == MPI_SUCCESS) rc = copies.copy(*from, 0, *to, 0, bytes, why);
    const int copied = copies.wait(why);
    return rc != MPI_SUCCESS ? rc : copied;
}

// Reduces each of `n` slots of `stride` bytes at `slots` into `acc` (acc = slot op acc),
// `count` elements each, on the device.
int reduce_slots(const char *slots, int n, std::size_t stride, char *acc, MPI_Count count, MPI_Datatype type,
                 MPI_Op op) {
    for (int i = 0; i < n; ++i) {
        int rc = MPI_Reduce_local(slots + i * stride, acc, static_cast<int>(count), type, op);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

bool fits_int(MPI_Count n) { return n >= 0 && n <= INT_MAX; }

// Reduce-scatter of `in` (count elements, `blocks` of them) so that `out` holds block r
// reduced over every rank. `first_in_out`: the first peer's block lands in `out` itself
// and `in`'s own block is reduced into it (out does not alias in); otherwise `out`
// already holds this rank's own block.
int reduce_scatter(const char *in, char *out, const Blocks &blocks, std::size_t size, MPI_Datatype type, MPI_Op op,
                   MPI_Comm priv, int me, int p, bool first_in_out, int device, std::string *why) {
    const MPI_Count mine = blocks.size(me);
    const int slots = p - 1 - (first_in_out ? 1 : 0);
    const std::size_t stride = static_cast<std::size_t>(mine) * size;
    Scratch scratch;
    char *s = nullptr;
    if (slots > 0 && stride > 0) {
        s = scratch.take(device, stride * slots, why);
        if (!s) return MPI_ERR_NO_MEM;
    }
    Step step(priv);
    int slot = 0;
    for (int d = 1; d < p; ++d) {
        // Peers in turn from this rank's right, so that no peer is everyone's first.
        const int peer = (me + d) % p;
        char *into = (first_in_out && d == 1) ? out : s + (slot++) * stride;
        step.recv(into, mine, type, peer, kTagReduceScatter);
        step.send(in + blocks.at(peer) * size, blocks.size(peer), type, peer, kTagReduceScatter);
    }
    int rc = step.wait();
    if (rc != MPI_SUCCESS || mine == 0) return rc;
    if (first_in_out) rc = MPI_Reduce_local(in + blocks.at(me) * size, out, static_cast<int>(mine), type, op);
    if (rc == MPI_SUCCESS) rc = reduce_slots(s, slots, stride, out, mine, type, op);
    return rc;
}

// NCCL, where it serves: every rank with a GPU of its own (nccl_comm_for, answered the
// same everywhere and cached on the communicator) and every rank's buffers on the GPU
// NCCL was set up on. True when it ran, *rc its outcome.
bool by_nccl(MPI_Comm comm, MPI_Comm priv, int device, void *user_stream,
             const std::function<int(NcclComm *, void *)> &op, int *rc, std::string *why) {
    std::string refusal;
    NcclComm *nc = nccl_comm_for(comm, &refusal);
    if (!nc) return false;
    int here = nccl_comm_device(nc) == device ? 1 : 0, all = 0;
    MPI_Request r;
    *rc = PMPI_Iallreduce(&here, &all, 1, MPI_INT, MPI_MIN, priv, &r);
    if (*rc == MPI_SUCCESS) *rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (*rc != MPI_SUCCESS) return true;
    if (!all) return false;
    MPIACC_COUNT("coll.nccl");
    *rc = nccl_run(
        nc, user_stream, [&](void *stream) { return op(nc, stream); }, why);
    return true;
}

}  // namespace

bool device_allreduce(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                      const char *call, int *rc) {
    int p = 0, me = 0;
    Filtered f;
    if (!large_call(comm, count, type, false, Coll::ALLREDUCE, &p, &me, &f)) return false;
    const bool in_place = sendbuf == MPI_IN_PLACE;
    std::size_t size = 0;
    int device = -1, send_device = -1;
    ReduceSpec spec;
    std::string why;
    BufferAttrs send_attrs, recv_attrs;
    const bool mine = fits_int(count) && dense_predefined(type, &size) &&
                      cuda_buffer(recvbuf, type, &device, &recv_attrs) &&
                      (in_place || cuda_buffer(sendbuf, type, &send_device, &send_attrs)) &&
                      classify_reduction(op, type, &spec, &why) == MPI_SUCCESS;
    const std::size_t bytes = static_cast<std::size_t>(count) * size;
    OneGpuArgs args;
    const bool exported = me != 0;
    const bool mappable =
        mine && (in_place || args.region[0].capture(sendbuf, send_attrs, bytes, exported, &why) == MPI_SUCCESS) &&
        args.region[1].capture(recvbuf, recv_attrs, bytes, exported, &why) == MPI_SUCCESS;
    MPI_Comm priv = MPI_COMM_NULL;
    Shape shape;
    *rc = MPI_SUCCESS;
    if (!agree(comm, call, f, mine, mappable, device, &priv, &shape, rc)) return false;
    if (*rc != MPI_SUCCESS) return true;  // reported
    MPIACC_COUNT("coll.device_allreduce");
    why.clear();
    if (shape.one_gpu) {
        *rc = report(comm, call, one_gpu_allreduce(args, count, type, op, priv, me, p, &why), why);
        return true;
    }
    NcclReduction red;
    std::string no_nccl;
    if (nccl_reduction(op, type, &red, &no_nccl) &&
        by_nccl(
            comm, priv, device, recv_attrs.stream,
            [&](NcclComm *nc, void *s) {
                return nccl_allreduce(nc, sendbuf, recvbuf, static_cast<std::size_t>(count), red, s, &why);
            },
            rc, &why)) {
        *rc = report(comm, call, *rc, why);
        return true;
    }
    const Blocks blocks(count, p);
    const char *in = static_cast<const char *>(in_place ? recvbuf : sendbuf);
    char *out = static_cast<char *>(recvbuf);
    char *own = out + blocks.at(me) * size;
    *rc = reduce_scatter(in, own, blocks, size, type, op, priv, me, p, !in_place, device, &why);
    if (*rc == MPI_SUCCESS) {
        Step step(priv);
        for (int d = 1; d < p; ++d) {
            const int peer = (me + d) % p;
            step.recv(out + blocks.at(peer) * size, blocks.size(peer), type, peer, kTagAllgather);
            step.send(own, blocks.size(me), type, peer, kTagAllgather);
        }
        *rc = step.wait();
    }
    *rc = report(comm, call, *rc, why);
    return true;
}

bool device_reduce_scatter_block(const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype type, MPI_Op op,
                                 MPI_Comm comm, const char *call, int *rc) {
    int p = 0, me = 0;
    Filtered f;
    if (!large_call(comm, recvcount, type, true, Coll::REDUCE_SCATTER_BLOCK, &p, &me, &f)) return false;
    std::size_t size = 0;
    int device = -1, send_device = -1;
    ReduceSpec spec;
    std::string why;
    BufferAttrs send_attrs, recv_attrs;
    // In place, the result would have to move from block r to block 0: that stages.
    const bool mine = fits_int(recvcount) && fits_int(recvcount * p) && dense_predefined(type, &size) &&
                      sendbuf != MPI_IN_PLACE && cuda_buffer(recvbuf, type, &device, &recv_attrs) &&
                      cuda_buffer(sendbuf, type, &send_device, &send_attrs) &&
                      classify_reduction(op, type, &spec, &why) == MPI_SUCCESS;
    const std::size_t block = static_cast<std::size_t>(recvcount) * size;
    OneGpuArgs args;
    const bool exported = me != 0;
    const bool mappable = mine &&
                          args.region[0].capture(sendbuf, send_attrs, block * p, exported, &why) == MPI_SUCCESS &&
                          args.region[1].capture(recvbuf, recv_attrs, block, exported, &why) == MPI_SUCCESS;
    MPI_Comm priv = MPI_COMM_NULL;
    Shape shape;
    *rc = MPI_SUCCESS;
    if (!agree(comm, call, f, mine, mappable, device, &priv, &shape, rc)) return false;
    if (*rc != MPI_SUCCESS) return true;  // reported
    MPIACC_COUNT("coll.device_reduce_scatter");
    why.clear();
    if (shape.one_gpu) {
        Scratch scratch;
        char *acc = me == 0 ? scratch.take(device, block * p, &why) : nullptr;
        *rc = me == 0 && !acc ? MPI_ERR_NO_MEM
                              : one_gpu_reduce_scatter_block(args, recvcount, type, op, acc, priv, me, p, &why);
        *rc = report(comm, call, *rc, why);
        return true;
    }
    NcclReduction red;
    std::string no_nccl;
    if (nccl_reduction(op, type, &red, &no_nccl) && by_nccl(
                                                        comm, priv, device, recv_attrs.stream,
                                                        [&](NcclComm *nc, void *s) {
                                                            return nccl_reduce_scatter_block(
                                                                nc, sendbuf, recvbuf,
                                                                static_cast<std::size_t>(recvcount), red, s, &why);
                                                        },
                                                        rc, &why)) {
        *rc = report(comm, call, *rc, why);
        return true;
    }
    const Blocks blocks(recvcount * p, p);
    *rc = reduce_scatter(static_cast<const char *>(sendbuf), static_cast<char *>(recvbuf), blocks, size, type, op, priv,
                         me, p, true, device, &why);
    *rc = report(comm, call, *rc, why);
    return true;
}

bool device_bcast(void *buffer, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm, const char *call,
                  int *rc) {
    int p = 0, me = 0;
    Filtered f;
    // A bad root is MPICH's to report.
    if (!large_call(comm, count, type, false, Coll::BCAST, &p, &me, &f) || root < 0 || root >= p) return false;
    std::size_t size = 0;
    int device = -1;
    std::string why;
    BufferAttrs recv_attrs;
    const bool mine =
        fits_int(count) && dense_predefined(type, &size) && cuda_buffer(buffer, type, &device, &recv_attrs);
    OneGpuArgs args;
    const bool mappable = mine && args.region[1].capture(buffer, recv_attrs, static_cast<std::size_t>(count) * size,
                                                         me != root, &why) == MPI_SUCCESS;
    MPI_Comm priv = MPI_COMM_NULL;
    Shape shape;
    *rc = MPI_SUCCESS;
    if (!agree(comm, call, f, mine, mappable, device, &priv, &shape, rc)) return false;
    if (*rc != MPI_SUCCESS) return true;  // reported
    MPIACC_COUNT("coll.device_bcast");
    why.clear();
    if (shape.one_gpu) {
        *rc = report(comm, call, one_gpu_bcast(args, root, priv, me, p, &why), why);
        return true;
    }
    const std::size_t bytes = static_cast<std::size_t>(count) * size;
    if (by_nccl(
            comm, priv, device, recv_attrs.stream,
            [&](NcclComm *nc, void *s) { return nccl_bcast(nc, buffer, bytes, NcclType::UINT8, root, s, &why); }, rc,
            &why)) {
        *rc = report(comm, call, *rc, why);
        return true;
    }
    // A binomial tree over the ranks relative to the root: each rank receives once from
    // its parent, then sends to its children, the farthest first.
    char *buf = static_cast<char *>(buffer);
    const int rel = (me - root + p) % p;
    int mask = 1;
    while (mask < p) {
        if (rel & mask) {
            Step step(priv);
            step.recv(buf, count, type, (rel - mask + root) % p, kTagBcast);
            *rc = step.wait();
            break;
        }
        mask <<= 1;
    }
    Step sends(priv);
    for (mask >>= 1; mask > 0 && *rc == MPI_SUCCESS; mask >>= 1)
        if (rel + mask < p) sends.send(buf, count, type, (rel + mask + root) % p, kTagBcast);
    const int sent = sends.wait();
    if (*rc == MPI_SUCCESS) *rc = sent;
    *rc = report(comm, call, *rc, "");
    return true;
}

bool device_allgather(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                      MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, const char *call, int *rc) {
    int p = 0, me = 0;
    Filtered f;
    if (!large_call(comm, recvcount, recvtype, true, Coll::ALLGATHER, &p, &me, &f)) return false;
    const bool in_place = sendbuf == MPI_IN_PLACE;
    std::size_t size = 0, send_size = 0;
    int device = -1, send_device = -1;
    BufferAttrs send_attrs, recv_attrs;
    // The send side must be the same bytes as a receive block (same signature).
    const bool mine =
        fits_int(recvcount * p) && dense_predefined(recvtype, &size) &&
        cuda_buffer(recvbuf, recvtype, &device, &recv_attrs) &&
        (in_place || (fits_int(sendcount) && cuda_buffer(sendbuf, sendtype, &send_device, &send_attrs) &&
                      dense_predefined(sendtype, &send_size) &&
                      static_cast<MPI_Count>(send_size) * sendcount == static_cast<MPI_Count>(size) * recvcount));
    const std::size_t block = static_cast<std::size_t>(recvcount) * size;
    std::string why;
    OneGpuArgs args;
    const bool exported = me != 0;
    const bool mappable =
        mine && (in_place || args.region[0].capture(sendbuf, send_attrs, block, exported, &why) == MPI_SUCCESS) &&
        args.region[1].capture(recvbuf, recv_attrs, block * p, exported, &why) == MPI_SUCCESS;
    MPI_Comm priv = MPI_COMM_NULL;
    Shape shape;
    *rc = MPI_SUCCESS;
    if (!agree(comm, call, f, mine, mappable, device, &priv, &shape, rc)) return false;
    if (*rc != MPI_SUCCESS) return true;  // reported
    MPIACC_COUNT("coll.device_allgather");
    why.clear();
    if (shape.one_gpu) {
        *rc = report(comm, call, one_gpu_allgather(args, in_place, priv, me, p, &why), why);
        return true;
    }
    char *out = static_cast<char *>(recvbuf);
    char *own = out + me * block;
    if (by_nccl(
            comm, priv, device, recv_attrs.stream,
            [&](NcclComm *nc, void *s) {
                return nccl_allgather(nc, in_place ? MPI_IN_PLACE : sendbuf, recvbuf, block, NcclType::UINT8, s, &why);
            },
            rc, &why)) {
        *rc = report(comm, call, *rc, why);
        return true;
    }
    Step step(priv);
    for (int d = 1; d < p; ++d) {
        const int peer = (me + d) % p;
        step.recv(out + peer * block, recvcount, recvtype, peer, kTagAllgather);
        if (in_place)
            step.send(own, recvcount, recvtype, peer, kTagAllgather);
        else
            step.send(static_cast<const char *>(sendbuf), sendcount, sendtype, peer, kTagAllgather);
    }
    // This rank's own block, while the peers' come in.
    int copied = in_place ? MPI_SUCCESS : copy_on_device(own, recvtype, sendbuf, sendtype, block, &why);
    *rc = step.wait();
    if (*rc == MPI_SUCCESS) *rc = copied;
    *rc = report(comm, call, *rc, why);
    return true;
}

void release_device_scratch() {
    std::vector<ScratchBlock> blocks;
    {
        std::lock_guard<std::mutex> lock(scratch_mutex);
        blocks.swap(scratch_free);
    }
    Accel *cuda = accel_for(BufKind::CUDA);
    for (const ScratchBlock &b : blocks)
        if (cuda) cuda->free_device_memory(b.device, b.p, b.bytes);
}

}  // namespace mpiacc
