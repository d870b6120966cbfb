// The `ib` netmod: pipeline chunks as RDMA writes with immediate into the slots the
// receiver's CTS names (rc.h), everything else handed to the `mpi` netmod it sits in
// front of. Peers meet lazily: the first receiver that asks reach() about a peer sends
// its RC address on the control channel and the peer answers with its own, or with
// "no" when it has no device (or the knob forbids), so a pair that never runs a
// pipeline never makes a queue pair.
//
// Flow: every expect_placement sends the sender a credit (a zero-byte write whose
// immediate has kCreditBit and the tag), and the k-th placement on a tag is written
// only once the k-th credit for it has come: the receiver posts chunks in order and
// names chunk k's slot as slots[k mod n], so a credit says that slot is free again. A
// chunk's own immediate is its tag; RC delivers in order, so it completes the oldest
// placement expected on that tag.
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

#include "netmod/ib/devices.h"
#include "netmod/ib/rc.h"
#include "netmod/netmod.h"
#include "util/counters.h"
#include "util/error.h"
#include "util/fault.h"

namespace mpiacc {

namespace {

// Handles of this netmod carry the top bit; the `mpi` netmod's are 32-bit values.
constexpr std::uint64_t kIbHandle = std::uint64_t{1} << 63;
constexpr std::uint32_t kCreditBit = 1u << 31;
// MemoryKey of a registration: the rkey, with this bit so that a key is never 0.
constexpr std::uint64_t kKeyValid = std::uint64_t{1} << 32;
// Receives kept posted per queue pair: every write from the peer (chunk or credit)
// consumes one, and each is posted again as it completes.
constexpr std::uint32_t kQueueDepth = 64;

// A peer's RC address on the control channel; its magic tells it from the protocol's
// messages, which the `mpi` netmod carries on the same channel.
struct ConnectMessage {
    static constexpr std::uint32_t kMagic = 0x49424331;  // "IBC1"
    std::uint32_t magic = kMagic;
    std::uint16_t type = 0;       // kRequest or kReply
    std::uint16_t reachable = 0;  // 1: `address` is a queue pair for the receiver of this
    RcAddress address;
};
constexpr std::uint16_t kRequest = 1, kReply = 2;
// Room for any control message: the protocol's largest (a CTS naming slots) and ours.
constexpr std::size_t kControlRoom = 1024;

enum class Link { UNKNOWN, REQUESTED, CONNECTED, TWO_SIDED, FAILED };

struct IbOp {
    enum Kind { WRITE, CREDIT, EXPECT } kind = WRITE;
    int peer = -1;
    int tag = 0;
    bool done = false;
    // WRITE: what goes where.
    const void *src = nullptr;
    std::size_t len = 0;
    RcRegion dst;
    std::unique_ptr<RegisteredMemory> own_registration;  // a source outside every region
};

struct Peer {
    Link link = Link::UNKNOWN;
    std::unique_ptr<RcQueuePair> qp;
    std::string failure;
    ConnectMessage out;
    NetHandle out_handle;
    // As a sender, per tag: credits not yet used, and writes waiting for one.
    struct Sending {
        long credits = 0;
        std::deque<std::uint64_t> waiting;
    };
    std::unordered_map<int, Sending> sending;
    // As a receiver, per tag: placements expected, oldest first.
    std::unordered_map<int, std::deque<std::uint64_t>> receiving;
    // Writes and credits cleared to go, waiting for room in the send queue.
    std::deque<std::uint64_t> ready;
};

class IbNetmod final : public Netmod {
public:
    IbNetmod(Netmod &mpi, const NetmodOptions &options) : mpi_(mpi), options_(options) {
        peers_.resize(static_cast<std::size_t>(std::max(1, options.world_size)));
    }
    ~IbNetmod() override {
        // A connect message still going out completes (40 bytes, eager) rather than being
        // freed: MPI's finalize then has no send of ours left in flight.
        for (Peer &p : peers_) mpi_.wait(&p.out_handle);
        ops_.clear();
        peers_.clear();  // queue pairs before the registrations and the device they hold
        regions_.clear();
        credit_source_.reset();
    }

