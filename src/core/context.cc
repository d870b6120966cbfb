#include "core/context.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <unistd.h>

#include "accel/accel.h"
#include "core/buffer_desc.h"
#include "core/chunk_trace.h"
#include "util/probe.h"
#include "core/progress.h"
#include "mpiacc.h"
#include "pool/host_staging.h"
#include "pool/shared_memory.h"
#include "protocol/envelope.h"
#include "protocol/fin_words.h"
#include "protocol/transfer.h"

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
    s.opencl_cache_entries = k.opencl_cache_size;
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
    ctx.plain_send_below.store(plain_send_limit(ctx.knobs), std::memory_order_relaxed);
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

std::size_t plain_send_limit(const Knobs &k) {
    const std::size_t below = k.host_rndv_threshold ? k.host_rndv_threshold : SIZE_MAX;
    const std::size_t hinted_from = host_rndv_hint_floor(k);
    return hinted_from ? std::min(below, hinted_from) : below;
}

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
    ctx.eager_sends_left = std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(ctx.world_size));
    ctx.eager_run = std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(ctx.world_size));
    ctx.eager_blocking_only = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(ctx.world_size));
    // With it, where each rank's FIN words are (protocol/fin_words.h), in the same exchange.
    struct PeerFacts {
        std::uint64_t node_id;
        FinWordsOffer fin_words;
    };
    const PeerFacts mine{ctx.node_id, open_fin_words(ctx.pid, ctx.pid_namespace)};
    std::vector<PeerFacts> facts(static_cast<std::size_t>(ctx.world_size));
    rc = PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, facts.data(), sizeof mine, MPI_BYTE, ctx.proto_comm);
    if (rc != MPI_SUCCESS) return rc;
    std::unordered_map<int, FinWordsOffer> offers;  // only a rank on this node pulls
    for (std::size_t r = 0; r < facts.size(); ++r) {
        ctx.node_ids[r] = facts[r].node_id;
        if (facts[r].node_id == ctx.node_id && facts[r].fin_words.words != 0)
            offers.emplace(static_cast<int>(r), facts[r].fin_words);
    }
    set_peer_fin_words(std::move(offers));

    int *publics[] = {&MPIX_ACC_BUF_TYPE, &MPIX_ACC_STREAM, &MPIX_ACC_COMMAND_QUEUE, &MPIX_ACC_EVENT,
                      &MPIX_ACC_CONTEXT,  &MPIX_ACC_DEVICE, &MPIX_ACC_OFFSET};
    int *ours[] = {&ctx.keyvals.buf_type, &ctx.keyvals.stream, &ctx.keyvals.command_queue, &ctx.keyvals.event,
                   &ctx.keyvals.context,  &ctx.keyvals.device, &ctx.keyvals.offset};
    for (int i = 0; i < 7; ++i) {
        rc = PMPI_Type_create_keyval(attr_copy_callback, attr_delete_callback, ours[i], nullptr);
        if (rc != MPI_SUCCESS) return rc;
        *publics[i] = *ours[i];
    }
    if (ctx.knobs.cuda_autodetect && accel_built(BufKind::CUDA)) {
        Accel *cuda = accel_for(BufKind::CUDA);
        ctx.cuda_autodetect_active = cuda && cuda->available();
        if (ctx.cuda_autodetect_active) {
            ctx.cuda_accel = cuda;
            ctx.known_host = cuda->known_host_memory();
        }
    }
    if (ctx.world_rank == 0)
        for (const std::string &e : ctx.knob_errors) std::fprintf(stderr, "MPI-ACC warning: %s\n", e.c_str());
    ctx.initialized = true;
    if (ctx.knobs.async_progress) {
        if (provided_thread_level == MPI_THREAD_MULTIPLE)
            ctx.progress_thread = std::thread(progress_thread_main);
        else if (ctx.world_rank == 0)
            std::fprintf(stderr,
                         "MPI-ACC warning: MPIACC_ASYNC_PROGRESS=1 needs MPI_THREAD_MULTIPLE, which MPICH "
                         "did not provide; progress stays in MPI calls\n");
    }
    return MPI_SUCCESS;
}

