#include <cstdio>
#include <cstring>
#include <vector>

#include "core/context.h"
#include "util/counters.h"
#include "netmod/netmod.h"
#include "protocol/transfer.h"
#include "protocol/state.h"

namespace mpiacc {

namespace {

// One poll takes at most this many messages, so a flood of them cannot hold a blocking
// call inside progress indefinitely; the rest wait for the next round.
constexpr int kMessagesPerPoll = 64;

// The next control message addressed to this rank, received; false when none is there
// (or, `wait`ing for one, when the netmod fails).
// *len: its length (a CTS naming slots is longer than a control message).
bool take_control_message(ControlFrame *frame, int *from, std::size_t *len, bool wait = false) {
    const bool got = wait ? netmod().wait_control(frame, sizeof *frame, from, len)
                          : netmod().poll_control(frame, sizeof *frame, from, len);
    if (got && *len < sizeof(ControlMessage)) std::memset(&frame->msg, 0, sizeof frame->msg);  // not ours
    return got;
}

// The hints receivers send their senders outside any transfer, by world rank: RNDV_HINT
// (kHostRndvHintMin) and PULL_HINT.
struct PeerHints {
    // Sender: the smallest host payload each receiver asked to get by RTS/CTS (0: none),
    // how many receivers ask, and sends that looked for hints (take_hints_now_and_then).
    std::vector<std::size_t> asked_by;
    int asking = 0;
    unsigned sends_since_poll = 0;
    // Receiver: what this rank last told each sender (the size it asked from, 0: not
    // asked or withdrawn), and how many hints it sent to each. Sender: how many it took,
    // from anyone. MPI_Finalize takes every hint sent to this rank: MPICH would find the
    // rest unmatched (UCX warns of each).
    std::vector<std::size_t> told;
    std::vector<int> sent_to;
    int taken = 0;
    // Receiver: by world rank, whether this rank declined that sender's last small pull
    // and has not asked it for pulls again (PULL_HINT), and how many such senders.
    std::vector<std::uint8_t> declined;
    int declining = 0;
    // Hints on their way, each kept until its send completes: a few at once, whatever the
    // number of peers (DESIGN 2.7); with none free the next message asks again.
    static constexpr int kInFlight = 4;
    ControlMessage messages[kInFlight] = {};
    NetHandle requests[kInFlight] = {};
};

PeerHints &peer_hints() {
    static PeerHints h;
    const std::size_t n = static_cast<std::size_t>(context().world_size);
    if (h.asked_by.size() != n) {
        h.asked_by.assign(n, 0);
        h.asking = 0;
        h.told.assign(n, 0);
        h.sent_to.assign(n, 0);
        h.taken = 0;
        h.declined.assign(n, 0);
        h.declining = 0;
    }
    return h;
}

// Sends a hint (RNDV_HINT or PULL_HINT) to `world_peer`; false when every slot is still
// in flight or MPICH refused it (the caller then asks again at its next occasion).
bool send_hint(PeerHints &h, int world_peer, ControlType type, std::uint64_t bytes, std::uint16_t status) {
    int slot = 0;
    while (slot < PeerHints::kInFlight && !netmod().test(&h.requests[slot])) ++slot;
    if (slot == PeerHints::kInFlight) return false;
    ControlMessage &m = h.messages[slot];
    std::memset(&m, 0, sizeof m);
    m.magic = kEnvelopeMagic;
    m.type = static_cast<std::uint16_t>(type);
    m.bytes = bytes;
    m.status = status;
    if (netmod().send_control(&m, sizeof m, world_peer, &h.requests[slot]) != MPI_SUCCESS) {
        h.requests[slot] = NetHandle{};
        return false;
    }
    ++h.sent_to[world_peer];
    return true;
}

// A receiver asks for pulls again: this sender's run of staged small sends to it ends.
void on_pull_hint(int from) {
    PeerHints &h = peer_hints();
    if (from < 0 || static_cast<std::size_t>(from) >= h.asked_by.size()) return;
    ++h.taken;
    if (protocol_state().eager_sends_left) {
        protocol_state().eager_sends_left[from].store(0, std::memory_order_relaxed);
        protocol_state().eager_run[from].store(0, std::memory_order_relaxed);
    }
    MPIACC_COUNT("protocol.pull_hint.taken");
}

void on_rndv_hint(int from, const ControlMessage &msg) {
    PeerHints &h = peer_hints();
    if (from < 0 || static_cast<std::size_t>(from) >= h.asked_by.size()) return;
    ++h.taken;
    const std::size_t ask = msg.status ? std::max<std::uint64_t>(msg.bytes, 1) : 0;
    if ((h.asked_by[from] != 0) != (ask != 0)) h.asking += ask ? 1 : -1;
    h.asked_by[from] = ask;
    if (ask)
        MPIACC_COUNT("protocol.rndv_hint.taken");
    else
        MPIACC_COUNT("protocol.rndv_hint.dropped");
}

// Takes `msg` when it is a hint (RNDV_HINT or PULL_HINT); false for any other type.
bool take_hint(int from, const ControlMessage &msg) {
    switch (static_cast<ControlType>(msg.type)) {
        case ControlType::RNDV_HINT: on_rndv_hint(from, msg); return true;
        case ControlType::PULL_HINT: on_pull_hint(from); return true;
        default: return false;
    }
}

// A hint is a control message, which progress takes only while this rank has transfers
// of its own; sends it may change (host sends that may be hinted, small device sends
// staged after a decline) take the waiting ones once in this many: a probe is cheap
// beside one such send, but not free (docs/performance.md, "Rendezvous hint for host
// payloads"). Caller holds the StateLock.
constexpr unsigned kSendsPerPoll = 4;

void take_hints_now_and_then(PeerHints &h) {
    if (h.sends_since_poll++ % kSendsPerPoll == 0) poll_control_messages();
}

}  // namespace

void poll_control_messages() {
    ControlFrame frame;
    const ControlMessage &msg = frame.msg;
    int from = MPI_PROC_NULL;
    std::size_t len = 0;
    for (int k = 0; k < kMessagesPerPoll && take_control_message(&frame, &from, &len); ++k) {
        if (msg.magic != kEnvelopeMagic || take_hint(from, msg)) continue;
        if (static_cast<ControlType>(msg.type) == ControlType::ABORT) {
            auto it = protocol_state().receivers.find({from, msg.transfer_id});
            if (it != protocol_state().receivers.end()) it->second->on_abort(msg);
        } else {
            auto it = protocol_state().senders.find(msg.transfer_id);
            if (it != protocol_state().senders.end())
                it->second->on_control(msg, named_slots(frame, len));
            else
                MPIACC_COUNT("protocol.control.orphan");
        }
    }
}

void note_host_payload_route(int world_peer, std::size_t from) {
    PeerHints &h = peer_hints();
    if (world_peer < 0 || static_cast<std::size_t>(world_peer) >= h.told.size()) return;
    if (h.told[world_peer] == from) return;
    if (!send_hint(h, world_peer, ControlType::RNDV_HINT, from, from != 0)) return;
    h.told[world_peer] = from;
    if (from)
        MPIACC_COUNT("protocol.rndv_hint.asked");
    else
        MPIACC_COUNT("protocol.rndv_hint.withdrawn");
}

void note_declined_pull(int world_peer) {
    PeerHints &h = peer_hints();
    if (world_peer < 0 || static_cast<std::size_t>(world_peer) >= h.declined.size() || h.declined[world_peer]) return;
    h.declined[world_peer] = 1;
    ++h.declining;
}

void note_small_device_payload(MPI_Comm comm, int peer) {
    PeerHints &h = peer_hints();
    if (h.declining == 0) return;  // the common case: no world rank lookup
    const int world_peer = world_rank_of(comm, peer);
    if (world_peer < 0 || static_cast<std::size_t>(world_peer) >= h.declined.size() || !h.declined[world_peer]) return;
    // The payload may have been host data, not a staged device send: the sender then
    // offers its next small device send again, which costs one more decline at worst.
    if (!send_hint(h, world_peer, ControlType::PULL_HINT, 0, 1)) return;
    h.declined[world_peer] = 0;
    --h.declining;
    MPIACC_COUNT("protocol.pull_hint.sent");
}

void poll_pull_hints() {
    StateLock lock;
    take_hints_now_and_then(peer_hints());
}

bool host_rndv_hinted(MPI_Comm comm, int dest, std::size_t bytes) {
    StateLock lock;
    PeerHints &h = peer_hints();
    take_hints_now_and_then(h);
    if (h.asking == 0) return false;
    const int peer = world_rank_of(comm, dest);
    if (peer < 0 || static_cast<std::size_t>(peer) >= h.asked_by.size()) return false;
    const std::size_t ask = h.asked_by[peer];
    if (ask == 0 || bytes < ask) return false;
    MPIACC_COUNT("protocol.send.host_rndv_hinted");
    return true;
}

void finish_peer_hints() {
    PeerHints &h = peer_hints();
    // How many hints were sent to this rank, summed over the senders; every rank takes
    // part, whatever its own knob. A hint still on its way is counted by its sender, and
    // this rank waits for it below: its sender's request completes only once it is taken
    // if MPICH sent it by rendezvous, so the sends are waited for last.
    int expected = 0;
    ControlFrame frame;
    const ControlMessage &msg = frame.msg;
    int from = MPI_PROC_NULL;
    std::size_t len = 0;
    if (netmod().sum_sent_to_me(h.sent_to.data(), &expected) == MPI_SUCCESS) {
        while (h.taken < expected && take_control_message(&frame, &from, &len, true))
            if (msg.magic != kEnvelopeMagic || !take_hint(from, msg)) MPIACC_COUNT("protocol.control.orphan");
    }
    for (NetHandle &r : h.requests) netmod().wait(&r);
    h = PeerHints{};  // every request is null again
}

void drain_control_messages() {
    ControlFrame frame;
    int from = MPI_PROC_NULL;
    std::size_t len = 0;
    while (take_control_message(&frame, &from, &len)) MPIACC_COUNT("protocol.control.orphan");
}

}  // namespace mpiacc