    const char *name() const override { return "ib"; }
    NetmodCaps caps() const override { return NetmodCaps{true, true}; }

    PeerReach reach(int peer) override {
        if (peer < 0 || peer >= static_cast<int>(peers_.size()) || peer == options_.world_rank)
            return PeerReach::TWO_SIDED;
        if (options_.ib_policy != "on" && options_.same_node && options_.same_node(peer)) return PeerReach::TWO_SIDED;
        Peer &p = peers_[peer];
        if (p.link == Link::UNKNOWN) request(peer);
        switch (p.link) {
            case Link::CONNECTED: return PeerReach::ONE_SIDED;
            case Link::REQUESTED: return PeerReach::PENDING;
            default: return PeerReach::TWO_SIDED;
        }
    }
    int peer_failure(int peer, std::string *why) override {
        progress();
        if (peer < 0 || peer >= static_cast<int>(peers_.size()) || peers_[peer].link != Link::FAILED)
            return MPI_SUCCESS;
        *why = peers_[peer].failure;
        return MPI_ERR_OTHER;
    }
    void fail_peer(int peer, const std::string &why) override {
        if (peer >= 0 && peer < static_cast<int>(peers_.size()) && peers_[peer].link == Link::CONNECTED)
            fail(peer, why);
    }

    int register_memory(void *base, std::size_t bytes, MemoryKey *key, std::string *why) override {
        if (!open_device(why)) return MPI_ERR_OTHER;
        std::unique_ptr<RegisteredMemory> m;
        if (RegisteredMemory::create(device_, base, bytes, &m, why) != 0) return MPI_ERR_OTHER;
        key->key = kKeyValid | m->rkey();
        regions_[static_cast<char *>(base)] = std::move(m);
        MPIACC_COUNT("ib.registrations");
        return MPI_SUCCESS;
    }
    void deregister_memory(void *base, const MemoryKey &) override { regions_.erase(static_cast<char *>(base)); }

    int send_bytes(const void *buf, std::size_t len, int peer, int tag, NetHandle *handle) override {
        return mpi_.send_bytes(buf, len, peer, tag, handle);
    }
    int recv_bytes(void *buf, std::size_t len, int peer, int tag, NetHandle *handle) override {
        return mpi_.recv_bytes(buf, len, peer, tag, handle);
    }
    int send_typed(const void *buf, int count, MPI_Datatype type, int peer, int tag, NetHandle *handle) override {
        return mpi_.send_typed(buf, count, type, peer, tag, handle);
    }
    int recv_typed(void *buf, int count, MPI_Datatype type, int peer, int tag, NetHandle *handle) override {
        return mpi_.recv_typed(buf, count, type, peer, tag, handle);
    }

    int place(const void *src, std::size_t len, int peer, int tag, const RemoteSlot &slot, NetHandle *handle) override {
        if (!slot.named()) return mpi_.place(src, len, peer, tag, slot, handle);
        const std::uint64_t id = new_op(IbOp::WRITE, peer, tag, handle);
        IbOp &op = ops_[id];
        op.src = src;
        op.len = len;
        op.dst.address = slot.address;
        op.dst.length = len;
        op.dst.rkey = static_cast<std::uint32_t>(slot.key.key);
        Peer &p = peers_[peer];
        if (p.link == Link::FAILED) {
            op.done = true;  // the transfer fails through peer_failure, which says why
            return MPI_SUCCESS;
        }
        if (p.link != Link::CONNECTED) {
            // A slot named by a peer this side could not connect to (its RTR failed).
            ops_.erase(id);
            handle->value = 0;
            return MPI_ERR_OTHER;
        }
        Peer::Sending &s = p.sending[tag];
        if (s.credits > 0) {
            --s.credits;
            p.ready.push_back(id);
        } else {
            s.waiting.push_back(id);
        }
        post_ready(peer);
        return MPI_SUCCESS;
    }
    int expect_placement(void *slot, std::size_t len, int peer, int tag, bool named, NetHandle *handle) override {
        if (!named) return mpi_.expect_placement(slot, len, peer, tag, named, handle);
        Peer &p = peers_[peer];
        const std::uint64_t id = new_op(IbOp::EXPECT, peer, tag, handle);
        if (p.link != Link::CONNECTED) {
            // The transport failed under the transfer: it fails through peer_failure.
            ops_[id].done = true;
            return MPI_SUCCESS;
        }
        p.receiving[tag].push_back(id);
        const std::uint64_t credit = new_op(IbOp::CREDIT, peer, tag, nullptr);
        p.ready.push_back(credit);
        post_ready(peer);
        return MPI_SUCCESS;
    }

