// MPI-4's large-count point-to-point calls (MPI_Send_c, MPI_Recv_c, ...). Straight to
// MPICH, a large-count receive of a message MPI-ACC had sent by rendezvous would take the
// 200-byte envelope as the data, and a device buffer would reach MPICH as if it were host
// memory.
//
// So each one takes the path of its int twin. A count that fits an int is passed as it
// is. A larger one is passed as one element of a contiguous type of `count` elements,
// which carries the original type's MPI-ACC attributes: the same bytes, the same type
// signature, so it matches, truncates and reports status bytes as the large count would,
// and MPI_Get_count_c with the original type reads the status as usual. The temporary
// type is freed after the call; pending operations keep their own reference (TypeRef,
// or MPICH's).
#include <climits>

#include "binding/binding.h"

using namespace mpiacc;

IntCount::IntCount(MPI_Count count, MPI_Datatype type) : type_(type) {
    if (count <= INT_MAX) {
        // A negative count stays negative: MPICH reports it under the int call.
        count_ = count < 0 ? -1 : static_cast<int>(count);
        return;
    }
    count_ = 1;
    ok_ = PMPI_Type_contiguous_c(count, type, &made_) == MPI_SUCCESS && PMPI_Type_commit(&made_) == MPI_SUCCESS &&
          copy_attributes(type, made_);
    type_ = made_;
}

IntCount::~IntCount() {
    if (made_ != MPI_DATATYPE_NULL) free_datatype(&made_);
}

// The MPI-ACC attributes of `from` (buffer kind, stream, queue, ...) set on `to`, through
// MPI_Type_set_attr so that the registry of tagged types knows of them.
bool IntCount::copy_attributes(MPI_Datatype from, MPI_Datatype to) {
    const Keyvals &k = context().keyvals;
    for (int keyval : {k.buf_type, k.stream, k.command_queue, k.event, k.context, k.device, k.offset}) {
        void *value = nullptr;
        int flag = 0;
        if (keyval == MPI_KEYVAL_INVALID || PMPI_Type_get_attr(from, keyval, &value, &flag) != MPI_SUCCESS)
            return false;
        if (flag && MPI_Type_set_attr(to, keyval, value) != MPI_SUCCESS) return false;
    }
    return true;
}

// The int twin `twin` with (buf, count, type) as IntCount `n` gives them; MPICH's own
// `large` before MPI_Init or when the type cannot be made.
#define MPIACC_AS_INT(n, count, type, large, twin) \
    do {                                           \
        if (!context().initialized) return large;  \
        IntCount n(count, type);                   \
        if (!n.ok()) return large;                 \
        return twin;                               \
    } while (0)

extern "C" {

int MPI_Send_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    MPIACC_AS_INT(n, count, type, PMPI_Send_c(buf, count, type, dest, tag, comm),
                  MPI_Send(buf, n.count(), n.type(), dest, tag, comm));
}
int MPI_Bsend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    MPIACC_AS_INT(n, count, type, PMPI_Bsend_c(buf, count, type, dest, tag, comm),
                  MPI_Bsend(buf, n.count(), n.type(), dest, tag, comm));
}
int MPI_Ssend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    MPIACC_AS_INT(n, count, type, PMPI_Ssend_c(buf, count, type, dest, tag, comm),
                  MPI_Ssend(buf, n.count(), n.type(), dest, tag, comm));
}
int MPI_Rsend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    MPIACC_AS_INT(n, count, type, PMPI_Rsend_c(buf, count, type, dest, tag, comm),
                  MPI_Rsend(buf, n.count(), n.type(), dest, tag, comm));
}

int MPI_Isend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Isend_c(buf, count, type, dest, tag, comm, req),
                  MPI_Isend(buf, n.count(), n.type(), dest, tag, comm, req));
}
int MPI_Ibsend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                 MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Ibsend_c(buf, count, type, dest, tag, comm, req),
                  MPI_Ibsend(buf, n.count(), n.type(), dest, tag, comm, req));
}
int MPI_Issend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                 MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Issend_c(buf, count, type, dest, tag, comm, req),
                  MPI_Issend(buf, n.count(), n.type(), dest, tag, comm, req));
}
int MPI_Irsend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                 MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Irsend_c(buf, count, type, dest, tag, comm, req),
                  MPI_Irsend(buf, n.count(), n.type(), dest, tag, comm, req));
}

