// Reliable-connected queue pairs and RDMA writes over rdma-core verbs, independent of MPI:
// the layer the verbs netmod places chunks with. One RcDevice per local device port (its
// context, protection domain and one completion queue), one RcQueuePair per peer, and
// RegisteredMemory for the slots a peer may write into. Peers meet by exchanging an
// RcAddress (and an RcRegion per slot) as bytes over any side channel.
//
// Every call that can fail returns 0, or an errno value with *why naming the verb, the
// device and the errno text; nothing throws or aborts. Queue pairs and registrations hold
// their device, so the context, PD and CQ outlive them whatever order the caller drops
// them in. Not thread-safe: one thread (the progress engine's) drives a device and its pairs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

struct ibv_context;
struct ibv_pd;
struct ibv_cq;
struct ibv_qp;
struct ibv_mr;

namespace mpiacc {

// What one side tells the other to connect an RC queue pair: sent as the struct's bytes.
// Both ends are the same build on hosts of one byte order (MPI ranks of one job); the
// magic catches anything else and a struct of another version.
struct RcAddress {
    static constexpr std::uint32_t kMagic = 0x52434131;  // "RCA1"
    std::uint32_t magic = kMagic;
    std::uint32_t qpn = 0;
    std::uint32_t psn = 0;      // 24 bits: the first packet sequence number this side sends
    std::uint16_t lid = 0;      // InfiniBand link layer only
    std::uint8_t ethernet = 0;  // 1: RoCE, routed by GID; 0: InfiniBand, routed by LID
    std::uint8_t mtu = 0;       // the port's active MTU, as enum ibv_mtu (1 = 256 ... 5 = 4096)
    std::uint8_t gid[16] = {};
};
static_assert(sizeof(RcAddress) == 32, "RcAddress is a wire format");

// The bytes of an address as they travel, and back. from_bytes checks the length, the
// magic and the MTU code, and says what was wrong.
std::vector<std::uint8_t> to_bytes(const RcAddress &a);
int from_bytes(const void *bytes, std::size_t len, RcAddress *a, std::string *why);

// A registered region as a peer names it in a write (the CTS will carry these).
struct RcRegion {
    std::uint64_t address = 0;
    std::uint64_t length = 0;
    std::uint32_t rkey = 0;
    std::uint32_t reserved = 0;
};
static_assert(sizeof(RcRegion) == 24, "RcRegion is a wire format");

// One entry of a port's GID table, as choose_gid_index weighs it.
struct GidEntry {
    int index = 0;
    bool roce_v2 = false;  // IBV_GID_TYPE_ROCE_V2: UDP/IP encapsulation, routable
    std::uint8_t gid[16] = {};
};

// The GID a RoCE port should use when none is configured: RoCE v2 before v1, then a
// global IPv6 address, then link-local IPv6, then IPv4-mapped, the lowest index among
// equals; -1 when every entry is zero.
int choose_gid_index(const std::vector<GidEntry> &table);

// The MTU both ends can carry (enum ibv_mtu codes).
inline std::uint8_t path_mtu(std::uint8_t local, std::uint8_t remote) { return local < remote ? local : remote; }

struct RcDeviceOptions {
    int port = 1;
    // GID table index for RoCE; -1 chooses one (choose_gid_index).
    int gid_index = -1;
    // Completion queue entries: every queue pair reserves its send and receive depth here,
    // so the CQ can never overrun.
    int cq_entries = 4096;
};

// A completion as poll() reports it.
struct RcCompletion {
    enum Kind { kWrite, kReceive };
    Kind kind = kWrite;
    std::uint64_t wr_id = 0;  // the caller's, as it was posted
    int status = 0;           // enum ibv_wc_status; 0 is success
    int opcode = 0;           // enum ibv_wc_opcode; valid on success only (verbs' rule)
    std::uint32_t qp_num = 0;
    std::uint32_t byte_len = 0;  // receive: bytes written by the write that consumed it
    bool has_imm = false;
    std::uint32_t imm = 0;  // host order
    std::string error;      // empty on success; else names the work request, QP, device and status
    bool ok() const { return status == 0; }
};

class RcQueuePair;

class RcDevice {
    struct Key {};  // only open() makes one

public:
    explicit RcDevice(Key) {}
    // Opens `name` (empty: the first device rdma-core lists), port options.port, which must
    // be ACTIVE, and makes its PD and CQ.
    static int open(const std::string &name, const RcDeviceOptions &options, std::shared_ptr<RcDevice> *out,
                    std::string *why);
    ~RcDevice();
    RcDevice(const RcDevice &) = delete;
    RcDevice &operator=(const RcDevice &) = delete;

    const std::string &name() const { return name_; }
    int port() const { return port_; }
    bool ethernet() const { return ethernet_; }
    int gid_index() const { return gid_index_; }  // -1 on InfiniBand
    std::uint8_t active_mtu() const { return active_mtu_; }
    std::uint16_t lid() const { return lid_; }
    const std::uint8_t *gid() const { return gid_; }
    std::uint32_t max_message_bytes() const { return max_msg_bytes_; }
    // "rxe0 port 1 (RoCE, GID 0 fe80::...)" or "mlx5_0 port 1 (InfiniBand, LID 7)".
    std::string describe() const;