    int send_control(const void *msg, std::size_t len, int peer, NetHandle *handle) override {
        return mpi_.send_control(msg, len, peer, handle);
    }
    bool poll_control(void *msg, std::size_t capacity, int *from, std::size_t *received) override {
        return take_control(msg, capacity, from, received, false);
    }
    bool wait_control(void *msg, std::size_t capacity, int *from, std::size_t *received) override {
        return take_control(msg, capacity, from, received, true);
    }
    int sum_sent_to_me(const int *per_peer, int *total) override { return mpi_.sum_sent_to_me(per_peer, total); }

    bool test(NetHandle *handle) override {
        if (!handle->pending()) return true;
        if (!(handle->value & kIbHandle)) return mpi_.test(handle);
        progress();
        auto it = ops_.find(handle->value);
        if (it != ops_.end() && !it->second.done) return false;
        if (it != ops_.end()) ops_.erase(it);
        handle->value = 0;
        return true;
    }
    void wait(NetHandle *handle) override {
        if (!(handle->value & kIbHandle)) return mpi_.wait(handle);
        while (!test(handle)) {
        }
    }
    // A placement expected stays until its write lands: the sender was credited for it,
    // so a slot given back earlier could be written into under another transfer.
    void cancel(NetHandle *handle) override {
        if (!(handle->value & kIbHandle)) mpi_.cancel(handle);
    }
    // A write not yet posted is dropped; one posted runs to its completion, forgotten. A
    // placement expected is dropped: its sender said it never placed it (ABORT), and the
    // later chunks of its tag then complete the ones before it, in order.
    void abandon(NetHandle *handle) override {
        if (!(handle->value & kIbHandle)) return mpi_.abandon(handle);
        auto it = ops_.find(handle->value);
        if (it != ops_.end() && it->second.kind == IbOp::EXPECT) {
            auto r = peers_[it->second.peer].receiving.find(it->second.tag);
            if (r != peers_[it->second.peer].receiving.end()) {
                auto found = std::find(r->second.begin(), r->second.end(), handle->value);
                if (found != r->second.end()) r->second.erase(found);
            }
            it->second.done = true;
        }
        if (it != ops_.end() && it->second.kind == IbOp::WRITE) {
            for (auto &s : peers_[it->second.peer].sending) {
                auto &w = s.second.waiting;
                auto found = std::find(w.begin(), w.end(), handle->value);
                if (found != w.end()) {
                    w.erase(found);
                    it->second.done = true;
                }
            }
        }
        release(handle);
    }
    void release(NetHandle *handle) override {
        if (!(handle->value & kIbHandle)) return mpi_.release(handle);
        auto it = ops_.find(handle->value);
        if (it != ops_.end()) {
            if (it->second.done)
                ops_.erase(it);
            else
                orphans_.push_back(handle->value);  // erased once it ends (progress)
        }
        handle->value = 0;
    }

private:
    std::uint64_t new_op(IbOp::Kind kind, int peer, int tag, NetHandle *handle) {
        const std::uint64_t id = kIbHandle | next_op_++;
        IbOp &op = ops_[id];
        op.kind = kind;
        op.peer = peer;
        op.tag = tag;
        if (handle) handle->value = id;
        return id;
    }

