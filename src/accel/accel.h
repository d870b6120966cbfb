// The accelerator table: one implementation per device kind (host, CUDA, OpenCL).
//
// Protocol and core code never name a vendor API; they capture a buffer through its
// kind's Accel, then move byte ranges of it with the DeviceBuffer the Accel returns.
// Open MPI's opal/mca/accelerator is the model: a table of the few operations a
// transport needs, with a component per vendor.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "accel/known_host.h"

namespace mpiacc {

enum class BufKind : int { HOST = 1, CUDA = 2, OPENCL = 3 };
// Every kind, for code that asks each one rather than naming it.
constexpr BufKind kAllBufKinds[] = {BufKind::HOST, BufKind::CUDA, BufKind::OPENCL};
const char *buf_kind_name(BufKind k);

class PinnedPool;
class FlatType;
struct ReduceSpec;

// What a kind can do, known without making its component: the CUDA and OpenCL runtimes
// are not touched by a program that never passes device memory. Protocol and core ask
// these, never which kind a buffer is.
struct AccelCaps {
    // Buffers live in device memory, which moves through staging copies (host: false).
    bool device_memory = false;
    // ipc_export / ipc_import: a peer process on this node pulls the buffer itself.
    bool ipc = false;
    // owns_pointer answers: buffers passed without MPIX_ACC_BUF_TYPE are found.
    bool detects_pointers = false;
    // A buffer is an opaque handle (cl_mem), not an address: a datatype's lower bound is
    // an offset into it (MPIX_ACC_OFFSET), never pointer arithmetic.
    bool handle_addressed = false;
    // A small nonblocking send is always staged whole at the call when no pull is on offer:
    // every buffer of the kind says yes to DeviceBuffer::stages_nonblocking_sends.
    bool stages_small_isends = false;
    // register_host can page-lock host memory, so that copies from and to it are DMA.
    bool registers_host = false;
    // DeviceBuffer::pack_to_host / unpack_from_host move a datatype's packed bytes: a
    // non-contiguous type on a buffer of this kind is packed on the device.
    bool packs_types = false;
};
// The kind's capabilities (all false for a kind not built in). Never makes the component.
const AccelCaps &accel_caps(BufKind kind);

// What the components read from the knobs. Core fills it (configure_accels) when the
// library loads and again at MPI_Init; components never read the knobs themselves.
struct AccelSettings {
    int world_rank = 0;                                   // this process, for the fault specs
    long verbose = 0;                                     // MPIACC_VERBOSE
    std::size_t slot_size = 2u << 20;                     // MPIACC_CHUNK_SIZE: one staging slot per chunk
    std::size_t pool_bytes = 64u << 20;                   // MPIACC_POOL_SIZE: pinned staging per device
    bool ipc = true;                                      // MPIACC_IPC
    bool shared_staging = true;                           // MPIACC_SHARED_STAGING
    std::string opencl_platform;                          // MPIACC_OPENCL_PLATFORM
    bool opencl_cache_off = false;                        // MPIACC_TEST_OPENCL_NO_CACHE (test_knobs.def)
    std::string fault_pull, fault_memop, fault_resident;  // MPIACC_FAULT_* (test_knobs.def)
    std::size_t cuda_kernel_copy_max = 32u << 10;         // MPIACC_CUDA_KERNEL_COPY_MAX
    long cuda_resident_idle_us = 0;  // MPIACC_TEST_RESIDENT_IDLE_US (test_knobs.def); 0: the built-in
};

// What the call said about its buffer, captured from the datatype's attributes (or
// found by pointer query) when the call was made. Plain values: no ownership.
struct BufferAttrs {
    BufKind kind = BufKind::HOST;
    bool kind_given = false;  // MPIX_ACC_BUF_TYPE was set (vs. detected)
    void *stream = nullptr;   // cudaStream_t
    void *queue = nullptr;    // cl_command_queue
    void *event = nullptr;    // cudaEvent_t or cl_event
    void *context = nullptr;  // cl_context
    void *device = nullptr;   // cl_device_id, or CUDA ordinal carried in the pointer value
    bool device_given = false;
    std::size_t offset = 0;  // MPIX_ACC_OFFSET: bytes into a cl_mem
    // Not an attribute: every copy of the buffer is made before the call returns (a
    // blocking call), and the DeviceBuffer dies with it. The caller cannot enqueue work
    // meanwhile, so a kind may order copies after the work already on the user's queue
    // by running them on that queue, or by a marker taken at the first copy, instead of
    // capturing a dependency up front.
    bool within_call = false;
    // Not an attribute: every copy of the buffer is issued before the call returns, though
    // the DeviceBuffer may outlive it (a small nonblocking send staged at the call; set
    // with within_call too). A kind may then run a whole-buffer copy on the user's queue.
    bool copies_in_call = false;
    // Not an attribute: a send buffer that will be offered for an IPC pull (CUDA, a peer
    // on this node, IPC on). Its dependency is then captured as an interprocess event,
    // which the envelope carries as it is: one record on the user's stream, where a
    // private event would take a wait and a second record to export.
    bool ipc_offer = false;
};

// What the sender's envelope carries for an IPC pull (DESIGN.md 2.2). Fixed layout: it is
// copied into the envelope byte for byte.
struct IpcExport {
    std::uint8_t mem_handle[64];    // cudaIpcMemHandle_t of the allocation
    std::uint8_t event_handle[64];  // cudaIpcEventHandle_t marking the data ready
    std::uint64_t offset;           // region start within the allocation
    std::uint64_t buffer_id;        // allocation identity: a reused address gets a new id
    std::int32_t device_pci;        // sender's device: PCI domain << 13 | bus << 5 | device, or -1
    std::uint32_t has_event;        // 1 when event_handle is valid (a dependency existed)
};
static_assert(sizeof(IpcExport) == 152, "IpcExport is part of the wire format");

// A completion of asynchronous device work: a copy, or a captured dependency.
class Completion {
public:
    virtual ~Completion() = default;
    // Nonblocking: true once the work is done. Errors are reported by `error()`.
    virtual bool test() = 0;
    // MPI_SUCCESS, or an MPI error class once the work failed.
    virtual int error() const { return MPI_SUCCESS; }
    // What failed, for the message of the call that waited on it ("" if unknown).
    virtual std::string what() const { return {}; }
    // Blocks until the work is done if it waits on nothing but MPI-ACC's own queues (no
    // user stream or event, no peer's event), so that it ends within its own running
    // time; returns at once otherwise. For a blocking call with nothing else in flight:
    // polled between progress rounds, a small copy was seen done late (docs/performance.md,
    // "Waiting in the driver"). test() still reports the outcome.
    virtual void wait_bounded() {}
};

// How the caller of a copy learns that it ended. WAITED_AT_ONCE: a blocking call with
// nothing else of MPI-ACC's in flight calls wait_bounded() right after issuing it, so
// the copy need not be made cheap to poll; a kind may then skip what polling needs
// (CUDA: the event recorded behind the copy, a fair share of a small copy's time, when the
// wait synchronizes the stream instead). test() still works. Kinds may ignore it.
enum class CopyUse { POLLED, WAITED_AT_ONCE };

// Copies a device kind may hold back and enqueue together. While a CopyBatch is open on
// a thread, a kind may defer copies it is asked for (CUDA: IPC pulls) and enqueue them
// in one call when the outermost CopyBatch of that thread closes. A deferred copy's own
// test() or wait_bounded() enqueues it (and those deferred with it) first, so a holder
// never waits on a copy nobody enqueued. Progress rounds open one around the operations
// they drive: a window of receives matches many envelopes in one round, and one call
// per pull cost several times the CPU (docs/performance.md, "Batched IPC pulls").
class CopyBatch {
public:
    CopyBatch();
    ~CopyBatch();
    CopyBatch(const CopyBatch &) = delete;
    CopyBatch &operator=(const CopyBatch &) = delete;

