// One-sided communication takes host memory only: device windows and device origin
// buffers are not supported yet (ROADMAP 8 starts from them). Before session 18 a device
// origin buffer reached MPICH, which read or wrote it as host memory (a CUDA pointer
// faults; a cl_mem handle is the address of a driver object). Now an origin or result
// buffer tagged with a device MPIX_ACC_BUF_TYPE, or found to be CUDA memory, and a window
// base found to be CUDA memory, get MPI_ERR_UNSUPPORTED_OPERATION through the window's
// error handler (the communicator's, for MPI_Win_create), naming the call and the
// argument, before MPICH sees them. A window base has no datatype, so only CUDA memory
// is recognised there.
//
// The progress rule (DESIGN 2.6) in the window calls that block in MPICH until other
// processes act. Window creation and MPI_Win_free are collective, and MPI_Win_fence
// acts like a barrier: a member with a transfer in flight would sit in MPICH while its
// receiver, not yet in the call, waits in MPI_Recv for the data. Each first meets the
// window's members in a nonblocking barrier with MPI-ACC progress (communicator.cc
// explains why that suffices), on a private duplicate of the window's communicator made
// at creation, since the user may free theirs. Every time, on every member, so all make
// the same calls. MPI_Win_wait waits through MPI_Win_test while transfers are in flight.
// Not covered: MPI_Win_start and MPI_Win_complete, which MPICH may also block in, and the
// large-count forms.
#include <mutex>
#include <unordered_map>

#include "binding/binding.h"

using namespace mpiacc;

namespace {

constexpr const char *kRefusal = "one-sided communication on device buffers is not supported yet";

// MPI_SUCCESS, or the error raised on win for argument `arg`.
int require_host(const void *buf, MPI_Datatype type, MPI_Win win, const char *call, const char *arg) {
    std::string why;
    int rc = require_host_buffer(buf, type, arg, kRefusal, &why);
    if (rc == MPI_SUCCESS) return rc;
    int code = make_error_code(rc, call, why);
    PMPI_Win_call_errhandler(win, code);
    return code;
}

// Window -> the private duplicate of its communicator where its members meet.
std::mutex windows_mutex;
std::unordered_map<MPI_Win, MPI_Comm> &window_comms() {
    static auto *comms = new std::unordered_map<MPI_Win, MPI_Comm>;  // outlives static destructors
    return *comms;
}

MPI_Comm meeting_comm_of(MPI_Win win) {
    std::lock_guard<std::mutex> lock(windows_mutex);
    auto it = window_comms().find(win);
    return it == window_comms().end() ? MPI_COMM_NULL : it->second;
}

// Runs a window constructor `make` (which sets *win) after the members of comm have met,
// then records a duplicate of comm for the window's later meetings.
template <typename Make>
int create_window(MPI_Comm comm, MPI_Win *win, Make make) {
    if (!context().initialized || comm == MPI_COMM_NULL) return make();
    int rc = meet_members(comm);
    if (rc != MPI_SUCCESS) return rc;
    rc = make();
    if (rc != MPI_SUCCESS) return rc;
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Request r;
    rc = PMPI_Comm_idup(comm, &dup, &r);
    if (rc == MPI_SUCCESS) rc = wait_mpich_request(&r, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    std::lock_guard<std::mutex> lock(windows_mutex);
    window_comms()[*win] = dup;
    return MPI_SUCCESS;
}

}  // namespace

// Returns from the calling wrapper when (buf, type) is not host memory.
#define MPIACC_RMA_HOST(buf, type, arg)                          \
    do {                                                         \
        int rc_ = require_host(buf, type, win, call, arg);       \
        if (rc_ != MPI_SUCCESS) return rc_;                      \
    } while (0)
#define MPIACC_RMA_ENTRY(name, passthrough)                           \
    const char *call = name;                                          \
    if (!context().initialized || only_host_buffers(context())) return passthrough

extern "C" {

int MPI_Put(const void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
            MPI_Datatype ttype, MPI_Win win) {
    MPIACC_RMA_ENTRY("MPI_Put", PMPI_Put(obuf, ocount, otype, target, tdisp, tcount, ttype, win));
    MPIACC_RMA_HOST(obuf, otype, "origin_addr");
    return PMPI_Put(obuf, ocount, otype, target, tdisp, tcount, ttype, win);
}

int MPI_Get(void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype,
            MPI_Win win) {
    MPIACC_RMA_ENTRY("MPI_Get", PMPI_Get(obuf, ocount, otype, target, tdisp, tcount, ttype, win));
    MPIACC_RMA_HOST(obuf, otype, "origin_addr");
    return PMPI_Get(obuf, ocount, otype, target, tdisp, tcount, ttype, win);
}

int MPI_Accumulate(const void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
                   MPI_Datatype ttype, MPI_Op op, MPI_Win win) {
    MPIACC_RMA_ENTRY("MPI_Accumulate", PMPI_Accumulate(obuf, ocount, otype, target, tdisp, tcount, ttype, op, win));
    MPIACC_RMA_HOST(obuf, otype, "origin_addr");
    return PMPI_Accumulate(obuf, ocount, otype, target, tdisp, tcount, ttype, op, win);
}

int MPI_Get_accumulate(const void *obuf, int ocount, MPI_Datatype otype, void *rbuf, int rcount, MPI_Datatype rtype,
                       int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Op op, MPI_Win win) {
    MPIACC_RMA_ENTRY("MPI_Get_accumulate", PMPI_Get_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, target, tdisp,
                                                                tcount, ttype, op, win));
    if (op != MPI_NO_OP) MPIACC_RMA_HOST(obuf, otype, "origin_addr");  // not read with MPI_NO_OP
    MPIACC_RMA_HOST(rbuf, rtype, "result_addr");
    return PMPI_Get_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, target, tdisp, tcount, ttype, op, win);
}