    // The device this rank uses, opened on first need: false (*why) when there is none.
    bool open_device(std::string *why) {
        if (device_) return true;
        if (device_tried_) {
            *why = device_error_;
            return false;
        }
        device_tried_ = true;
        std::string name;
        int port = 1;
        if (!options_.ib_devices.empty()) {
            std::vector<std::string> names;
            std::string rest = options_.ib_devices;
            for (std::size_t comma; (comma = rest.find(',')) != std::string::npos; rest.erase(0, comma + 1))
                names.push_back(rest.substr(0, comma));
            names.push_back(rest);
            name = names[static_cast<std::size_t>(options_.world_rank) % names.size()];
        } else {
            std::string none;
            for (const RdmaPort &p : rdma_ports(&none)) {
                if (p.state == "ACTIVE") {
                    name = p.device;
                    port = p.port;
                    break;
                }
            }
            if (name.empty()) {
                device_error_ = "no RDMA device with an ACTIVE port" + (none.empty() ? "" : " (" + none + ")");
                *why = device_error_;
                return false;
            }
        }
        RcDeviceOptions o;
        o.port = port;
        o.cq_entries = 8192;
        if (RcDevice::open(name, o, &device_, &device_error_) != 0) {
            device_.reset();
            *why = device_error_;
            return false;
        }
        // The source of credits: zero-byte writes still name a registered region.
        static char credit_byte;
        if (RegisteredMemory::create(device_, &credit_byte, 1, &credit_source_, &device_error_) != 0) {
            device_.reset();
            *why = device_error_;
            return false;
        }
        return true;
    }

    // A queue pair for `peer` in INIT with its receives posted, or null.
    std::unique_ptr<RcQueuePair> make_queue_pair(int peer) {
        std::string why;
        if (!open_device(&why)) return nullptr;
        RcQueuePairOptions o;
        o.max_send_wr = kQueueDepth;
        o.max_recv_wr = kQueueDepth;
        std::unique_ptr<RcQueuePair> qp;
        if (RcQueuePair::create(device_, o, &qp, &why) != 0) return nullptr;
        for (std::uint32_t i = 0; i < qp->max_recv_wr(); ++i)
            if (qp->post_receive(static_cast<std::uint64_t>(peer), &why) != 0) return nullptr;
        by_qp_num_[qp->qp_num()] = peer;
        return qp;
    }

    void send_connect(int peer, std::uint16_t type, bool reachable) {
        Peer &p = peers_[peer];
        mpi_.wait(&p.out_handle);  // at most one before: a request, then a reply
        p.out = ConnectMessage();
        p.out.type = type;
        p.out.reachable = reachable && p.qp ? 1 : 0;
        if (p.out.reachable) p.out.address = p.qp->local_address();
        mpi_.send_control(&p.out, sizeof p.out, peer, &p.out_handle);
    }

    void request(int peer) {
        Peer &p = peers_[peer];
        p.qp = make_queue_pair(peer);
        if (!p.qp) {
            // No device here: the peer learns it when it asks (a reply says so).
            p.link = Link::TWO_SIDED;
            MPIACC_COUNT("ib.peers_two_sided");
            return;
        }
        p.link = Link::REQUESTED;
        send_connect(peer, kRequest, true);
    }

    void connect(int peer, const RcAddress &remote) {
        Peer &p = peers_[peer];
        std::string why;
        if (p.qp && p.qp->connect(remote, &why) == 0) {
            p.link = Link::CONNECTED;
            MPIACC_COUNT("ib.peers");
            return;
        }
        // Its writes to us would then fail; ours were never going to be posted.
        forget_queue_pair(p);
        p.link = Link::TWO_SIDED;
        MPIACC_COUNT("ib.connect_failed");
    }

    void forget_queue_pair(Peer &p) {
        if (p.qp) by_qp_num_.erase(p.qp->qp_num());
        p.qp.reset();
    }

