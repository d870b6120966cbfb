// How the receiver of an IPC pull tells a sender on its node that the pull is done: it
// writes a word in the sender's shared memory, where DESIGN 2.4 sends a FIN message.
// The FIN message cost the puller a send and its test on the critical path of each small
// device-to-device message, and the sender an MPICH transit and a matched probe before
// its call could return (docs/performance.md, "IPC FIN word").
// A pull only ever happens between two processes of one node, so the word is always
// reachable where the FIN was needed, unless the processes cannot open each other's
// descriptors (another PID namespace, no permission): the receiver then sends the FIN,
// and the sender takes whichever comes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "pool/shared_memory.h"

namespace mpiacc {

// What each process tells the others at MPI_Init about its words (fixed layout: it is
// gathered as bytes).
struct FinWordsOffer {
    std::int32_t pid;
    std::uint32_t words;  // 0: none offered
    std::uint64_t pid_namespace;
    SharedLocation where;
};
static_assert(sizeof(FinWordsOffer) == 48, "FinWordsOffer is exchanged as bytes");

// What a receiver writes into word `slot` for transfer `transfer_id`: the id's low 48 bits
// and the FIN's status (0, or the MPI error class the pull failed with). Ids start at 1,
// so a written word is never 0, the value a sender clears its word to.
constexpr int kFinStatusBits = 16;
constexpr std::uint64_t kFinIdMask = (std::uint64_t{1} << (64 - kFinStatusBits)) - 1;
inline std::uint64_t fin_word_value(std::uint64_t transfer_id, std::uint16_t status) {
    return ((transfer_id & kFinIdMask) << kFinStatusBits) | status;
}

// The sender's words: a shared segment of them, one for each IPC send in flight.
class FinWords {
public:
    // Enough for every send a window of OSU's size keeps in flight, many times over; a
    // send that finds none free offers no word, and its receiver sends the FIN.
    static constexpr std::uint32_t kWords = 4096;

    FinWords() = default;
    ~FinWords() { destroy(); }
    FinWords(const FinWords &) = delete;
    FinWords &operator=(const FinWords &) = delete;

    // MPI_SUCCESS, or an MPI error class with *why.
    int create(std::string *why);
    void destroy();
    bool ready() const { return segment_.base != nullptr; }
    FinWordsOffer offer(int pid, std::uint64_t pid_namespace) const;

    // A free word, cleared; -1 when none is free.
    int take();
    // `slot` is free again: its receiver wrote it, or never will (it answered by message,
    // or the envelope never reached it).
    void release(int slot);
    // `slot`'s send went without an answer after its envelope may have matched: its
    // receiver may still write it, so it is never handed out again.
    void abandon(int slot);
    // The status the receiver wrote into `slot` for transfer `transfer_id`, or -1 while it
    // has written nothing for that transfer.
    int read(int slot, std::uint64_t transfer_id) const;

    std::size_t free_words() const { return free_.size(); }
    std::uint32_t abandoned() const { return abandoned_; }

private:
    std::atomic<std::uint64_t> *word(int slot) const;
    SharedSegment segment_;
    std::vector<std::uint32_t> free_;
    std::uint32_t abandoned_ = 0;
};

// Receiver side: the words of every sender on this node, mapped on first use.
class PeerFinWords {
public:
    // Writes `value` into word `slot` of world rank `rank`'s words, which it offered as
    // `offer`; false when they cannot be reached from here or `slot` is not one of them,
    // and the caller sends the FIN instead. *why says so each time the words are tried:
    // once where that is settled (no offer, another PID namespace, descriptors that cannot
    // be opened), and up to kMapAttempts times where mapping them failed, which may pass
    // (descriptors or mappings used up for now).
    bool write(int rank, const FinWordsOffer &offer, std::uint64_t pid_namespace, std::uint32_t slot,
               std::uint64_t value, std::string *why);
    // Forgets the mappings (MPI_Finalize unmaps every peer segment).
    void clear();

    static constexpr int kMapAttempts = 8;

private:
    enum class Reach : std::uint8_t { UNTRIED, MAPPED, UNREACHABLE };
    struct Peer {
        Reach reach = Reach::UNTRIED;
        int map_failures = 0;
        std::atomic<std::uint64_t> *words = nullptr;
        std::uint32_t count = 0;
    };
    std::vector<Peer> peers_;
};

// The process's own words and its view of everyone's, from MPI_Init to MPI_Finalize.
// Callers hold the StateLock.
//
// Before the init exchange: makes this process's words when CUDA IPC may be used
// (MPIACC_IPC on, a kind with IPC built, MPIACC_FAULT_FIN_WORDS off), and returns its offer (words 0
// when none were made).
FinWordsOffer open_fin_words(int pid, std::uint64_t pid_namespace);
// After it: the offers of the ranks on this node, by world rank (no other rank pulls).
void set_peer_fin_words(std::unordered_map<int, FinWordsOffer> offers);
// MPI_Finalize, after the last transfer.
void close_fin_words();
FinWords &own_fin_words();
// Receiver: writes the FIN of transfer `transfer_id` into sender `rank`'s word `slot`;
// false when it must go as a message.
bool write_fin_word(int rank, std::uint32_t slot, std::uint64_t transfer_id, std::uint16_t status);

}  // namespace mpiacc