int MPI_Fetch_and_op(const void *obuf, void *rbuf, MPI_Datatype type, int target, MPI_Aint tdisp, MPI_Op op,
                     MPI_Win win) {
    MPIACC_RMA_ENTRY("MPI_Fetch_and_op", PMPI_Fetch_and_op(obuf, rbuf, type, target, tdisp, op, win));
    if (op != MPI_NO_OP) MPIACC_RMA_HOST(obuf, type, "origin_addr");
    MPIACC_RMA_HOST(rbuf, type, "result_addr");
    return PMPI_Fetch_and_op(obuf, rbuf, type, target, tdisp, op, win);
}

int MPI_Compare_and_swap(const void *obuf, const void *cbuf, void *rbuf, MPI_Datatype type, int target,
                         MPI_Aint tdisp, MPI_Win win) {
    MPIACC_RMA_ENTRY("MPI_Compare_and_swap", PMPI_Compare_and_swap(obuf, cbuf, rbuf, type, target, tdisp, win));
    MPIACC_RMA_HOST(obuf, type, "origin_addr");
    MPIACC_RMA_HOST(cbuf, type, "compare_addr");
    MPIACC_RMA_HOST(rbuf, type, "result_addr");
    return PMPI_Compare_and_swap(obuf, cbuf, rbuf, type, target, tdisp, win);
}

int MPI_Rput(const void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
             MPI_Datatype ttype, MPI_Win win, MPI_Request *req) {
    MPIACC_RMA_ENTRY("MPI_Rput", PMPI_Rput(obuf, ocount, otype, target, tdisp, tcount, ttype, win, req));
    MPIACC_RMA_HOST(obuf, otype, "origin_addr");
    return PMPI_Rput(obuf, ocount, otype, target, tdisp, tcount, ttype, win, req);
}

int MPI_Rget(void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype,
             MPI_Win win, MPI_Request *req) {
    MPIACC_RMA_ENTRY("MPI_Rget", PMPI_Rget(obuf, ocount, otype, target, tdisp, tcount, ttype, win, req));
    MPIACC_RMA_HOST(obuf, otype, "origin_addr");
    return PMPI_Rget(obuf, ocount, otype, target, tdisp, tcount, ttype, win, req);
}