    // Both ranks decide the same: a pair connects only when each side has a queue pair
    // for the other. Requests that cross connect each side to the other's request.
    void on_connect(int from, const ConnectMessage &m) {
        if (from < 0 || from >= static_cast<int>(peers_.size())) return;
        Peer &p = peers_[from];
        if (m.type == kRequest) {
            if (p.link == Link::UNKNOWN) {
                const bool allowed = options_.ib_policy == "on" || !options_.same_node || !options_.same_node(from);
                if (m.reachable && allowed) p.qp = make_queue_pair(from);
                if (p.qp) {
                    connect(from, m.address);
                } else {
                    p.link = Link::TWO_SIDED;
                    MPIACC_COUNT("ib.peers_two_sided");
                }
                send_connect(from, kReply, p.link == Link::CONNECTED);
            } else if (p.link == Link::TWO_SIDED || p.link == Link::FAILED) {
                send_connect(from, kReply, false);  // the asker goes two-sided
            } else if (p.link == Link::REQUESTED) {
                if (m.reachable) {
                    connect(from, m.address);
                } else {
                    forget_queue_pair(p);
                    p.link = Link::TWO_SIDED;
                }
            }
        } else if (m.type == kReply && p.link == Link::REQUESTED) {
            if (m.reachable) {
                connect(from, m.address);
            } else {
                forget_queue_pair(p);
                p.link = Link::TWO_SIDED;
                MPIACC_COUNT("ib.peers_two_sided");
            }
        }
    }

    bool take_control(void *msg, std::size_t capacity, int *from, std::size_t *received, bool wait) {
        for (;;) {
            char frame[kControlRoom];
            std::size_t got = 0;
            const bool some = wait ? mpi_.wait_control(frame, sizeof frame, from, &got)
                                   : mpi_.poll_control(frame, sizeof frame, from, &got);
            if (!some) return false;
            std::uint32_t magic = 0;
            if (got >= sizeof magic) std::memcpy(&magic, frame, sizeof magic);
            if (got == sizeof(ConnectMessage) && magic == ConnectMessage::kMagic) {
                ConnectMessage m;
                std::memcpy(&m, frame, sizeof m);
                on_connect(*from, m);
                continue;
            }
            *received = std::min(got, capacity);
            std::memcpy(msg, frame, *received);
            return true;
        }
    }

    // Posts what is cleared to go, in order, while the send queue has room.
    void post_ready(int peer) {
        Peer &p = peers_[peer];
        while (!p.ready.empty() && p.link == Link::CONNECTED) {
            if (p.qp->send_slots_free() == 0) {
                MPIACC_COUNT("ib.send_queue_full");
                return;
            }
            const std::uint64_t id = p.ready.front();
            auto it = ops_.find(id);
            if (it == ops_.end() || it->second.done) {
                p.ready.pop_front();
                continue;
            }
            std::string why;
            if (post(p, id, it->second, &why) != 0) {
                fail(peer, why);
                return;
            }
            p.ready.pop_front();
        }
    }

    int post(Peer &p, std::uint64_t id, IbOp &op, std::string *why) {
        const std::uint64_t wr_id = id & ~kIbHandle;
        if (op.kind == IbOp::CREDIT) {
            MPIACC_COUNT("ib.credits");
            return p.qp->post_write_with_imm(wr_id, *credit_source_, 0, 0, RcRegion(), 0,
                                             kCreditBit | static_cast<std::uint32_t>(op.tag), why);
        }
        const RegisteredMemory *from = region_of(op.src, op.len);
        if (!from) {
            // A chunk straight from the user's host buffer: registered for this write.
            if (RegisteredMemory::create(device_, const_cast<void *>(op.src), op.len, &op.own_registration, why) != 0)
                return EIO;
            MPIACC_COUNT("ib.temp_registrations");
            from = op.own_registration.get();
        }
        RcRegion dst = op.dst;
        if (!options_.fault_rkey.empty() && fault_planned(options_.fault_rkey, options_.world_rank, ++writes_))
            dst.rkey ^= 0x5a5a5a5au;
        const std::size_t offset = static_cast<const char *>(op.src) - static_cast<const char *>(from->address());
        const int rc =
            p.qp->post_write_with_imm(wr_id, *from, offset, op.len, dst, 0, static_cast<std::uint32_t>(op.tag), why);
        if (rc == 0) MPIACC_COUNT("ib.rdma_writes");
        return rc;
    }

    // The registered region holding [p, p + len), or null.
    const RegisteredMemory *region_of(const void *p, std::size_t len) const {
        const char *c = static_cast<const char *>(p);
        auto it = regions_.upper_bound(const_cast<char *>(c));
        if (it == regions_.begin()) return nullptr;
        --it;
        const char *base = static_cast<const char *>(it->second->address());
        return c >= base && c + len <= base + it->second->length() ? it->second.get() : nullptr;
    }

