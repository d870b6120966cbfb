// The `mpi` netmod: everything over MPICH on the private communicator, so it works
// wherever MPICH does (shared memory, TCP, InfiniBand through UCX). Placement is two-sided:
// the receiver posts a receive into the slot (expect_placement) and the sender sends to
// it on the transfer's tag. MPICH registers the memory it moves itself.
#include <climits>

#include "netmod/netmod.h"
#include "util/counters.h"

namespace mpiacc {

namespace {

// Control messages have a tag of their own, below every data tag (protocol/envelope.h).
constexpr int kControlTag = 0;

// A handle holds MPICH's request. MPICH's handles are never 0, and MPI_REQUEST_NULL is
// kept as the empty handle's 0.
MPI_Request request_of(const NetHandle &h) {
    return h.pending() ? static_cast<MPI_Request>(h.value) : MPI_REQUEST_NULL;
}
void hold(NetHandle *h, MPI_Request r) {
    h->value = r == MPI_REQUEST_NULL ? 0 : static_cast<std::uint64_t>(static_cast<std::uint32_t>(r));
}

class MpiNetmod final : public Netmod {
public:
    const char *name() const override { return "mpi"; }
    NetmodCaps caps() const override { return NetmodCaps{}; }
    PeerReach reach(int) override { return PeerReach::TWO_SIDED; }
    int peer_failure(int, std::string *) override { return MPI_SUCCESS; }
    void fail_peer(int, const std::string &) override {}

    // Not needed here (caps().needs_registration is false): MPICH registers what it sends.
    int register_memory(void *, std::size_t, MemoryKey *key, std::string *) override {
        *key = MemoryKey{};
        return MPI_SUCCESS;
    }
    void deregister_memory(void *, const MemoryKey &) override {}

    int send_bytes(const void *buf, std::size_t len, int peer, int tag, NetHandle *handle) override {
        MPI_Request r = MPI_REQUEST_NULL;
        // Chunks and control messages are far below INT_MAX bytes; whole-message direct
        // transfers above it go as MPI_BYTE counts via the large-count type below.
        const int rc = len > INT_MAX ? send_large(buf, len, peer, tag, &r)
                                     : PMPI_Isend(buf, static_cast<int>(len), MPI_BYTE, peer, tag, comm_, &r);
        hold(handle, r);
        return rc;
    }
    int recv_bytes(void *buf, std::size_t len, int peer, int tag, NetHandle *handle) override {
        MPI_Request r = MPI_REQUEST_NULL;
        const int rc = len > INT_MAX ? recv_large(buf, len, peer, tag, &r)
                                     : PMPI_Irecv(buf, static_cast<int>(len), MPI_BYTE, peer, tag, comm_, &r);
        hold(handle, r);
        return rc;
    }
    int send_typed(const void *buf, int count, MPI_Datatype type, int peer, int tag, NetHandle *handle) override {
        MPI_Request r = MPI_REQUEST_NULL;
        const int rc = PMPI_Isend(buf, count, type, peer, tag, comm_, &r);
        hold(handle, r);
        return rc;
    }
    int recv_typed(void *buf, int count, MPI_Datatype type, int peer, int tag, NetHandle *handle) override {
        MPI_Request r = MPI_REQUEST_NULL;
        const int rc = PMPI_Irecv(buf, count, type, peer, tag, comm_, &r);
        hold(handle, r);
        return rc;
    }

    int place(const void *src, std::size_t len, int peer, int tag, const RemoteSlot &, NetHandle *handle) override {
        MPIACC_COUNT("netmod.mpi.chunk_sends");
        return send_bytes(src, len, peer, tag, handle);
    }
    int expect_placement(void *slot, std::size_t len, int peer, int tag, bool, NetHandle *handle) override {
        MPIACC_COUNT("netmod.mpi.chunk_receives");
        return recv_bytes(slot, len, peer, tag, handle);
    }