int MPI_Recv_c(void *buf, MPI_Count count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
               MPI_Status *status) {
    MPIACC_AS_INT(n, count, type, PMPI_Recv_c(buf, count, type, source, tag, comm, status),
                  MPI_Recv(buf, n.count(), n.type(), source, tag, comm, status));
}
int MPI_Irecv_c(void *buf, MPI_Count count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Irecv_c(buf, count, type, source, tag, comm, req),
                  MPI_Irecv(buf, n.count(), n.type(), source, tag, comm, req));
}
int MPI_Mrecv_c(void *buf, MPI_Count count, MPI_Datatype type, MPI_Message *message, MPI_Status *status) {
    MPIACC_AS_INT(n, count, type, PMPI_Mrecv_c(buf, count, type, message, status),
                  MPI_Mrecv(buf, n.count(), n.type(), message, status));
}
int MPI_Imrecv_c(void *buf, MPI_Count count, MPI_Datatype type, MPI_Message *message, MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Imrecv_c(buf, count, type, message, req),
                  MPI_Imrecv(buf, n.count(), n.type(), message, req));
}

int MPI_Sendrecv_c(const void *sbuf, MPI_Count scount, MPI_Datatype stype, int dest, int stag, void *rbuf,
                   MPI_Count rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status *status) {
    auto large = [&] {
        return PMPI_Sendrecv_c(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, status);
    };
    if (!context().initialized) return large();
    IntCount s(scount, stype), r(rcount, rtype);
    if (!s.ok() || !r.ok()) return large();
    return MPI_Sendrecv(sbuf, s.count(), s.type(), dest, stag, rbuf, r.count(), r.type(), source, rtag, comm, status);
}
int MPI_Sendrecv_replace_c(void *buf, MPI_Count count, MPI_Datatype type, int dest, int stag, int source, int rtag,
                           MPI_Comm comm, MPI_Status *status) {
    MPIACC_AS_INT(n, count, type, PMPI_Sendrecv_replace_c(buf, count, type, dest, stag, source, rtag, comm, status),
                  MPI_Sendrecv_replace(buf, n.count(), n.type(), dest, stag, source, rtag, comm, status));
}

int MPI_Isendrecv_c(const void *sbuf, MPI_Count scount, MPI_Datatype stype, int dest, int stag, void *rbuf,
                    MPI_Count rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Request *req) {
    auto large = [&] {
        return PMPI_Isendrecv_c(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, req);
    };
    if (!context().initialized) return large();
    IntCount s(scount, stype), r(rcount, rtype);
    if (!s.ok() || !r.ok()) return large();
    return MPI_Isendrecv(sbuf, s.count(), s.type(), dest, stag, rbuf, r.count(), r.type(), source, rtag, comm, req);
}
int MPI_Isendrecv_replace_c(void *buf, MPI_Count count, MPI_Datatype type, int dest, int stag, int source, int rtag,
                            MPI_Comm comm, MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Isendrecv_replace_c(buf, count, type, dest, stag, source, rtag, comm, req),
                  MPI_Isendrecv_replace(buf, n.count(), n.type(), dest, stag, source, rtag, comm, req));
}

int MPI_Send_init_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                    MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Send_init_c(buf, count, type, dest, tag, comm, req),
                  MPI_Send_init(buf, n.count(), n.type(), dest, tag, comm, req));
}
int MPI_Bsend_init_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                     MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Bsend_init_c(buf, count, type, dest, tag, comm, req),
                  MPI_Bsend_init(buf, n.count(), n.type(), dest, tag, comm, req));
}
int MPI_Ssend_init_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                     MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Ssend_init_c(buf, count, type, dest, tag, comm, req),
                  MPI_Ssend_init(buf, n.count(), n.type(), dest, tag, comm, req));
}
int MPI_Rsend_init_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                     MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Rsend_init_c(buf, count, type, dest, tag, comm, req),
                  MPI_Rsend_init(buf, n.count(), n.type(), dest, tag, comm, req));
}
int MPI_Recv_init_c(void *buf, MPI_Count count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                    MPI_Request *req) {
    MPIACC_AS_INT(n, count, type, PMPI_Recv_init_c(buf, count, type, source, tag, comm, req),
                  MPI_Recv_init(buf, n.count(), n.type(), source, tag, comm, req));
}

}  // extern "C"