int MPI_Raccumulate(const void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
                    MPI_Datatype ttype, MPI_Op op, MPI_Win win, MPI_Request *req) {
    MPIACC_RMA_ENTRY("MPI_Raccumulate",
                     PMPI_Raccumulate(obuf, ocount, otype, target, tdisp, tcount, ttype, op, win, req));
    MPIACC_RMA_HOST(obuf, otype, "origin_addr");
    return PMPI_Raccumulate(obuf, ocount, otype, target, tdisp, tcount, ttype, op, win, req);
}

int MPI_Rget_accumulate(const void *obuf, int ocount, MPI_Datatype otype, void *rbuf, int rcount, MPI_Datatype rtype,
                        int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Op op, MPI_Win win,
                        MPI_Request *req) {
    MPIACC_RMA_ENTRY("MPI_Rget_accumulate", PMPI_Rget_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, target,
                                                                  tdisp, tcount, ttype, op, win, req));
    if (op != MPI_NO_OP) MPIACC_RMA_HOST(obuf, otype, "origin_addr");
    MPIACC_RMA_HOST(rbuf, rtype, "result_addr");
    return PMPI_Rget_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, target, tdisp, tcount, ttype, op, win, req);
}

// A window base is untyped: only CUDA memory found by pointer query is refused.
int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win) {
    const Context &ctx = context();
    if (ctx.initialized && ctx.cuda_autodetect_active && base != nullptr && size > 0) {
        std::string why;
        int rc = require_host_buffer(base, MPI_BYTE, "base", kRefusal, &why);
        if (rc != MPI_SUCCESS) return raise_error(comm, rc, "MPI_Win_create", why);
    }
    return create_window(comm, win, [&] { return PMPI_Win_create(base, size, disp_unit, info, comm, win); });
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) {
    return create_window(comm, win, [&] { return PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win); });
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr,
                            MPI_Win *win) {
    return create_window(comm, win,
                         [&] { return PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win); });
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win) {
    return create_window(comm, win, [&] { return PMPI_Win_create_dynamic(info, comm, win); });
}

int MPI_Win_fence(int assert, MPI_Win win) {
    MPI_Comm meet = context().initialized ? meeting_comm_of(win) : MPI_COMM_NULL;
    if (meet != MPI_COMM_NULL) {
        int rc = meet_members(meet);
        if (rc != MPI_SUCCESS) return rc;
    }
    return PMPI_Win_fence(assert, win);
}

int MPI_Win_free(MPI_Win *win) {
    const MPI_Win handle = *win;
    MPI_Comm meet = context().initialized ? meeting_comm_of(handle) : MPI_COMM_NULL;
    if (meet != MPI_COMM_NULL) {
        int rc = meet_members(meet);
        if (rc != MPI_SUCCESS) return rc;
    }
    int rc = PMPI_Win_free(win);
    if (rc == MPI_SUCCESS && meet != MPI_COMM_NULL) {
        {
            std::lock_guard<std::mutex> lock(windows_mutex);
            window_comms().erase(handle);
        }
        PMPI_Comm_free(&meet);
    }
    return rc;
}

// Not collective: it waits for the origins' MPI_Win_complete. While this rank has
// transfers in flight, one of those origins may be waiting for them.
int MPI_Win_wait(MPI_Win win) {
    if (!context().initialized || !transfers_in_flight()) return PMPI_Win_wait(win);
    for (;;) {
        int flag = 0;
        int rc = PMPI_Win_test(win, &flag);
        if (rc != MPI_SUCCESS || flag) return rc;
        progress_poke();
    }
}

int MPI_Win_attach(MPI_Win win, void *base, MPI_Aint size) {
    const Context &ctx = context();
    if (ctx.initialized && ctx.cuda_autodetect_active && base != nullptr && size > 0) {
        const char *call = "MPI_Win_attach";
        MPIACC_RMA_HOST(base, MPI_BYTE, "base");
    }
    return PMPI_Win_attach(win, base, size);
}

}  // extern "C"
