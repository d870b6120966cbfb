// Wire formats (DESIGN.md 2.2-2.4). The envelope (RTS) is the one matching message of a
// rendezvous transfer; receivers tell it from a payload by its exact length, then by its
// magic. Control messages (CTS, FIN) and data chunks travel on the private communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "accel/accel.h"
#include "netmod/netmod.h"
#include "pool/shared_memory.h"

namespace mpiacc {

constexpr std::uint32_t kEnvelopeMagic = 0x4343414du;  // "MACC"
// 2: the envelope's `shared` offer and flags kEnvelopeStagesAfterDecline and
// kEnvelopeSharedStaging, CTS status kCtsDeclinedForBlockingReceive, mode SHARED and
// control message CHUNK_DONE. 3: control message PULL_HINT. 4: the envelope's
// `fin_word` (kEnvelopeFinWord). 5: a CTS may name the receiver's slots (CtsSlots), and
// an ABORT may say the transport failed (kAbortTransportFailed).
constexpr std::uint16_t kProtocolVersion = 5;
// Not a power of two on purpose: OSU-style sweeps and most applications send power-of-two
// sizes, and a host payload of exactly this length has to go by rendezvous.
constexpr std::size_t kEnvelopeBytes = 200;

enum EnvelopeFlags : std::uint16_t {
    kEnvelopeHasIpc = 1u << 0,  // ipc carries an exported CUDA region
    // Declining this offer makes the sender's next small sends to this rank go staged,
    // as the plain payload (send_common's run after a decline).
    kEnvelopeStagesAfterDecline = 1u << 1,
    // The sender stages through shared memory (pool/shared_memory.h) and says which
    // process it is in `shared`: a receiver on its node may take the SHARED mode.
    kEnvelopeSharedStaging = 1u << 2,
    // With kEnvelopeHasIpc: the receiver may end the pull by writing word `fin_word` of
    // the sender's FIN words (protocol/fin_words.h) rather than sending the FIN.
    kEnvelopeFinWord = 1u << 3,
};

enum class TransferMode : std::uint16_t {
    DIRECT = 1,    // both sides host: one message from buffer to buffer
    PIPELINE = 2,  // chunks staged through pinned pools
    IPC = 3,       // receiver pulls the sender's device memory, then sends FIN (or writes its word)
    // Same node: the sender stages chunks into its shared slots and sends a ChunkNotice
    // for each; the receiver copies each out of the slot itself and answers CHUNK_DONE,
    // which frees the slot.
    SHARED = 4,
};
const char *mode_name(TransferMode m);

#pragma pack(push, 1)
// Who owns the staging segments a SHARED transfer's notices name.
struct SharedStagingOffer {
    std::int32_t pid;
    std::uint32_t reserved;
    std::uint64_t pid_namespace;  // inode of the sender's /proc/self/ns/pid: its pid means
                                  // the same process here only when ours is the same
};

struct Envelope {
    std::uint32_t magic;
    std::uint16_t version;
    std::uint16_t buf_kind;     // BufKind of the sender's buffer
    std::uint64_t size;         // packed bytes of the message
    std::uint64_t transfer_id;  // sender-local id; names the transfer in CTS/data/FIN
    std::int32_t sender_rank;   // in the private (world) communicator
    std::uint32_t chunk_size;   // sender's proposal (BRIEF P4)
    std::uint16_t depth;        // sender's proposal
    std::uint16_t flags;
    std::uint64_t node_id;  // hash of the sender's host
    union {
        IpcExport ipc;              // valid when flags & kEnvelopeHasIpc
        SharedStagingOffer shared;  // valid when flags & kEnvelopeSharedStaging (never both)
    };
    std::uint32_t fin_word;  // valid when flags & kEnvelopeFinWord
};

// CTS and FIN go from receiver to sender; ABORT from sender to receiver when the sender
// cannot produce the data after the CTS (a failed device copy), so nobody is stranded.
// CHUNK_DONE (SHARED mode, receiver to sender): the receiver is done with chunk `bytes`'s
// slot.
// RNDV_HINT is a receiver's, outside any transfer (transfer_id 0): status 1 asks the
// sender for RTS/CTS on its host sends of at least `bytes`, status 0 withdraws that.
// PULL_HINT is a receiver's too: a device receive got a small payload from a sender whose
// pull this rank declined, so that sender's run of staged small sends ends (send_common).
enum class ControlType : std::uint16_t { CTS = 1, FIN = 2, ABORT = 3, CHUNK_DONE = 4, RNDV_HINT = 5, PULL_HINT = 6 };

struct ControlMessage {
    std::uint32_t magic;
    std::uint16_t type;         // ControlType
    std::uint16_t mode;         // TransferMode (CTS)
    std::uint64_t transfer_id;  // the sender's id from the envelope
    std::uint64_t bytes;        // bytes the receiver takes: < size when truncating
    std::uint32_t chunk_size;   // final choice (CTS)
    std::uint16_t depth;        // final choice (CTS)
    std::uint16_t status;       // FIN: 0 ok, else an MPI error class; CTS: kCtsDeclined* or 0
};
// SHARED mode, sender to receiver on the transfer's data tag, one per chunk in order:
// chunk `index` of `len` bytes is in the sender's slot at `where`.
struct ChunkNotice {
    std::uint32_t magic;
    std::uint32_t index;
    std::uint64_t len;
    SharedLocation where;
};

// A CTS that names the receiver's registered slots, for a netmod that places one-sided
// (PIPELINE mode): the ControlMessage, then this with `count` slots; chunk k lands in
// slots[k mod count]. Told from a plain CTS by its length alone (cts_length), so the
// CTS of a two-sided netmod is unchanged.
constexpr std::uint32_t kMaxCtsSlots = 16;
struct CtsSlots {
    std::uint32_t count;
    std::uint32_t reserved;
    RemoteSlot slots[kMaxCtsSlots];
};
// What the control channel carries at most: a control message and its slots.
struct ControlFrame {
    ControlMessage msg;
    CtsSlots slots;
};
#pragma pack(pop)
static_assert(sizeof(RemoteSlot) == 16, "a slot of a CTS is part of the protocol");
static_assert(sizeof(ControlMessage) == 32, "a control message is part of the protocol");

// Bytes on the wire of a CTS naming `count` slots (0: a plain CTS).
constexpr std::size_t cts_length(std::size_t count) {
    return count == 0 ? sizeof(ControlMessage) : sizeof(ControlMessage) + 8 + count * sizeof(RemoteSlot);
}
// The slots a control message of `len` bytes names: null for a plain one, or for a
// length that matches no count.
inline const CtsSlots *named_slots(const ControlFrame &f, std::size_t len) {
    if (len <= sizeof(ControlMessage) || f.slots.count == 0 || f.slots.count > kMaxCtsSlots) return nullptr;
    return len == cts_length(f.slots.count) ? &f.slots : nullptr;
}

// ABORT.depth: the sender's transport to this rank failed (a queue pair in error), so
// none of its chunks still in flight will land.
constexpr std::uint16_t kAbortTransportFailed = 1;

// CTS.status of a declined pull offer (mode PIPELINE): the receive was a blocking one,
// so only the sender's blocking small sends should go staged; its nonblocking ones are
// pulled faster by nonblocking receives.
constexpr std::uint16_t kCtsDeclinedForBlockingReceive = 1;

static_assert(sizeof(Envelope) == kEnvelopeBytes, "envelope size is part of the protocol");

// The tag for transfer `id`'s data. Tag 0 is the netmod's control channel; ids wrap
// within [1, tag_ub].
inline int data_tag(std::uint64_t id, int tag_ub) {
    return 1 + static_cast<int>(id % static_cast<std::uint64_t>(tag_ub));
}

// The first kEnvelopeBytes of a host buffer that receives in place, kept from the post.
// An envelope for a message shorter than itself lands there whole, and a receive may
// change only the bytes of the message (MPI 4.0, 3.2.4): they are put back once the
// envelope has been read, before any of the message's data moves.
struct InPlaceHead {
    alignas(16) char bytes[kEnvelopeBytes];
    void keep(const void *buf) { std::memcpy(bytes, buf, kEnvelopeBytes); }
    void put_back(void *buf) const { std::memcpy(buf, bytes, kEnvelopeBytes); }
};

// True when `buf` of `bytes` bytes is an envelope of this protocol.
bool looks_like_envelope(const void *buf, std::size_t bytes);

// Copies a payload out of the bounce buffer it landed in (every receive smaller than an
// envelope lands in one). Up to 16 bytes inline, in two moves that may overlap: a call to
// memcpy was a large part of MPI_Recv's own overhead for 8 bytes. Longer ones are
// memcpy's, which inline moves did not beat (docs/performance.md, "Host fast path and
// idle receives").
inline void copy_bounced_payload(void *dst, const void *src, std::size_t n) {
    char *d = static_cast<char *>(dst);
    const char *s = static_cast<const char *>(src);
    if (n > 16) {
        std::memcpy(d, s, n);
    } else if (n >= 8) {
        std::memcpy(d, s, 8);
        std::memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        std::memcpy(d, s, 4);
        std::memcpy(d + n - 4, s + n - 4, 4);
    } else if (n > 0) {
        d[0] = s[0];
        d[n / 2] = s[n / 2];
        d[n - 1] = s[n - 1];
    }
}

}  // namespace mpiacc
