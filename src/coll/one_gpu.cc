#include "coll/one_gpu.h"

#include <cstdint>
#include <vector>

#include "accel/reduce_op.h"
#include "coll/device_copies.h"
#include "core/buffer_desc.h"
#include "util/error.h"

namespace mpiacc {
namespace {

// Tags on the private duplicate, apart from device_algorithms.cc's.
enum : int { kTagHandles = 11, kTagDone = 12 };

// A peer's exports as they travel to the leader.
struct Handles {
    IpcExport region[2];
    std::uint32_t present[2];
};

// Waits for a request of MPICH's with MPI-ACC's progress (MPI_Wait on a plain request).
int wait(MPI_Request *r) { return MPI_Wait(r, MPI_STATUS_IGNORE); }

// A peer's whole part: its handles to the leader, then the leader's word.
int peer_side(OneGpuArgs &args, int leader, MPI_Comm priv, std::string *why) {
    Handles h{};
    for (int s = 0; s < 2; ++s) {
        h.present[s] = args.region[s].buffer ? 1 : 0;
        if (h.present[s]) h.region[s] = args.region[s].handle;
    }
    int word = MPI_ERR_INTERN;
    MPI_Request sent, got;
    int rc = PMPI_Isend(&h, sizeof h, MPI_BYTE, leader, kTagHandles, priv, &sent);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Irecv(&word, 1, MPI_INT, leader, kTagDone, priv, &got);
        int sent_rc = wait(&sent);
        if (rc == MPI_SUCCESS) rc = wait(&got);
        if (rc == MPI_SUCCESS) rc = sent_rc;
    }
    if (rc != MPI_SUCCESS) return rc;
    if (word != MPI_SUCCESS)
        *why = format("rank %d, which moves this collective's data, failed (see its error)", leader);
    return word;
}

// The leader's side of the exchange: every peer's handles.
int gather_handles(std::vector<Handles> *h, int leader, int p, MPI_Comm priv) {
    h->assign(static_cast<std::size_t>(p), Handles{});
    std::vector<MPI_Request> reqs;
    int rc = MPI_SUCCESS;
    for (int k = 0; k < p && rc == MPI_SUCCESS; ++k) {
        if (k == leader) continue;
        reqs.push_back(MPI_REQUEST_NULL);
        rc = PMPI_Irecv(&(*h)[k], sizeof(Handles), MPI_BYTE, k, kTagHandles, priv, &reqs.back());
    }
    for (MPI_Request &r : reqs) {
        if (r == MPI_REQUEST_NULL) continue;
        int w = wait(&r);
        if (rc == MPI_SUCCESS) rc = w;
    }
    return rc;
}

// The leader's word to every peer, whatever it is: none waits for ever.
void tell_peers(int rc, int leader, int p, MPI_Comm priv) {
    std::vector<MPI_Request> reqs;
    for (int k = 0; k < p; ++k) {
        if (k == leader) continue;
        reqs.push_back(MPI_REQUEST_NULL);
        if (PMPI_Isend(&rc, 1, MPI_INT, k, kTagDone, priv, &reqs.back()) != MPI_SUCCESS) reqs.pop_back();
    }
    for (MPI_Request &r : reqs) wait(&r);
}

// Peer `k`'s region `slot` mapped into the leader's device.
int map(const Handles &h, int slot, std::size_t bytes, int device, std::unique_ptr<DeviceBuffer> *out,
        std::string *why) {
    if (!h.present[slot]) {
        *why = "a peer handed over no buffer where one was due";
        return MPI_ERR_INTERN;
    }
    return accel_for(BufKind::CUDA)->ipc_import(h.region[slot], bytes, device, out, why);
}

}  // namespace

int OneGpuRegion::capture(const void *buf, BufferAttrs attrs, std::size_t n, bool exported, std::string *why) {
    bytes = n;
    if (n == 0) return MPI_SUCCESS;
    if (attrs.kind != BufKind::CUDA) {
        *why = "not CUDA memory";
        return MPI_ERR_BUFFER;
    }
    // The leader uses its own buffers within the call. An exported one is used by the
    // leader, after the work its attributes name: captured as an interprocess event.
    attrs.within_call = !exported;
    attrs.ipc_offer = exported;
    int rc = accel_for(BufKind::CUDA)->capture(const_cast<void *>(buf), n, attrs, &buffer, why);
    if (rc == MPI_SUCCESS && exported && !buffer->ipc_export(&handle)) {
        *why = "the memory has no CUDA IPC handle";
        rc = MPI_ERR_BUFFER;
    }
    return rc;
}

int one_gpu_allreduce(OneGpuArgs &args, MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm priv, int me, int p,
                      std::string *why) {
    constexpr int leader = 0;
    if (me != leader) return peer_side(args, leader, priv, why);
    std::vector<Handles> h;
    int rc = gather_handles(&h, leader, p, priv);
    ReduceSpec spec;
    if (rc == MPI_SUCCESS) rc = classify_reduction(op, type, &spec, why);
    DeviceBuffer &acc = *args.region[1].buffer;
    const std::size_t bytes = args.region[1].bytes;
    const int device = acc.device_ordinal();
    DeviceCopies copies;
    if (rc == MPI_SUCCESS && args.region[0].buffer) {
        rc = copies.copy(*args.region[0].buffer, 0, acc, 0, bytes, why);
        if (rc == MPI_SUCCESS) rc = copies.wait(why);
    }
    std::vector<std::unique_ptr<DeviceBuffer>> out(static_cast<std::size_t>(p));
    for (int k = 1; k < p && rc == MPI_SUCCESS; ++k) {
        std::unique_ptr<DeviceBuffer> in;
        rc = map(h[k], h[k].present[0] ? 0 : 1, bytes, device, &in, why);  // in place: the receive buffer
        if (rc == MPI_SUCCESS) rc = acc.reduce_local(*in, spec, count, why);
        if (rc == MPI_SUCCESS) rc = map(h[k], 1, bytes, device, &out[k], why);
    }
    for (int k = 1; k < p && rc == MPI_SUCCESS; ++k) rc = copies.copy(acc, 0, *out[k], 0, bytes, why);
    const int copied = copies.wait(why);
    if (rc == MPI_SUCCESS) rc = copied;
    tell_peers(rc, leader, p, priv);
    return rc;
}