    int send_control(const void *msg, std::size_t len, int peer, NetHandle *handle) override {
        return send_bytes(msg, len, peer, kControlTag, handle);
    }
    // By matched probe: receives kept posted for control messages would be wildcard
    // (MPI_ANY_SOURCE) receives, and UCX then searches its wildcard list for every
    // message the rank gets, user traffic included (docs/performance.md, "Host fast path
    // and idle receives"). Probing posts nothing and bounds what it holds at one message.
    bool poll_control(void *msg, std::size_t capacity, int *from, std::size_t *received) override {
        return take_control(msg, capacity, from, received, false);
    }
    bool wait_control(void *msg, std::size_t capacity, int *from, std::size_t *received) override {
        return take_control(msg, capacity, from, received, true);
    }
    int sum_sent_to_me(const int *per_peer, int *total) override {
        return PMPI_Reduce_scatter_block(per_peer, total, 1, MPI_INT, MPI_SUM, comm_);
    }

    bool test(NetHandle *handle) override {
        if (!handle->pending()) return true;
        MPI_Request r = request_of(*handle);
        int flag = 0;
        PMPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        hold(handle, r);
        return flag != 0;
    }
    void wait(NetHandle *handle) override {
        if (!handle->pending()) return;
        MPI_Request r = request_of(*handle);
        PMPI_Wait(&r, MPI_STATUS_IGNORE);
        hold(handle, r);
    }
    void cancel(NetHandle *handle) override {
        if (!handle->pending()) return;
        MPI_Request r = request_of(*handle);
        PMPI_Cancel(&r);
    }
    void abandon(NetHandle *handle) override {
        if (!handle->pending()) return;
        MPI_Request r = request_of(*handle);
        PMPI_Cancel(&r);
        PMPI_Request_free(&r);
        handle->value = 0;
    }
    void release(NetHandle *handle) override {
        if (!handle->pending()) return;
        MPI_Request r = request_of(*handle);
        PMPI_Request_free(&r);
        handle->value = 0;
    }

    MPI_Comm comm_ = MPI_COMM_NULL;

private:
    bool take_control(void *msg, std::size_t capacity, int *from, std::size_t *received, bool wait) {
        int flag = 1;
        MPI_Message handle = MPI_MESSAGE_NULL;
        MPI_Status st;
        const int rc = wait ? PMPI_Mprobe(MPI_ANY_SOURCE, kControlTag, comm_, &handle, &st)
                            : PMPI_Improbe(MPI_ANY_SOURCE, kControlTag, comm_, &flag, &handle, &st);
        if (rc != MPI_SUCCESS || !flag) return false;
        if (PMPI_Mrecv(msg, static_cast<int>(capacity), MPI_BYTE, &handle, &st) != MPI_SUCCESS) return false;
        int count = 0;
        PMPI_Get_count(&st, MPI_BYTE, &count);
        *from = st.MPI_SOURCE;
        *received = static_cast<std::size_t>(count);
        return true;
    }
    // Sizes past INT_MAX: a contiguous type of 1 MiB blocks plus a remainder would need
    // two messages and break in-order matching, so one struct type describes it all.
    static MPI_Datatype large_type(std::size_t len) {
        const std::size_t block = 1u << 20;
        int counts[2] = {static_cast<int>(len / block), static_cast<int>(len % block)};
        MPI_Aint displs[2] = {0, static_cast<MPI_Aint>((len / block) * block)};
        MPI_Datatype mib, types[2], t;
        PMPI_Type_contiguous(static_cast<int>(block), MPI_BYTE, &mib);
        types[0] = mib;
        types[1] = MPI_BYTE;
        PMPI_Type_create_struct(2, counts, displs, types, &t);
        PMPI_Type_commit(&t);
        PMPI_Type_free(&mib);
        return t;
    }
    int send_large(const void *buf, std::size_t len, int peer, int tag, MPI_Request *request) {
        MPI_Datatype t = large_type(len);
        int rc = PMPI_Isend(buf, 1, t, peer, tag, comm_, request);
        PMPI_Type_free(&t);  // MPICH keeps its own reference while the request lives
        return rc;
    }
    int recv_large(void *buf, std::size_t len, int peer, int tag, MPI_Request *request) {
        MPI_Datatype t = large_type(len);
        int rc = PMPI_Irecv(buf, 1, t, peer, tag, comm_, request);
        PMPI_Type_free(&t);
        return rc;
    }
};

}  // namespace

Netmod &mpi_netmod(MPI_Comm private_comm) {
    static MpiNetmod mpi;
    mpi.comm_ = private_comm;
    return mpi;
}

}  // namespace mpiacc