    // Takes the completions that are there: writes end, credits free their senders'
    // writes, chunks complete the oldest placement expected on their tag.
    void progress() {
        if (!device_) return;
        RcCompletion done[32];
        std::string why;
        int n;
        while ((n = device_->poll(done, 32, &why)) > 0) {
            for (int i = 0; i < n; ++i) on_completion(done[i]);
            if (n < 32) break;
        }
        for (auto it = orphans_.begin(); it != orphans_.end();) {
            auto op = ops_.find(*it);
            if (op == ops_.end() || op->second.done) {
                if (op != ops_.end()) ops_.erase(op);
                it = orphans_.erase(it);
            } else {
                ++it;
            }
        }
    }

    void on_completion(const RcCompletion &c) {
        auto peer_it = by_qp_num_.find(c.qp_num);
        if (peer_it == by_qp_num_.end()) return;
        const int peer = peer_it->second;
        Peer &p = peers_[peer];
        if (!c.ok()) {
            if (p.link == Link::CONNECTED) fail(peer, c.error);
            return;
        }
        if (c.kind == RcCompletion::kWrite) {
            auto it = ops_.find(kIbHandle | c.wr_id);
            if (it != ops_.end()) {
                it->second.done = true;
                it->second.own_registration.reset();
                if (it->second.kind == IbOp::CREDIT) ops_.erase(it);
            }
            post_ready(peer);
            return;
        }
        std::string why;
        if (p.qp->post_receive(static_cast<std::uint64_t>(peer), &why) != 0) {
            fail(peer, why);
            return;
        }
        if (!c.has_imm) return;
        const int tag = static_cast<int>(c.imm & ~kCreditBit);
        if (c.imm & kCreditBit) {
            Peer::Sending &s = p.sending[tag];
            if (s.waiting.empty()) {
                ++s.credits;
            } else {
                p.ready.push_back(s.waiting.front());
                s.waiting.pop_front();
            }
            if (s.credits == 0 && s.waiting.empty()) p.sending.erase(tag);
            post_ready(peer);
            return;
        }
        auto r = p.receiving.find(tag);
        if (r == p.receiving.end() || r->second.empty()) {
            MPIACC_COUNT("ib.stray_imm");
            return;
        }
        auto op = ops_.find(r->second.front());
        if (op != ops_.end()) op->second.done = true;
        r->second.pop_front();
        if (r->second.empty()) p.receiving.erase(r);
        MPIACC_COUNT("ib.writes_landed");
    }

    // The transport to `peer` failed: every op of it ends (peer_failure says why), and
    // later transfers with it go two-sided.
    void fail(int peer, const std::string &why) {
        Peer &p = peers_[peer];
        if (p.link == Link::FAILED) return;
        p.link = Link::FAILED;
        p.failure = format("RDMA to rank %d failed: %s", peer, why.c_str());
        MPIACC_COUNT("ib.qp_errors");
        for (auto &op : ops_)
            if (op.second.peer == peer) op.second.done = true;
        p.sending.clear();
        p.receiving.clear();
        p.ready.clear();
    }

    Netmod &mpi_;
    NetmodOptions options_;
    std::shared_ptr<RcDevice> device_;
    bool device_tried_ = false;
    std::string device_error_;
    std::unique_ptr<RegisteredMemory> credit_source_;
    std::map<char *, std::unique_ptr<RegisteredMemory>> regions_;
    std::vector<Peer> peers_;
    std::unordered_map<std::uint32_t, int> by_qp_num_;
    std::unordered_map<std::uint64_t, IbOp> ops_;
    std::vector<std::uint64_t> orphans_;
    std::uint64_t next_op_ = 1;
    long writes_ = 0;
};

}  // namespace

std::unique_ptr<Netmod> make_ib_netmod(Netmod &mpi, MPI_Comm, const NetmodOptions &options) {
    return std::make_unique<IbNetmod>(mpi, options);
}

}  // namespace mpiacc
