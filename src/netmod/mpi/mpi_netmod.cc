#include <climits>

#include "core/context.h"
#include "netmod/netmod.h"

namespace mpiacc {

namespace {

class MpiNetmod final : public Netmod {
public:
    const char *name() const override { return "mpi"; }

    int send_bytes(const void *buf, std::size_t len, int peer, int tag, MPI_Request *request) override {
        // Chunks and control messages are far below INT_MAX bytes; whole-message direct
        // transfers above it go as MPI_BYTE counts via the large-count type below.
        if (len > INT_MAX) return send_large(buf, len, peer, tag, request);
        return PMPI_Isend(buf, static_cast<int>(len), MPI_BYTE, peer, tag, context().proto_comm, request);
    }
    int recv_bytes(void *buf, std::size_t len, int peer, int tag, MPI_Request *request) override {
        if (len > INT_MAX) return recv_large(buf, len, peer, tag, request);
        return PMPI_Irecv(buf, static_cast<int>(len), MPI_BYTE, peer, tag, context().proto_comm, request);
    }
    int send_typed(const void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Request *request) override {
        return PMPI_Isend(buf, count, type, peer, tag, context().proto_comm, request);
    }
    int recv_typed(void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Request *request) override {
        return PMPI_Irecv(buf, count, type, peer, tag, context().proto_comm, request);
    }
    bool test(MPI_Request *request) override {
        if (*request == MPI_REQUEST_NULL) return true;
        int flag = 0;
        PMPI_Test(request, &flag, MPI_STATUS_IGNORE);
        return flag != 0;
    }
    void abandon(MPI_Request *request) override {
        if (*request == MPI_REQUEST_NULL) return;
        PMPI_Cancel(request);
        PMPI_Request_free(request);
    }

private:
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
        int rc = PMPI_Isend(buf, 1, t, peer, tag, context().proto_comm, request);
        PMPI_Type_free(&t);  // MPICH keeps its own reference while the request lives
        return rc;
    }
    int recv_large(void *buf, std::size_t len, int peer, int tag, MPI_Request *request) {
        MPI_Datatype t = large_type(len);
        int rc = PMPI_Irecv(buf, 1, t, peer, tag, context().proto_comm, request);
        PMPI_Type_free(&t);
        return rc;
    }
};

}  // namespace

Netmod &netmod() {
    static MpiNetmod mpi;
    return mpi;
}

}  // namespace mpiacc