void finalize_context() {
    Context &ctx = context();
    if (!ctx.initialized) return;
    // Transfers the user can no longer wait for (freed requests, buffered sends) still
    // have to reach their receivers. Receives nobody waits for are cancelled.
    {
        StateLock lock;
        for (auto &op : ctx.detached_ops)
            if (dynamic_cast<RecvOp *>(op.get())) op->cancel();
        cancel_detached_host_recvs();
    }
    progress_until([&] {
        StateLock lock;
        return ctx.detached_ops.empty() && !detached_host_recvs_left();
    });
    if (ctx.progress_thread.joinable()) {
        ctx.stop_progress_thread = true;
        ctx.progress_thread.join();
    }
    StateLock lock;
    if (ctx.knobs.verbose >= 3) print_chunk_trace();
#ifdef MPIACC_PROBES
    write_probes(ctx.world_rank);
#endif
    ctx.retired_ops.clear();
    ctx.user_ops.clear();
    ctx.host_staging.reset();  // no send is left to read it, and receivers finished with each chunk
    ctx.host_chunks.reset();   // every chunk send in it has completed or been retired
    release_all_host_recvs();
    ctx.stash.clear();
    ctx.probed_messages.clear();
    ctx.pending.reset();
    finish_peer_hints();
    drain_control_messages();
    clear_bounce_cache();
    shutdown_accels();
    close_fin_words();      // no transfer is left to write or read them
    unmap_peer_segments();  // the accelerators' registrations of them are gone now
    for (int *kv : {&ctx.keyvals.buf_type, &ctx.keyvals.stream, &ctx.keyvals.command_queue, &ctx.keyvals.event,
                    &ctx.keyvals.context, &ctx.keyvals.device, &ctx.keyvals.offset})
        if (*kv != MPI_KEYVAL_INVALID) PMPI_Type_free_keyval(kv);
    if (ctx.proto_comm != MPI_COMM_NULL) PMPI_Comm_free(&ctx.proto_comm);
    if (ctx.meeting_comm != MPI_COMM_NULL) PMPI_Comm_free(&ctx.meeting_comm);
    ctx.initialized = false;
    ctx.cuda_autodetect_active = false;
    ctx.cuda_accel = nullptr;
    ctx.known_host = KnownHostGranules{};
}

namespace {
// A host pool of chunk-sized slots, made on first use and kept to MPI_Finalize.
PinnedPool *host_pool(std::unique_ptr<PinnedPool> *pool,
                      std::unique_ptr<PinnedPool> (*make)(std::size_t slot_size, std::size_t capacity_bytes)) {
    const Context &ctx = context();
    if (!*pool)
        *pool = make(static_cast<std::size_t>(ctx.knobs.chunk_size), static_cast<std::size_t>(ctx.knobs.pool_size));
    return pool->get();
}
}  // namespace

PinnedPool *host_staging_pool() { return host_pool(&context().host_staging, make_host_staging_pool); }

PinnedPool *host_chunk_pool() { return host_pool(&context().host_chunks, make_host_chunk_pool); }

bool same_node(int world_peer) {
    Context &ctx = context();
    return world_peer >= 0 && world_peer < static_cast<int>(ctx.node_ids.size()) &&
           ctx.node_ids[world_peer] == ctx.node_id;
}

bool ipc_pull_offered(BufKind kind, int world_peer) {
    return kind == BufKind::CUDA && context().knobs.ipc && same_node(world_peer);
}

bool ipc_pull_offered(BufKind kind, MPI_Comm comm, int dest) {
    return kind == BufKind::CUDA && ipc_pull_offered(kind, world_rank_of(comm, dest));
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
