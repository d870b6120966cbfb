#include "protocol/fin_words.h"

#include <cstdio>
#include <utility>

#include "accel/accel.h"
#include "core/context.h"
#include "util/counters.h"
#include "util/error.h"

namespace mpiacc {

static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "a word shared between processes must be a lock-free atomic");

int FinWords::create(std::string *why) {
    destroy();
    int rc = create_shared_segment(kWords * sizeof(std::uint64_t), &segment_, why);
    if (rc != MPI_SUCCESS) return rc;
    free_.clear();
    free_.reserve(kWords);
    // Taken from the back: the lowest words first, which keeps the ones in use together.
    for (std::uint32_t i = kWords; i > 0; --i) free_.push_back(i - 1);
    abandoned_ = 0;
    return MPI_SUCCESS;
}

void FinWords::destroy() {
    destroy_shared_segment(&segment_);
    free_.clear();
    abandoned_ = 0;
}

FinWordsOffer FinWords::offer(int pid, std::uint64_t pid_namespace) const {
    FinWordsOffer o{};
    o.pid = pid;
    o.pid_namespace = pid_namespace;
    if (ready()) {
        o.words = kWords;
        o.where = shared_location(segment_);
    }
    return o;
}

std::atomic<std::uint64_t> *FinWords::word(int slot) const {
    return static_cast<std::atomic<std::uint64_t> *>(segment_.base) + slot;
}

int FinWords::take() {
    if (free_.empty()) return -1;
    const int slot = static_cast<int>(free_.back());
    free_.pop_back();
    // Before the envelope names it: the receiver writes only after it has the envelope.
    word(slot)->store(0, std::memory_order_relaxed);
    return slot;
}

void FinWords::release(int slot) {
    if (ready() && slot >= 0 && static_cast<std::uint32_t>(slot) < kWords)
        free_.push_back(static_cast<std::uint32_t>(slot));
}

void FinWords::abandon(int slot) {
    if (ready() && slot >= 0) ++abandoned_;
}

int FinWords::read(int slot, std::uint64_t transfer_id) const {
    if (!ready() || slot < 0 || static_cast<std::uint32_t>(slot) >= kWords) return -1;
    // Acquire: what the receiver did before its write (the pull ended) happened before
    // the sender's call returns and its buffer may change.
    const std::uint64_t v = word(slot)->load(std::memory_order_acquire);
    if ((v >> kFinStatusBits) != (transfer_id & kFinIdMask)) return -1;
    return static_cast<int>(v & ((std::uint64_t{1} << kFinStatusBits) - 1));
}

bool PeerFinWords::write(int rank, const FinWordsOffer &offer, std::uint64_t pid_namespace, std::uint32_t slot,
                         std::uint64_t value, std::string *why) {
    if (rank < 0) return false;
    if (peers_.size() <= static_cast<std::size_t>(rank)) peers_.resize(static_cast<std::size_t>(rank) + 1);
    Peer &p = peers_[static_cast<std::size_t>(rank)];
    if (p.reach == Reach::UNTRIED) {
        p.reach = Reach::UNREACHABLE;
        if (offer.words == 0 || offer.where.segment_bytes < std::uint64_t{offer.words} * sizeof(std::uint64_t)) {
            *why = format("rank %d offers no FIN words", rank);
        } else if (const char *unreachable =
                       peer_process_unreachable(rank, offer.pid, offer.pid_namespace, pid_namespace)) {
            *why = format("rank %d %s", rank, unreachable);
        } else {
            // Held for the rest of the run (one use that is never released), so it is never
            // unmapped to make room for staging segments.
            void *base = map_peer_segment(rank, offer.pid, offer.where, nullptr, why);
            if (base) {
                p.words = static_cast<std::atomic<std::uint64_t> *>(base);
                p.count = offer.words;
                p.reach = Reach::MAPPED;
            } else if (++p.map_failures < kMapAttempts) {
                p.reach = Reach::UNTRIED;  // the next pull from this rank tries again
            }
        }
    }
    if (p.reach != Reach::MAPPED || slot >= p.count) return false;
    p.words[slot].store(value, std::memory_order_release);
    return true;
}

void PeerFinWords::clear() { peers_.clear(); }

namespace {

struct FinWordsState {
    FinWords own;
    std::unordered_map<int, FinWordsOffer> offers;  // of the ranks on this node, by world rank
    PeerFinWords peers;
};

FinWordsState &fin_words_state() {
    static FinWordsState s;
    return s;
}

}  // namespace

FinWordsOffer open_fin_words(int pid, std::uint64_t pid_namespace) {
    FinWordsState &s = fin_words_state();
    const Context &ctx = context();
    if (ctx.knobs.ipc && !ctx.knobs.fault_fin_words && any_accel_has_ipc() && !s.own.ready()) {
        std::string why;
        if (s.own.create(&why) != MPI_SUCCESS && ctx.knobs.verbose >= 1)
            std::fprintf(stderr, "[mpiacc %d] no FIN words, pulls are answered by message: %s\n", ctx.world_rank,
                         why.c_str());
    }
    return s.own.offer(pid, pid_namespace);
}

void set_peer_fin_words(std::unordered_map<int, FinWordsOffer> offers) { fin_words_state().offers = std::move(offers); }

void close_fin_words() {
    FinWordsState &s = fin_words_state();
    s.own.destroy();
    s.offers.clear();
    s.peers.clear();
}

FinWords &own_fin_words() { return fin_words_state().own; }

bool write_fin_word(int rank, std::uint32_t slot, std::uint64_t transfer_id, std::uint16_t status) {
    FinWordsState &s = fin_words_state();
    auto offer = s.offers.find(rank);
    if (offer == s.offers.end()) return false;
    std::string why;
    const Context &ctx = context();
    if (s.peers.write(rank, offer->second, ctx.pid_namespace, slot, fin_word_value(transfer_id, status), &why))
        return true;
    if (!why.empty()) {
        MPIACC_COUNT("protocol.ipc.fin_word_unreachable");
        if (ctx.knobs.verbose >= 1)
            std::fprintf(stderr, "[mpiacc %d] pulls from rank %d are answered by message: %s\n", ctx.world_rank, rank,
                         why.c_str());
    }
    return false;
}

}  // namespace mpiacc
