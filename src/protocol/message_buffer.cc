#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer_desc.h"
#include "core/context.h"
#include "util/counters.h"
#include "util/error.h"
#include "util/fault.h"
#include "netmod/netmod.h"
#include "pool/pinned_pool.h"
#include "protocol/transfer.h"
#include "protocol/typed_device.h"
#include "datatype/flat_type.h"

namespace mpiacc {

TypeRef::TypeRef(MPI_Datatype t) : type_(t) {
    if (t != MPI_DATATYPE_NULL && !is_builtin_type(t)) {
        // Dup keeps the type alive (and its attributes) if the user frees it (BRIEF A4).
        if (PMPI_Type_dup(t, &type_) == MPI_SUCCESS) {
            owned_ = true;
            // The duplicate carries the attributes; the registry must know it does, so
            // that a persistent request re-reads them at each MPI_Start.
            Context &ctx = context();
            if (ctx.tagged_type_count.load() != 0) {
                bool tagged;
                {
                    StateLock lock;
                    tagged = ctx.tagged_types.count(t) != 0;
                }
                if (tagged) note_type_duplicated(type_);
            }
        } else {
            type_ = t;
        }
    }
}

TypeRef::~TypeRef() {
    if (owned_) free_datatype(&type_);
}

TypeRef &TypeRef::operator=(TypeRef &&o) noexcept {
    if (this != &o) {
        if (owned_) free_datatype(&type_);
        type_ = o.type_;
        owned_ = o.owned_;
        o.owned_ = false;
    }
    return *this;
}

namespace {

// Freed bounce buffers of at least kCachedBytes, kept for the next receive. Bounded in
// bytes, the oldest let go first, so that the cache follows the sizes in use: a window
// of 32 device receives of 4 MiB needs 32 bounces of 4 MiB, and each one made afresh
// costs a page fault per 4 KiB when MPICH first writes it (docs/performance.md, "Bounce
// buffers").
constexpr std::size_t kCachedBytes = 64u << 10;
constexpr std::size_t kCacheEntries = 64;
constexpr std::size_t kCacheBytes = 128u << 20;

// Cached bounces are whole pages: a registration (cudaHostRegister) pins whole pages,
// and two heap buffers sharing one cannot both be registered. A refused registration is
// also remembered (BounceBuffer::pin), because asking costs as much as registering
// (docs/performance.md, "Bounce buffers").
constexpr std::size_t kPage = 4096;

// Pinnable bounces under kCachedBytes (CUDA receives) come in whole-page sizes of 4, 8,
// 16 and 32 KiB, each size with a free list of its own: popped and pushed at no more
// cost than a malloc, so that envelopes, which most such receives get, pay nothing for
// it; and each buffer is page-locked once, by its first payload, not at every receive.
// Bounded per size (at most 3.8 MiB in all).
constexpr std::size_t kSmallSizes = 4;
constexpr std::size_t kSmallMax = kPage << (kSmallSizes - 1);
constexpr std::size_t kSmallPerSize = 64;

std::size_t small_size_index(std::size_t capacity) {
    std::size_t i = 0;
    while ((kPage << i) < capacity) ++i;
    return i;
}

char *allocate_pages(std::size_t capacity) {
    return static_cast<char *>(::operator new[](capacity, std::align_val_t(kPage)));
}

void delete_pages(char *data) { ::operator delete[](data, std::align_val_t(kPage)); }

}  // namespace

// A free bounce in the cache (BounceBuffer's fields while no receive holds it).
struct CachedBounce {
    char *data;
    std::size_t capacity;
    Accel *pinned_by;
    Accel *refused_by;
};

namespace {

// Every cached bounce is whole pages.
void free_bounce(const CachedBounce &b) {
    if (b.pinned_by) b.pinned_by->unregister_host(b.data);
    delete_pages(b.data);
}

// Registered buffers are freed by clear_bounce_cache() at MPI_Finalize, while their
// accelerator still exists; what is left at exit is plain memory.
struct BounceCache {
    std::mutex mutex;
    std::deque<CachedBounce> free;  // oldest first
    std::size_t bytes = 0;
    std::vector<CachedBounce> small[kSmallSizes];  // by size; the most recently freed last
    ~BounceCache() {
        for (auto &f : free) delete_pages(f.data);
        for (auto &list : small)
            for (auto &f : list) delete_pages(f.data);
    }
};

BounceCache &bounce_cache() {
    static BounceCache cache;
    return cache;
}

}  // namespace

BounceBuffer::BounceBuffer(std::size_t bytes, bool pinnable) : size_(bytes) {
    if (pinnable && bytes <= kSmallMax) {
        const std::size_t i = small_size_index(bytes);
        whole_pages_ = true;
        BounceCache &c = bounce_cache();
        {
            std::lock_guard<std::mutex> lock(c.mutex);
            if (!c.small[i].empty()) {
                adopt(c.small[i].back());
                c.small[i].pop_back();
                return;
            }
        }
        capacity_ = kPage << i;
        data_ = allocate_pages(capacity_);
        return;
    }
    // A pinnable one over kSmallMax is taken whole pages, as a large one, so that it can
    // be page-locked and cached too.
    const bool cached = bytes >= kCachedBytes || pinnable;
    if (!cached) {
        capacity_ = bytes;
        data_ = new char[bytes ? bytes : 1];  // uninitialised on purpose
        return;
    }
    whole_pages_ = true;
    BounceCache &c = bounce_cache();
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        // The smallest reusable_for the request; among equals, a page-locked one, then the
        // most recently released: a receive loop keeps reusing one warm buffer.
        auto better = [](const CachedBounce &a, const CachedBounce &b) {
            if (a.capacity != b.capacity) return a.capacity < b.capacity;
            return a.pinned_by != nullptr && b.pinned_by == nullptr;
        };
        auto best = c.free.end();
        for (auto it = c.free.begin(); it != c.free.end(); ++it)
            if (reusable_for(it->capacity, bytes) && (best == c.free.end() || !better(*best, *it))) best = it;
        if (best != c.free.end()) {
            adopt(*best);
            c.bytes -= best->capacity;
            c.free.erase(best);
            MPIACC_COUNT("protocol.bounce.reused");
            return;
        }
    }
    MPIACC_COUNT("protocol.bounce.allocated");
    capacity_ = (std::max(bytes, kCachedBytes) + kPage - 1) / kPage * kPage;
    data_ = allocate_pages(capacity_);
}

