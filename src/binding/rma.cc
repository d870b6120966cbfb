// One-sided communication takes host memory only: device windows and device origin
// buffers are not supported yet. Straight to MPICH, a device origin buffer would be read
// or written as host memory (a CUDA pointer faults; a cl_mem handle is the address of a
// driver object). So an origin or result
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
// MPICH's MPI_Win_start waits for the targets' MPI_Win_post, which a target whose
// receive needs this rank's transfer never reaches; so post and start synchronise on the
// private communicator instead, with progress (MPI_Win_post below). Not covered: the
// large-count window constructors.
#include <vector>

#include "binding/binding.h"
#include "binding/meeting_comms.h"

using namespace mpiacc;

namespace {

constexpr const char *kRefusal = "one-sided communication on device buffers is not supported yet";

// MPI_SUCCESS, or the error raised on win for argument `arg`.
int require_host(const void *buf, MPI_Datatype type, MPI_Win win, const char *call, const char *arg) {
    std::string why;
    int rc = require_host_buffer(buf, type, arg, kRefusal, &why);
    if (rc == MPI_SUCCESS) return rc;
    int code = make_error_code(rc, call, why);
    call_win_errhandler(win, code);
    return code;
}

// Windows' meeting communicators.
MeetingComms<MPI_Win> windows;

// The ranks in win's communicator of the members of `group` (a group of win's
// processes); false, with nothing to do, when the group is not one MPICH accepts.
bool window_ranks(MPI_Group group, MPI_Win win, std::vector<int> *out) {
    int n = 0;
    if (PMPI_Group_size(group, &n) != MPI_SUCCESS) return false;
    MPI_Group window_group;
    if (PMPI_Win_get_group(win, &window_group) != MPI_SUCCESS) return false;
    std::vector<int> in(n);
    for (int i = 0; i < n; ++i) in[i] = i;
    out->assign(n, MPI_UNDEFINED);
    int rc = n == 0 ? MPI_SUCCESS : PMPI_Group_translate_ranks(group, n, in.data(), window_group, out->data());
    PMPI_Group_free(&window_group);
    return rc == MPI_SUCCESS;
}

// A target's word to each origin of its exposure epoch that it has posted: an empty
// message on the window's private communicator (tag 0 there is never used otherwise).
// Epochs of one window match in order, as the messages of one pair and tag do.
constexpr int kPostedTag = 0;

}  // namespace

// Returns from the calling wrapper when (buf, type) is not host memory.
#define MPIACC_RMA_HOST(buf, type, arg)                    \
    do {                                                   \
        int rc_ = require_host(buf, type, win, call, arg); \
        if (rc_ != MPI_SUCCESS) return rc_;                \
    } while (0)
#define MPIACC_RMA_ENTRY(name, passthrough) \
    const char *call = name;                \
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

int MPI_Compare_and_swap(const void *obuf, const void *cbuf, void *rbuf, MPI_Datatype type, int target, MPI_Aint tdisp,
                         MPI_Win win) {
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
    if (ctx.initialized && ctx.autodetect_active && base != nullptr && size > 0) {
        std::string why;
        int rc = require_host_buffer(base, MPI_BYTE, "base", kRefusal, &why);
        if (rc != MPI_SUCCESS) return raise_error(comm, rc, "MPI_Win_create", why);
    }
    return windows.create(comm, win, [&] { return PMPI_Win_create(base, size, disp_unit, info, comm, win); });
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) {
    return windows.create(comm, win, [&] { return PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win); });
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) {
    return windows.create(comm, win,
                          [&] { return PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win); });
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win) {
    return windows.create(comm, win, [&] { return PMPI_Win_create_dynamic(info, comm, win); });
}

int MPI_Win_fence(int assert, MPI_Win win) {
    int rc = windows.meet(win);
    return rc != MPI_SUCCESS ? rc : PMPI_Win_fence(assert, win);
}

int MPI_Win_free(MPI_Win *win) {
    return windows.destroy(win, [&] { return PMPI_Win_free(win); });
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

// PSCW synchronisation moves out of MPICH onto the window's private communicator: a
// target's MPI_Win_post sends each origin an empty notice after MPICH's post, and an
// origin's MPI_Win_start waits for its targets' notices, driving MPI-ACC meanwhile (the
// standard lets MPI_Win_start block until the matching posts). MPICH then gets
// MPI_MODE_NOCHECK on both sides, which is exactly what the notices establish: every
// matching post has completed before the start. Besides the progress rule this avoids
// MPICH 4.0.2's own post counting, in which a start hangs when the post of a later epoch
// has also arrived by then (its wait is `while (group size != posts seen)`): our
// notices wait in order, one per target and epoch. A user's MPI_MODE_NOCHECK goes to
// MPICH as given, with no notices (the standard requires it on both sides).
int MPI_Win_post(MPI_Group group, int assert, MPI_Win win) {
    MPI_Comm meet = windows.of(win);
    std::vector<int> origins;
    if (meet == MPI_COMM_NULL || (MPI_MODE_NOCHECK & assert) || !window_ranks(group, win, &origins))
        return PMPI_Win_post(group, assert, win);
    int rc = PMPI_Win_post(group, assert | MPI_MODE_NOCHECK, win);
    if (rc != MPI_SUCCESS) return rc;
    for (int r : origins) {
        if (r == MPI_UNDEFINED) continue;
        MPI_Request req;
        // Empty, so MPICH sends it at once; nothing waits for it here.
        rc = PMPI_Isend(nullptr, 0, MPI_BYTE, r, kPostedTag, meet, &req);
        if (rc == MPI_SUCCESS) rc = PMPI_Request_free(&req);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

int MPI_Win_start(MPI_Group group, int assert, MPI_Win win) {
    MPI_Comm meet = windows.of(win);
    std::vector<int> targets;
    if (meet == MPI_COMM_NULL || (MPI_MODE_NOCHECK & assert) || !window_ranks(group, win, &targets))
        return PMPI_Win_start(group, assert, win);
    std::vector<MPI_Request> notices;
    notices.reserve(targets.size());
    for (int r : targets) {
        if (r == MPI_UNDEFINED) continue;
        notices.push_back(MPI_REQUEST_NULL);
        int rc = PMPI_Irecv(nullptr, 0, MPI_BYTE, r, kPostedTag, meet, &notices.back());
        if (rc != MPI_SUCCESS) return rc;
    }
    int rc = wait_each(notices);
    return rc != MPI_SUCCESS ? rc : PMPI_Win_start(group, assert | MPI_MODE_NOCHECK, win);
}

int MPI_Win_attach(MPI_Win win, void *base, MPI_Aint size) {
    const Context &ctx = context();
    if (ctx.initialized && ctx.autodetect_active && base != nullptr && size > 0) {
        const char *call = "MPI_Win_attach";
        MPIACC_RMA_HOST(base, MPI_BYTE, "base");
    }
    return PMPI_Win_attach(win, base, size);
}

}  // extern "C"
