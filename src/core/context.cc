#include "core/context.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <unistd.h>

#include "accel/accel.h"
#include "core/buffer_desc.h"
#include "core/progress.h"
#include "mpiacc.h"
#include "netmod/netmod.h"
#include "util/node_identity.h"
#include "util/probe.h"
#include "pool/shared_memory.h"

// The public keyvals (DESIGN.md 1): valid after MPI_Init.
extern "C" {
int MPIX_ACC_BUF_TYPE = MPI_KEYVAL_INVALID;
int MPIX_ACC_STREAM = MPI_KEYVAL_INVALID;
int MPIX_ACC_COMMAND_QUEUE = MPI_KEYVAL_INVALID;
int MPIX_ACC_EVENT = MPI_KEYVAL_INVALID;
int MPIX_ACC_CONTEXT = MPI_KEYVAL_INVALID;
int MPIX_ACC_DEVICE = MPI_KEYVAL_INVALID;
int MPIX_ACC_OFFSET = MPI_KEYVAL_INVALID;
}

namespace mpiacc {

namespace {

// What the accelerator components are given of the knobs (they read none themselves).
AccelSettings accel_settings_from(const Knobs &k, int world_rank) {
    AccelSettings s;
    s.world_rank = world_rank;
    s.verbose = k.verbose;
    s.slot_size = k.chunk_size;
    s.pool_bytes = k.pool_size;
    s.ipc = k.ipc;
    s.shared_staging = k.shared_staging;
    s.opencl_platform = k.opencl_platform;
    s.opencl_cache_off = k.test_opencl_no_cache;
    s.fault_pull = k.fault_pull;
    s.fault_memop = k.fault_memop;
    s.fault_resident = k.fault_resident;
    s.cuda_kernel_copy_max = k.cuda_kernel_copy_max;
    s.cuda_resident_idle_us = k.test_resident_idle_us;
    return s;
}

void load_knobs(Context &ctx) {
    ctx.knob_errors.clear();
    ctx.knobs = Knobs::from_environment(&ctx.knob_errors);
    configure_accels(accel_settings_from(ctx.knobs, ctx.world_rank));
}

Context *make_context() {
    auto *ctx = new Context();  // lives for the process: atexit order must not matter
    load_knobs(*ctx);
    return ctx;
}

void progress_thread_main() {
    Context &ctx = context();
    while (!ctx.stop_progress_thread.load()) {
        if (ctx.pending.get() != 0) {
            progress_poke();
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
}

}  // namespace

namespace detail {
Context *const the_context = make_context();
}  // namespace detail

const Knobs &knobs() { return context().knobs; }

const Knobs &reload_knobs() {
    Context &ctx = context();
    load_knobs(ctx);
    return ctx.knobs;
}

int initialize_context(int provided_thread_level) {
    Context &ctx = context();
    ctx.thread_level = provided_thread_level;
    ctx.locking = provided_thread_level == MPI_THREAD_MULTIPLE || ctx.knobs.async_progress;
    PMPI_Comm_rank(MPI_COMM_WORLD, &ctx.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &ctx.world_size);
    configure_accels(accel_settings_from(ctx.knobs, ctx.world_rank));
    int rc = PMPI_Comm_dup(MPI_COMM_WORLD, &ctx.proto_comm);
    if (rc != MPI_SUCCESS) return rc;
    PMPI_Comm_set_name(ctx.proto_comm, "MPI-ACC protocol");
    // Protocol errors are handled, never fatal, on the private communicator.
    PMPI_Comm_set_errhandler(ctx.proto_comm, MPI_ERRORS_RETURN);
    NetmodOptions netmod_options;
    netmod_options.world_rank = ctx.world_rank;
    netmod_options.world_size = ctx.world_size;
    netmod_options.same_node = same_node;
    netmod_options.ib_policy = ctx.knobs.test_ib;
    netmod_options.ib_devices = ctx.knobs.test_ib_devices;
    netmod_options.fault_rkey = ctx.knobs.fault_rkey;
    rc = initialize_netmod(ctx.proto_comm, netmod_options);
    if (rc != MPI_SUCCESS) return rc;
    rc = PMPI_Comm_dup(MPI_COMM_WORLD, &ctx.meeting_comm);
    if (rc != MPI_SUCCESS) return rc;
    PMPI_Comm_set_name(ctx.meeting_comm, "MPI-ACC meetings");
    PMPI_Comm_set_errhandler(ctx.meeting_comm, MPI_ERRORS_RETURN);
    int *tag_ub = nullptr, flag = 0;
    PMPI_Comm_get_attr(ctx.proto_comm, MPI_TAG_UB, &tag_ub, &flag);
    if (flag && tag_ub) ctx.tag_ub = *tag_ub;
    ctx.node_id = local_node_id();
    ctx.pid_namespace = local_pid_namespace();
    ctx.pid = static_cast<int>(getpid());
    // Who shares this node decides, before any envelope, whether a device send may take
    // the IPC pull rather than the staged eager path.
    ctx.node_ids.assign(ctx.world_size, 0);
    rc = PMPI_Allgather(&ctx.node_id, 1, MPI_UINT64_T, ctx.node_ids.data(), 1, MPI_UINT64_T, ctx.proto_comm);
    if (rc != MPI_SUCCESS) return rc;

    int *publics[] = {&MPIX_ACC_BUF_TYPE, &MPIX_ACC_STREAM, &MPIX_ACC_COMMAND_QUEUE, &MPIX_ACC_EVENT,
                      &MPIX_ACC_CONTEXT,  &MPIX_ACC_DEVICE, &MPIX_ACC_OFFSET};
    int *ours[] = {&ctx.keyvals.buf_type, &ctx.keyvals.stream, &ctx.keyvals.command_queue, &ctx.keyvals.event,
                   &ctx.keyvals.context,  &ctx.keyvals.device, &ctx.keyvals.offset};
    for (int i = 0; i < 7; ++i) {
        rc = PMPI_Type_create_keyval(attr_copy_callback, attr_delete_callback, ours[i], nullptr);
        if (rc != MPI_SUCCESS) return rc;
        *publics[i] = *ours[i];
    }
    // CUDA-aware autodetection: the kind that finds its own pointers (AccelCaps).
    if (ctx.knobs.cuda_autodetect) {
        for (BufKind kind : kAllBufKinds) {
            if (!accel_caps(kind).detects_pointers) continue;
            Accel *accel = accel_for(kind);
            if (!accel || !accel->available()) continue;
            ctx.autodetect_active = true;
            ctx.detecting_accel = accel;
            ctx.known_host = accel->known_host_memory();
            break;
        }
    }
    // Known to all ranks alike, as the collectives' choice of path must be.
    Accel *cuda = accel_for(BufKind::CUDA);
    int cuda_here = cuda && cuda->available(), cuda_anywhere = 0;
    rc = PMPI_Allreduce(&cuda_here, &cuda_anywhere, 1, MPI_INT, MPI_LOR, ctx.proto_comm);
    if (rc != MPI_SUCCESS) return rc;
    ctx.device_collectives = cuda_anywhere != 0 || ctx.knobs.test_coll_agree;
    if (ctx.world_rank == 0)
        for (const std::string &e : ctx.knob_errors) std::fprintf(stderr, "MPI-ACC warning: %s\n", e.c_str());
    ctx.initialized = true;
    return MPI_SUCCESS;
}

void start_progress_thread() {
    Context &ctx = context();
    if (!ctx.knobs.async_progress) return;
    if (ctx.thread_level == MPI_THREAD_MULTIPLE)
        ctx.progress_thread = std::thread(progress_thread_main);
    else if (ctx.world_rank == 0)
        std::fprintf(stderr,
                     "MPI-ACC warning: MPIACC_ASYNC_PROGRESS=1 needs MPI_THREAD_MULTIPLE, which MPICH "
                     "did not provide; progress stays in MPI calls\n");
}

void stop_progress_thread() {
    Context &ctx = context();
    if (!ctx.progress_thread.joinable()) return;
    ctx.stop_progress_thread = true;
    ctx.progress_thread.join();
}

void destroy_ops() {
    Context &ctx = context();
    StateLock lock;
    ctx.retired_ops.clear();
    ctx.user_ops.clear();
    ctx.detached_ops.clear();
}

void forget_pending() { context().pending.reset(); }

void finalize_context() {
    Context &ctx = context();
    if (!ctx.initialized) return;
    StateLock lock;
#ifdef MPIACC_PROBES
    write_probes(ctx.world_rank);
#endif
    for (int *kv : {&ctx.keyvals.buf_type, &ctx.keyvals.stream, &ctx.keyvals.command_queue, &ctx.keyvals.event,
                    &ctx.keyvals.context, &ctx.keyvals.device, &ctx.keyvals.offset})
        if (*kv != MPI_KEYVAL_INVALID) PMPI_Type_free_keyval(kv);
    // Both ranks are done with every transfer before either destroys its queue pairs, so
    // no RDMA write is in flight to a queue pair that is gone.
    if (ctx.proto_comm != MPI_COMM_NULL) PMPI_Barrier(ctx.proto_comm);
    finalize_netmod();
    if (ctx.proto_comm != MPI_COMM_NULL) PMPI_Comm_free(&ctx.proto_comm);
    if (ctx.meeting_comm != MPI_COMM_NULL) PMPI_Comm_free(&ctx.meeting_comm);
    ctx.initialized = false;
    ctx.autodetect_active = false;
    ctx.detecting_accel = nullptr;
    ctx.known_host = KnownHostGranules{};
}

bool same_node(int world_peer) {
    Context &ctx = context();
    return world_peer >= 0 && world_peer < static_cast<int>(ctx.node_ids.size()) &&
           ctx.node_ids[world_peer] == ctx.node_id;
}

bool ipc_pull_offered(BufKind kind, int world_peer) {
    return accel_caps(kind).ipc && context().knobs.ipc && same_node(world_peer);
}

bool ipc_pull_offered(BufKind kind, MPI_Comm comm, int dest) {
    return accel_caps(kind).ipc && ipc_pull_offered(kind, world_rank_of(comm, dest));
}

int world_rank_of(MPI_Comm comm, int rank) {
    if (comm == MPI_COMM_WORLD) return rank;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    MPI_Group group, world;
    if (inter)
        PMPI_Comm_remote_group(comm, &group);
    else
        PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    int out = MPI_UNDEFINED;
    PMPI_Group_translate_ranks(group, 1, &rank, world, &out);
    PMPI_Group_free(&group);
    PMPI_Group_free(&world);
    return out;
}

}  // namespace mpiacc

// Tests and benchmarks size their messages by the knobs in effect, without parsing the
// environment or repeating the defaults.
extern "C" __attribute__((visibility("default"))) long long mpiacc_knob_value(const char *name) {
    const std::string text = mpiacc::knobs().value_text(name);
    if (text.empty()) return -1;
    char *end = nullptr;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    return *end == '\0' ? value : -1;
}