void BounceBuffer::adopt(const CachedBounce &b) {
    data_ = b.data;
    capacity_ = b.capacity;
    pinned_by_ = b.pinned_by;
    refused_by_ = b.refused_by;
}

BounceBuffer::BounceBuffer(BounceBuffer &&o) noexcept
    : data_(o.data_),
      size_(o.size_),
      capacity_(o.capacity_),
      whole_pages_(o.whole_pages_),
      pinned_by_(o.pinned_by_),
      refused_by_(o.refused_by_) {
    o.data_ = nullptr;
    o.size_ = o.capacity_ = 0;
    o.whole_pages_ = false;
    o.pinned_by_ = nullptr;
    o.refused_by_ = nullptr;
}

BounceBuffer &BounceBuffer::operator=(BounceBuffer &&o) noexcept {
    if (this != &o) {
        release();
        data_ = o.data_;
        size_ = o.size_;
        capacity_ = o.capacity_;
        whole_pages_ = o.whole_pages_;
        pinned_by_ = o.pinned_by_;
        refused_by_ = o.refused_by_;
        o.data_ = nullptr;
        o.size_ = o.capacity_ = 0;
        o.whole_pages_ = false;
        o.pinned_by_ = nullptr;
        o.refused_by_ = nullptr;
    }
    return *this;
}

bool BounceBuffer::pin(Accel *accel) {
    if (pinned_by_) return pinned_by_ == accel;  // another kind's registration does not help this one
    if (refused_by_ == accel || !data_ || !accel || !whole_pages_) return false;
    if (!accel->register_host(data_, capacity_)) {
        // Not asked again by that kind: a refusal costs as much as a success. Another
        // kind may still pin it (an OpenCL receive that used the buffer before a CUDA one
        // must not keep CUDA from registering it).
        refused_by_ = accel;
        return false;
    }
    pinned_by_ = accel;
    return true;
}

void clear_bounce_cache() {
    std::vector<CachedBounce> all;
    {
        BounceCache &c = bounce_cache();
        std::lock_guard<std::mutex> lock(c.mutex);
        all.assign(c.free.begin(), c.free.end());
        c.free.clear();
        c.bytes = 0;
        for (auto &list : c.small) {
            all.insert(all.end(), list.begin(), list.end());
            list.clear();
        }
    }
    for (auto &b : all) free_bounce(b);  // outside the lock
}

void BounceBuffer::release() {
    if (!data_) return;
    if (!whole_pages_) {
        delete[] data_;
        data_ = nullptr;
        return;
    }
    std::vector<CachedBounce> evicted;
    CachedBounce self{data_, capacity_, pinned_by_, refused_by_};
    data_ = nullptr;
    pinned_by_ = nullptr;
    refused_by_ = nullptr;
    {
        BounceCache &c = bounce_cache();
        std::lock_guard<std::mutex> lock(c.mutex);
        if (self.capacity <= kSmallMax) {
            auto &list = c.small[small_size_index(self.capacity)];
            if (list.size() < kSmallPerSize)
                list.push_back(self);
            else
                evicted.push_back(self);
        } else if (self.capacity <= kCacheBytes) {
            c.free.push_back(self);
            c.bytes += self.capacity;
            while (c.free.size() > kCacheEntries || c.bytes > kCacheBytes) {
                evicted.push_back(c.free.front());
                c.bytes -= c.free.front().capacity;
                c.free.pop_front();
            }
        } else {
            evicted.push_back(self);
        }
    }
    for (auto &b : evicted) free_bounce(b);  // outside the lock
}