    // Takes up to `max` completions of any of this device's queue pairs without waiting.
    // Returns how many, or -1 when ibv_poll_cq itself fails (*why). An error completion is
    // returned like any other, with its message; its queue pair is marked failed.
    int poll(RcCompletion *out, int max, std::string *why);

private:
    friend class RcQueuePair;
    friend class RegisteredMemory;
    int reserve_cq(int entries, std::string *why);

    std::string name_;
    int port_ = 1;
    bool ethernet_ = false;
    int gid_index_ = -1;
    std::uint8_t active_mtu_ = 0;
    std::uint16_t lid_ = 0;
    std::uint8_t gid_[16] = {};
    std::uint32_t max_msg_bytes_ = 0;
    int cq_entries_ = 0;
    int cq_reserved_ = 0;
    ibv_context *context_ = nullptr;
    ibv_pd *pd_ = nullptr;
    ibv_cq *cq_ = nullptr;
    // Completions name their QP by number; these are the live ones.
    std::unordered_map<std::uint32_t, RcQueuePair *> queue_pairs_;
};

// Memory registered with LOCAL_WRITE | REMOTE_WRITE: a source of writes and a slot a peer
// may write into. Deregistered on destruction.
class RegisteredMemory {
    struct Key {};  // only create() makes one

public:
    explicit RegisteredMemory(Key) {}
    static int create(const std::shared_ptr<RcDevice> &device, void *base, std::size_t bytes,
                      std::unique_ptr<RegisteredMemory> *out, std::string *why);
    ~RegisteredMemory();
    RegisteredMemory(const RegisteredMemory &) = delete;
    RegisteredMemory &operator=(const RegisteredMemory &) = delete;

    void *address() const { return base_; }
    std::size_t length() const { return bytes_; }
    std::uint32_t lkey() const;
    std::uint32_t rkey() const;
    // What a peer needs to write into it.
    RcRegion region() const;

private:
    std::shared_ptr<RcDevice> device_;
    void *base_ = nullptr;
    std::size_t bytes_ = 0;
    ibv_mr *mr_ = nullptr;
};

struct RcQueuePairOptions {
    std::uint32_t max_send_wr = 64;  // writes in flight at most (the device may grant more)
    std::uint32_t max_recv_wr = 64;  // receives posted at most
};

// One RC queue pair to one peer. Created in INIT, so receives can be posted before the
// peer's first write can arrive; connect() takes it through RTR to RTS.
class RcQueuePair {
    struct Key {};  // only create() makes one

public:
    explicit RcQueuePair(Key) {}
    static int create(const std::shared_ptr<RcDevice> &device, const RcQueuePairOptions &options,
                      std::unique_ptr<RcQueuePair> *out, std::string *why);
    ~RcQueuePair();
    RcQueuePair(const RcQueuePair &) = delete;
    RcQueuePair &operator=(const RcQueuePair &) = delete;

    RcAddress local_address() const;
    int connect(const RcAddress &remote, std::string *why);
    bool connected() const { return connected_; }
    std::uint32_t qp_num() const;

    // Writes `len` bytes at src[src_offset] to dst at dst_offset, and consumes one receive
    // on the peer that completes with `imm`. wr_id comes back in the write's completion;
    // its top bit is the layer's. Refused (EAGAIN) while send_slots_free() is 0, and
    // (EINVAL) when the range is outside either region.
    int post_write_with_imm(std::uint64_t wr_id, const RegisteredMemory &src, std::size_t src_offset, std::size_t len,
                            const RcRegion &dst, std::size_t dst_offset, std::uint32_t imm, std::string *why);
    // A receive for one write-with-immediate from the peer (it carries no data itself).
    int post_receive(std::uint64_t wr_id, std::string *why);

    // Flow control: a write may be posted while send_slots_free() > 0; the slot comes
    // back when poll() returns its completion.
    std::uint32_t max_send_wr() const { return max_send_wr_; }
    std::uint32_t sends_in_flight() const { return sends_in_flight_; }
    std::uint32_t send_slots_free() const { return max_send_wr_ - sends_in_flight_; }
    std::uint32_t max_recv_wr() const { return max_recv_wr_; }
    std::uint32_t receives_posted() const { return receives_posted_; }
    // After an error completion the QP is in the error state and refuses new work; this
    // is the first error's message (empty while healthy).
    const std::string &failure() const { return failure_; }

private:
    friend class RcDevice;
    void on_completion(const RcCompletion &c);

    std::shared_ptr<RcDevice> device_;
    ibv_qp *qp_ = nullptr;
    std::uint32_t psn_ = 0;
    std::uint32_t max_send_wr_ = 0;
    std::uint32_t max_recv_wr_ = 0;
    std::uint32_t sends_in_flight_ = 0;
    std::uint32_t receives_posted_ = 0;
    int cq_share_ = 0;
    bool connected_ = false;
    std::string failure_;
};

}  // namespace mpiacc