int one_gpu_bcast(OneGpuArgs &args, int root, MPI_Comm priv, int me, int p, std::string *why) {
    if (me != root) return peer_side(args, root, priv, why);
    std::vector<Handles> h;
    int rc = gather_handles(&h, root, p, priv);
    DeviceBuffer &src = *args.region[1].buffer;
    const std::size_t bytes = args.region[1].bytes;
    DeviceCopies copies;
    std::vector<std::unique_ptr<DeviceBuffer>> out(static_cast<std::size_t>(p));
    for (int k = 0; k < p && rc == MPI_SUCCESS; ++k) {
        if (k == root) continue;
        rc = map(h[k], 1, bytes, src.device_ordinal(), &out[k], why);
        if (rc == MPI_SUCCESS) rc = copies.copy(src, 0, *out[k], 0, bytes, why);
    }
    const int copied = copies.wait(why);
    if (rc == MPI_SUCCESS) rc = copied;
    tell_peers(rc, root, p, priv);
    return rc;
}

int one_gpu_allgather(OneGpuArgs &args, bool in_place, MPI_Comm priv, int me, int p, std::string *why) {
    constexpr int leader = 0;
    if (me != leader) return peer_side(args, leader, priv, why);
    std::vector<Handles> h;
    int rc = gather_handles(&h, leader, p, priv);
    DeviceBuffer &all = *args.region[1].buffer;
    const std::size_t total = args.region[1].bytes, block = total / static_cast<std::size_t>(p);
    const int device = all.device_ordinal();
    DeviceCopies copies;
    if (rc == MPI_SUCCESS && !in_place) rc = copies.copy(*args.region[0].buffer, 0, all, leader * block, block, why);
    // Every block into the leader's buffer, then the whole to every peer.
    std::vector<std::unique_ptr<DeviceBuffer>> in(static_cast<std::size_t>(p)), out(in.size());
    for (int k = 1; k < p && rc == MPI_SUCCESS; ++k) {
        rc = map(h[k], 1, total, device, &out[k], why);
        if (rc == MPI_SUCCESS && in_place) rc = copies.copy(*out[k], k * block, all, k * block, block, why);
        if (rc == MPI_SUCCESS && !in_place) rc = map(h[k], 0, block, device, &in[k], why);
        if (rc == MPI_SUCCESS && !in_place) rc = copies.copy(*in[k], 0, all, k * block, block, why);
    }
    int copied = copies.wait(why);
    if (rc == MPI_SUCCESS) rc = copied;
    for (int k = 1; k < p && rc == MPI_SUCCESS; ++k) rc = copies.copy(all, 0, *out[k], 0, total, why);
    copied = copies.wait(why);
    if (rc == MPI_SUCCESS) rc = copied;
    tell_peers(rc, leader, p, priv);
    return rc;
}

int one_gpu_reduce_scatter_block(OneGpuArgs &args, MPI_Count recvcount, MPI_Datatype type, MPI_Op op, char *scratch,
                                 MPI_Comm priv, int me, int p, std::string *why) {
    constexpr int leader = 0;
    if (me != leader) return peer_side(args, leader, priv, why);
    std::vector<Handles> h;
    int rc = gather_handles(&h, leader, p, priv);
    ReduceSpec spec;
    if (rc == MPI_SUCCESS) rc = classify_reduction(op, type, &spec, why);
    const std::size_t total = args.region[0].bytes, block = args.region[1].bytes;
    const int device = args.region[0].buffer->device_ordinal();
    // The whole vector reduced in the leader's scratch, then each rank's block to it.
    OneGpuRegion acc;
    BufferAttrs scratch_attrs;
    if (rc == MPI_SUCCESS) rc = classify_buffer(scratch, type, &scratch_attrs, why);
    if (rc == MPI_SUCCESS) rc = acc.capture(scratch, scratch_attrs, total, false, why);
    DeviceCopies copies;
    if (rc == MPI_SUCCESS) rc = copies.copy(*args.region[0].buffer, 0, *acc.buffer, 0, total, why);
    if (rc == MPI_SUCCESS) rc = copies.wait(why);
    for (int k = 1; k < p && rc == MPI_SUCCESS; ++k) {
        std::unique_ptr<DeviceBuffer> in;
        rc = map(h[k], 0, total, device, &in, why);
        if (rc == MPI_SUCCESS) rc = acc.buffer->reduce_local(*in, spec, recvcount * p, why);
    }
    std::vector<std::unique_ptr<DeviceBuffer>> out(static_cast<std::size_t>(p));
    for (int k = 1; k < p && rc == MPI_SUCCESS; ++k) {
        rc = map(h[k], 1, block, device, &out[k], why);
        if (rc == MPI_SUCCESS) rc = copies.copy(*acc.buffer, k * block, *out[k], 0, block, why);
    }
    if (rc == MPI_SUCCESS) rc = copies.copy(*acc.buffer, leader * block, *args.region[1].buffer, 0, block, why);
    const int copied = copies.wait(why);
    if (rc == MPI_SUCCESS) rc = copied;
    tell_peers(rc, leader, p, priv);
    return rc;
}

}  // namespace mpiacc