char *MessageBuffer::contiguous_host() const {
    if (kind != BufKind::HOST) return nullptr;
    if (!packed.empty()) return const_cast<char *>(packed.data());
    if (layout.contiguous) return typed_address(host, layout.true_lb);
    return nullptr;
}

void MessageBuffer::hold_bytes(std::vector<char> &&data) {
    device.reset();
    kind = BufKind::HOST;
    packed = std::move(data);
    bytes = packed.size();
    host = packed.data();
    count = static_cast<int>(bytes);
    type = TypeRef(MPI_BYTE);
    layout = Layout{};
    layout.bytes = bytes;
}

int capture_footprint(void *buf, std::int64_t lo, std::int64_t hi, const BufferAttrs &attrs,
                      std::unique_ptr<DeviceBuffer> *out, std::string *why) {
    const AccelCaps &caps = accel_caps(attrs.kind);
    BufferAttrs a = attrs;
    void *addr = buf;
    if (caps.handle_addressed && !buf) {
        *why =
            "buf: not supported on device buffers: MPI_BOTTOM with a datatype of absolute addresses names no "
            "place in a cl_mem";
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    if (caps.handle_addressed) {
        // The type's offsets count from MPIX_ACC_OFFSET; its bytes must lie in the cl_mem.
        if (lo < 0 && static_cast<std::uint64_t>(-lo) > attrs.offset) {
            *why = format(
                "datatype: its lowest byte lies %lld bytes before its origin, which is %zu bytes into "
                "the cl_mem (MPIX_ACC_OFFSET): outside the buffer",
                static_cast<long long>(-lo), attrs.offset);
            return MPI_ERR_TYPE;
        }
        a.offset = static_cast<std::size_t>(static_cast<std::int64_t>(attrs.offset) + lo);
    } else {
        addr = typed_address(buf, static_cast<MPI_Aint>(lo));
    }
    return accel_for(attrs.kind)->capture(addr, static_cast<std::size_t>(hi - lo), a, out, why);
}

namespace {

// A non-contiguous type on a device buffer: the region its elements touch is captured,
// and wrapped so that its copies pack and unpack (typed_device.h).
int make_typed_device_buffer(void *buf, int count, MPI_Datatype type, const BufferAttrs &attrs, MessageBuffer *out,
                             std::string *why) {
    const AccelCaps &caps = accel_caps(attrs.kind);
    if (!caps.packs_types) {
        *why = format(
            "buf: not supported on device buffers: the datatype does not describe one contiguous run of "
            "bytes, and %s buffers cannot be packed on the device; pack the data first",
            buf_kind_word(attrs.kind));
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    int error = MPI_SUCCESS;
    std::shared_ptr<const FlatType> flat = flat_type(type, &error, why);
    if (!flat) return error;
    std::int64_t lo = 0, hi = 0;
    type_footprint(*flat, count, &lo, &hi);
    std::unique_ptr<DeviceBuffer> region;
    int rc = capture_footprint(buf, lo, hi, attrs, &region, why);
    if (rc != MPI_SUCCESS) return rc;
    if (!region) {
        // Pinned or registered host memory tagged as device memory: host data.
        out->kind = BufKind::HOST;
        out->host = buf;
        out->type = TypeRef(type);
        return MPI_SUCCESS;
    }
    out->device = std::make_unique<TypedDeviceBuffer>(std::move(region), std::move(flat), -lo, count);
    MPIACC_COUNT("protocol.typed_device_buffers");
    return MPI_SUCCESS;
}

}  // namespace

int make_message_buffer(void *buf, int count, MPI_Datatype type, const BufferAttrs &attrs, MessageBuffer *out,
                        std::string *why) {
    out->layout = describe_layout(count, type);
    if (out->layout.error != MPI_SUCCESS) {
        *why = out->layout.error == MPI_ERR_COUNT ? format("count %d is negative", count)
                                                  : std::string("invalid datatype");
        return out->layout.error;
    }
    out->bytes = out->layout.bytes;
    out->count = count;
    out->kind = attrs.kind;
    // MPI allows any buffer when there is nothing to move (a NULL cl_mem or pointer at
    // count 0): no device bytes to capture, so the message is an empty host one.
    if (attrs.kind == BufKind::HOST || out->bytes == 0) {
        out->kind = BufKind::HOST;
        out->type = TypeRef(type);
        out->host = buf;
        return MPI_SUCCESS;
    }
    // Contiguous device data moves as bytes: the type is not needed again, and not
    // duplicated. A duplicate of a tagged type copies and then deletes every MPI-ACC
    // attribute through the keyval callbacks, which made tagged sends slower than
    // autodetected ones (docs/performance.md, "Tagged datatypes"). Any other type is
    // packed on the device through its flattened form.
    if (!out->layout.contiguous) return make_typed_device_buffer(buf, count, type, attrs, out, why);
    Accel *accel = accel_for(attrs.kind);
    // The true lower bound of a contiguous type is a byte offset into the device buffer.
    BufferAttrs a = attrs;
    void *addr = buf;
    if (out->layout.true_lb != 0) {
        if (accel_caps(attrs.kind).handle_addressed) {
            if (out->layout.true_lb < 0) {
                *why = "datatype has a negative lower bound, which cannot address into a cl_mem";
                return MPI_ERR_TYPE;
            }
            a.offset += static_cast<std::size_t>(out->layout.true_lb);
        } else {
            addr = static_cast<char *>(buf) + out->layout.true_lb;
        }
    }
    int rc = accel->capture(addr, out->bytes, a, &out->device, why);
    if (rc != MPI_SUCCESS) return rc;
    if (!out->device) {
        // Pinned or registered host memory tagged as device memory: it is host memory
        // and moves without staging.
        out->kind = BufKind::HOST;
        out->host = buf;
        out->type = TypeRef(type);
    }
    return MPI_SUCCESS;
}

bool chunk_copy_fault(std::string *why) {
    const Context &ctx = context();
    if (ctx.knobs.fault_chunk_copy.empty()) return false;
    static std::atomic<long> copies{0};
    const long n = ++copies;
    if (!fault_planned(ctx.knobs.fault_chunk_copy, ctx.world_rank, n)) return false;
    *why = format("chunk copy %ld of rank %d failed on purpose (MPIACC_FAULT_CHUNK_COPY)", n, ctx.world_rank);
    return true;
}

void stop_chunks(std::vector<ChunkState> *chunks, ChunkFlow flow) {
    for (auto &c : *chunks) {
        if (flow == ChunkFlow::SENDING)
            netmod().abandon(&c.request);
        else
            netmod().cancel(&c.request);
    }
}

bool retire_stopped_chunks(std::vector<ChunkState> *chunks) {
    for (auto it = chunks->begin(); it != chunks->end();) {
        if (it->copy && !it->copy->test()) {
            ++it;
            continue;
        }
        it->copy.reset();
        if (it->peer_segment) release_peer_segment(it->peer_segment);
        it->peer_segment = nullptr;
        if (!netmod().test(&it->request)) {
            ++it;
            continue;
        }
        if (it->awaiting_ack) {
            ++it;
            continue;
        }
        if (it->staging) it->pool->release(it->staging);
        MPIACC_COUNT("protocol.chunks_retired");
        it = chunks->erase(it);
    }
    return chunks->empty();
}

void retire_chunks_now(std::vector<ChunkState> *chunks, ChunkFlow flow) {
    if (chunks->empty()) return;
    stop_chunks(chunks, flow);
    // Copies end within their running time and cancelled or matched receives within the
    // sender's; a second is far past either unless the peer or the device is gone.
    const double deadline = PMPI_Wtime() + 1.0;
    while (!retire_stopped_chunks(chunks) && PMPI_Wtime() < deadline) {
    }
    for (auto &c : *chunks) {
        netmod().release(&c.request);
        MPIACC_COUNT("protocol.chunks_left_unretired");
    }
    chunks->clear();
}

int truncated_receive(MPI_Status *st, const char *call, std::size_t message_bytes, std::size_t buffer_bytes) {
    const std::string what =
        message_bytes > buffer_bytes
            ? format("message of %zu bytes is longer than the receive buffer (%zu bytes)", message_bytes, buffer_bytes)
            : format("message is longer than the receive buffer (%zu bytes)", buffer_bytes);
    const int code = make_error_code(MPI_ERR_TRUNCATE, call, what);
    set_status(st, st->MPI_SOURCE, st->MPI_TAG, 0, code, false);
    return code;
}

bool is_truncation(int rc) {
    if (rc == MPI_SUCCESS) return false;
    int error_class = rc;
    PMPI_Error_class(rc, &error_class);
    return error_class == MPI_ERR_TRUNCATE;
}

void set_status(MPI_Status *st, int source, int tag, std::size_t bytes, int error, bool cancelled) {
    st->MPI_SOURCE = source;
    st->MPI_TAG = tag;
    st->MPI_ERROR = error;
    PMPI_Status_set_elements_x(st, MPI_BYTE, static_cast<MPI_Count>(bytes));
    PMPI_Status_set_cancelled(st, cancelled ? 1 : 0);
}

}  // namespace mpiacc