    // What holds deferred copies: flushed when the outermost CopyBatch closes.
    class Holder {
    public:
        virtual ~Holder() = default;
        virtual void flush() = 0;
    };
    // Whether a CopyBatch is open on the calling thread.
    static bool open();
    // `holder` deferred a copy in the open batch; flushed (once) when it closes, or at
    // once when no batch is open on this thread.
    static void hold(std::shared_ptr<Holder> holder);
};

// Host memory a kind pins for copies to and from its buffers, lent by
// DeviceBuffer::acquire_host_scratch and given back when this holder dies. It may outlive
// the buffer that lent it: it keeps what it came from alive.
class HostScratch {
public:
    virtual ~HostScratch() = default;
    virtual char *data() const = 0;
    virtual std::size_t size() const = 0;
};

// A device buffer captured at call time. It owns whatever it retained (queues, events,
// contexts) and the dependency marker taken at capture, so the user may change or free
// the datatype, the stream's later work, or the event afterwards.
class DeviceBuffer {
public:
    virtual ~DeviceBuffer() = default;
    virtual BufKind kind() const = 0;
    // The device ordinal its copies run on, or -1 where the kind has none.
    virtual int device_ordinal() const { return -1; }
    // Bytes addressable from the start of the described region (bounds for copies).
    virtual std::size_t capacity() const = 0;
    // Enqueue a copy of [offset, offset+len) into host memory `dst`, ordered after the
    // captured dependency. `dst` may be pinned staging memory from staging_pool().
    // Never blocks on the device. On failure returns an MPI error class and sets *why.
    virtual int copy_to_host(std::size_t offset, void *dst, std::size_t len, std::unique_ptr<Completion> *done,
                             std::string *why, CopyUse use = CopyUse::POLLED) = 0;
    // Enqueue a copy of host memory `src` into [offset, offset+len) of this buffer.
    virtual int copy_from_host(std::size_t offset, const void *src, std::size_t len, std::unique_ptr<Completion> *done,
                               std::string *why, CopyUse use = CopyUse::POLLED) = 0;
    // The pinned pool to stage this buffer's chunks through (per device / context).
    virtual PinnedPool *staging_pool() = 0;
    // Pinned host memory of at least `bytes` for a receive into this buffer to land a
    // payload in, so that copy_from_host moves it by DMA; null when the kind has none to
    // offer (the caller then uses pageable memory). Given back with
    // release_receive_bounce before this buffer is destroyed.
    virtual void *acquire_receive_bounce(std::size_t /*bytes*/) { return nullptr; }
    virtual void release_receive_bounce(void * /*bounce*/) {}
    // Pinned host memory of at least `bytes` that copies between it and this buffer's
    // device (this buffer included) run by DMA, for scratch a collective stages the buffer
    // through. Null where the kind lends none: the caller then page-locks memory of its
    // own (Accel::register_host) or stays pageable. OpenCL lends it because its pinning
    // is per context, which register_host does not know.
    virtual std::unique_ptr<HostScratch> acquire_host_scratch(std::size_t /*bytes*/) { return nullptr; }
    // A payload of `bytes` arrived in pageable memory for this buffer: a kind that can
    // offer receive bounces starts to.
    virtual void note_pageable_payload(std::size_t /*bytes*/) {}
    // A completion that fires when the captured dependency is satisfied (may be null
    // when there is none).
    virtual std::unique_ptr<Completion> dependency() { return nullptr; }
    // Whether copies of this buffer wait for work of the user's (a stream, queue or event
    // the data depends on), so that a nonblocking call must not wait for one (BRIEF S1).
    virtual bool copies_wait_for_user_work() const { return true; }
    // Whether a small nonblocking send may issue its staging copy at the call and leave
    // it to progress (the staged eager path): nothing waits on that copy in the driver
    // for longer than its own running time, even when it waits for the user's work
    // behind it (BRIEF S1). Kinds whose bounded waits would sit behind such a copy on a
    // shared stream say no while the buffer depends on the user's work.
    virtual bool stages_nonblocking_sends() const { return !copies_wait_for_user_work(); }
    // Enqueue a device-to-device copy of [offset, offset+len) into [dst_offset, ...) of
    // `dst`, a buffer of the same kind (used by the IPC pull). Kinds without it refuse.
    // Whether offsets are plain bytes of the captured memory, so that a peer's
    // copy_to_device (an IPC pull) may land in it; false for a packed view of a
    // non-contiguous type (protocol/typed_device.h).
    virtual bool holds_plain_bytes() const { return true; }
    virtual int copy_to_device(std::size_t /*offset*/, DeviceBuffer & /*dst*/, std::size_t /*dst_offset*/,
                               std::size_t /*len*/, std::unique_ptr<Completion> * /*done*/, std::string *why) {
        *why = "device-to-device copies are not available for this buffer kind";
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    // Makes copies between this buffer and host memory [base, base + bytes), a peer's
    // shared staging segment mapped here as `mapping` (pool/shared_memory.h), run by DMA;
    // kept until that mapping is unmapped (its unmap hook) or the kind lets go of this
    // buffer's device (finalize at the latest). Kinds that cannot refuse.
    virtual bool pin_host_region(void * /*base*/, std::size_t /*bytes*/, std::uint64_t /*mapping*/, std::string *why) {
        *why = "this buffer kind does not copy from peers' staging segments";
        return false;
    }
    // Whether pin_host_region is implemented: only then may a receive into this buffer
    // take the SHARED mode.
    virtual bool copies_from_peer_segments() const { return false; }
    // Same-node pull (CUDA IPC): describe this buffer for a peer process. False when
    // the buffer cannot be exported (not IPC-capable memory, or the kind has no IPC).
    virtual bool ipc_export(IpcExport * /*out*/) { return false; }
    // Packs bytes [first, first + len) of the packed form of `count` elements of `flat`
    // into host memory `dst`, ordered after the captured dependency. The elements' origin
    // (the call's buffer argument) is `origin` bytes from the start of the captured
    // region (negative when the type's lower bound is positive), and every byte they
    // touch lies inside the region. `dst` may be a pinned slot of staging_pool(), which
    // a kind may fill straight from the device. Never blocks on the device. Kinds whose
    // caps say packs_types implement it; others refuse.
    virtual int pack_to_host(const FlatType & /*flat*/, std::int64_t /*origin*/, std::int64_t /*count*/,
                             std::size_t /*first*/, void * /*dst*/, std::size_t /*len*/,
                             std::unique_ptr<Completion> * /*done*/, std::string *why) {
        *why = "packing datatypes is not available for this buffer kind";
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    // The reverse: `len` packed bytes from host memory `src` are bytes [first, first + len)
    // of the packed form, written into the elements.
    virtual int unpack_from_host(const FlatType & /*flat*/, std::int64_t /*origin*/, std::int64_t /*count*/,
                                 std::size_t /*first*/, const void * /*src*/, std::size_t /*len*/,
                                 std::unique_ptr<Completion> * /*done*/, std::string *why) {
        *why = "unpacking datatypes is not available for this buffer kind";
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    // pack_to_host and unpack_from_host with the packed bytes in device memory: bytes
    // [at, at + len) of `packed`, a plain buffer of the same kind, ordered after both
    // captured dependencies. MPI_Pack between two device buffers runs in one pass this
    // way. Kinds that cannot refuse with MPI_ERR_UNSUPPORTED_OPERATION, and the caller
    // goes through host memory.
    virtual int pack_to_device(const FlatType & /*flat*/, std::int64_t /*origin*/, std::int64_t /*count*/,
                               std::size_t /*first*/, DeviceBuffer & /*packed*/, std::size_t /*at*/,
                               std::size_t /*len*/, std::unique_ptr<Completion> * /*done*/, std::string *why) {
        *why = "packing datatypes into device memory is not available for this buffer kind";
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    virtual int unpack_from_device(const FlatType & /*flat*/, std::int64_t /*origin*/, std::int64_t /*count*/,
                                   std::size_t /*first*/, DeviceBuffer & /*packed*/, std::size_t /*at*/,
                                   std::size_t /*len*/, std::unique_ptr<Completion> * /*done*/, std::string *why) {
        *why = "unpacking datatypes from device memory is not available for this buffer kind";
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    // The reverse of copy_to_device: [src_offset, src_offset + len) of `src` into
    // [offset, offset + len) of this buffer.
    virtual int copy_from_device(std::size_t offset, DeviceBuffer &src, std::size_t src_offset, std::size_t len,
                                 std::unique_ptr<Completion> *done, std::string *why) {
        return src.copy_to_device(src_offset, *this, offset, len, done, why);
    }
    // MPI_Reduce_local: this[i] = in[i] op this[i] for `count` elements of spec.extent
    // bytes each, `in` a buffer of the same kind, ordered after both captured
    // dependencies. Blocking: returns once the result is in this buffer. Kinds without
    // reduction kernels refuse.
    virtual int reduce_local(DeviceBuffer & /*in*/, const ReduceSpec & /*spec*/, std::int64_t /*count*/,
                             std::string *why) {
        *why = "reductions are not available for this buffer kind";
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
};

// One device kind's table.
class Accel {
public:
    virtual ~Accel() = default;
    virtual BufKind kind() const = 0;
    virtual const char *name() const = 0;
    const AccelCaps &caps() const { return accel_caps(kind()); }
    // New settings (configure_accels after the component was made).
    virtual void reconfigure(const AccelSettings & /*settings*/) {}
    // Compiled in and a device usable at run time. Must be safe without a driver.
    virtual bool available() = 0;
    // Validate `attrs` for a buffer `addr` holding `bytes` bytes starting at its first
    // byte (true lower bound applied by the caller), and capture it. Returns
    // MPI_SUCCESS, or an MPI error class with *why naming the argument.
    virtual int capture(void *addr, std::size_t bytes, const BufferAttrs &attrs, std::unique_ptr<DeviceBuffer> *out,
                        std::string *why) = 0;
    // Pointer autodetection (CUDA-aware convention). True when `addr` is device memory
    // of this kind; fills *device_ordinal. Kinds that cannot detect return false.
    virtual bool owns_pointer(const void * /*addr*/, int * /*device_ordinal*/) { return false; }
    // The host memory owns_pointer has already answered false for, as a view that stays
    // valid while this accelerator exists; kinds that cannot detect know none.
    virtual KnownHostGranules known_host_memory() const { return {}; }
    // Receiver side of the IPC pull: map a peer's exported region of `bytes` bytes on
    // `device` (the receive buffer's; -1: the calling thread's current one), mappings
    // cached per allocation, device and buffer id, and return it as a source whose
    // dependency() is the peer's ready event. Kinds without IPC refuse.
    virtual int ipc_import(const IpcExport & /*peer*/, std::size_t /*bytes*/, int /*device*/,
                           std::unique_ptr<DeviceBuffer> * /*out*/, std::string *why) {
        *why = "IPC is not available for this buffer kind";
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    // Whether this process already works with a device of this kind on the calling
    // thread's current device (CUDA: its primary context exists), so that ipc_import
    // costs it no new context. Kinds without one say no.
    virtual bool device_in_use() { return false; }
    // Page-locks host memory [p, p+bytes) so that this kind's copies from and to it run
    // as asynchronous DMA (cudaHostRegister). False when the kind cannot, or it failed;
    // the memory then stays as it was. unregister_host undoes it, before the memory is freed.
    virtual bool register_host(void * /*p*/, std::size_t /*bytes*/) { return false; }
    virtual void unregister_host(void * /*p*/) {}
    // Release every cached object (MPI_Finalize).
    // Device memory of MPI-ACC's own on device `ordinal`, for a collective's scratch:
    // at least `bytes` bytes, or null with *why. Given back with free_device_memory
    // before shutdown().
    virtual void *allocate_device_memory(int /*ordinal*/, std::size_t /*bytes*/, std::string *why) {
        *why = "this buffer kind has no device memory of MPI-ACC's own";
        return nullptr;
    }
    virtual void free_device_memory(int /*ordinal*/, void * /*p*/, std::size_t /*bytes*/) {}
    // Where device `ordinal` sits on the PCI bus (domain << 13 | bus << 5 | device), the
    // same in every process that sees it; -1 where unknown.
    virtual std::int32_t device_pci_location(int /*ordinal*/) { return -1; }
    virtual void shutdown() {}
    // Counters for tests and mpiacc_info: name=value lines.
    virtual std::string counters() const { return ""; }
};

// The registry of compiled-in kinds, host included. Returns null for a kind not built in.
Accel *accel_for(BufKind kind);
// Whether the kind was compiled in (configure --enable-X).
bool accel_built(BufKind kind);
// Whether any kind built in can do IPC pulls.
bool any_accel_has_ipc();
// The settings components are made with; components made already take the new ones.
void configure_accels(const AccelSettings &settings);
const AccelSettings &accel_settings();
// Releases every component's cached objects (MPI_Finalize).
void shutdown_accels();

// Factories, one per component; each returns null when not built.
std::unique_ptr<Accel> make_host_accel();
std::unique_ptr<Accel> make_opencl_accel(const AccelSettings &settings);
std::unique_ptr<Accel> make_cuda_accel(const AccelSettings &settings);

}  // namespace mpiacc
