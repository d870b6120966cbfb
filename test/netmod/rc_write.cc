// The RC connection and RDMA-write layer (src/netmod/ib/rc.h) between two devices, with
// neither MPI nor MPI-ACC's library: test/user/rxe_vm.sh runs it in the soft-RoCE VM
// (rxe0 and rxe1 on a veth pair), which has no CUDA runtime.
//
//   rc_write [DEVICE_A DEVICE_B]     (default $RXE_DEV_A and $RXE_DEV_B, else the first
//                                     device for both; GID index $RXE_GID_INDEX, else chosen)
//
// First across two processes (forked before either touches verbs; the addresses and the
// slot region go through a socketpair, as they will between ranks), then within one
// process, then a write with a wrong rkey. Where no RDMA device exists the device cases
// skip, by name, with the reason verbs gave. TAP output.
#include <infiniband/verbs.h>

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "netmod/ib/rc.h"
#include "util/error.h"

using mpiacc::RcAddress;
using mpiacc::RcCompletion;
using mpiacc::RcDevice;
using mpiacc::RcQueuePair;
using mpiacc::RcRegion;
using mpiacc::RegisteredMemory;

namespace {

int tap_count = 0;
int tap_failed = 0;

void tap(bool ok, const char *name, const std::string &diag = "") {
    ++tap_count;
    if (!ok) ++tap_failed;
    std::printf("%sok %d - %s\n", ok ? "" : "not ", tap_count, name);
    if (!diag.empty()) {
        std::string line;
        for (char c : diag + "\n") {
            if (c == '\n') {
                std::printf("# %s\n", line.c_str());
                line.clear();
            } else {
                line += c;
            }
        }
    }
    std::fflush(stdout);
}

void skip(const char *name, const std::string &why) {
    std::printf("ok %d - %s # SKIP %s\n", ++tap_count, name, why.c_str());
    std::fflush(stdout);
}

constexpr double kTimeoutSeconds = 30;

// Chunk sizes: a byte, a page, a MiB, sizes that are no multiple of any MTU, a byte again.
const std::vector<std::size_t> kSizes = {1, 4096, 1 << 20, 12411, 4095, 1};
constexpr std::size_t kGuard = 64;
constexpr std::uint8_t kGuardByte = 0xee;
constexpr std::uint8_t kSlotFill = 0x00;

// The receiver's buffer: a guard, slot 0, a guard, slot 1, ..., a guard.
struct Layout {
    std::vector<std::size_t> slot_offset;
    std::size_t total = 0;
    std::size_t source_total = 0;  // the writer's chunks back to back
    std::vector<std::size_t> source_offset;
    Layout() {
        std::size_t at = kGuard, src = 0;
        for (std::size_t s : kSizes) {
            slot_offset.push_back(at);
            source_offset.push_back(src);
            at += s + kGuard;
            src += s;
        }
        total = at;
        source_total = src;
    }
};

std::uint8_t pattern(std::size_t chunk, std::size_t k) {
    // Never kSlotFill, so even the one-byte chunks show that they arrived.
    std::uint8_t b = static_cast<std::uint8_t>(((k * 2654435761u) >> 11) + chunk * 37 + 1);
    return b == kSlotFill ? 0x5a : b;
}

std::vector<std::uint8_t> source_bytes(const Layout &l) {
    std::vector<std::uint8_t> v(l.source_total);
    for (std::size_t i = 0; i < kSizes.size(); ++i)
        for (std::size_t k = 0; k < kSizes[i]; ++k) v[l.source_offset[i] + k] = pattern(i, k);
    return v;
}

std::vector<std::uint8_t> slot_bytes(const Layout &l) {
    std::vector<std::uint8_t> v(l.total, kGuardByte);
    for (std::size_t i = 0; i < kSizes.size(); ++i) std::memset(&v[l.slot_offset[i]], kSlotFill, kSizes[i]);
    return v;
}

// The first wrong byte of the slots (chunks [0, arrived) written, the rest untouched) or
// of a guard, as a message; empty when all are right.
std::string check_slots(const Layout &l, const std::uint8_t *buf, std::size_t arrived) {
    std::size_t guard_at = 0;
    for (std::size_t i = 0; i <= kSizes.size(); ++i) {
        std::size_t end = i < kSizes.size() ? l.slot_offset[i] : l.total;
        for (std::size_t k = guard_at; k < end; ++k)
            if (buf[k] != kGuardByte)
                return mpiacc::format("guard byte at offset %zu (before slot %zu) is 0x%02x, expected 0x%02x", k, i,
                                      buf[k], kGuardByte);
        if (i == kSizes.size()) break;
        for (std::size_t k = 0; k < kSizes[i]; ++k) {
            std::uint8_t want = i < arrived ? pattern(i, k) : kSlotFill;
            if (buf[l.slot_offset[i] + k] != want)
                return mpiacc::format("slot %zu (%zu bytes) byte %zu is 0x%02x, expected 0x%02x", i, kSizes[i], k,
                                      buf[l.slot_offset[i] + k], want);
        }
        guard_at = l.slot_offset[i] + kSizes[i];
    }
    return "";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Names {
    std::string a, b;
    int gid_index = -1;
    bool named = false;  // by argv or the environment: then a device that fails is a failure
};

// Whether a failed open means "nothing to test here" rather than a failure: no device at
// all, or no device was named and the first one is unusable.
bool nothing_to_test(const Names &names, const std::string &why) {
    return why.find("ibv_get_device_list") == 0 || why == "no RDMA device found" || !names.named;
}

// What the writer saw: the receives' immediates in arrival order (when it polls the
// receiver too), how deep the send queue got, and what a post into a full queue said.
struct WriteRun {
    std::vector<std::uint32_t> imms;
    std::vector<std::uint32_t> lengths;  // byte_len of each receive: the write's size
    std::vector<std::string> receive_errors;
    std::uint32_t deepest = 0;
    int full_err = 0;
    std::string full_why;
};

// Posts every chunk from src to dst, at most qp.max_send_wr() in flight, and polls until
// each write has completed (and, with `receiver`, each receive too). Returns "" or what
// went wrong; bounded by kTimeoutSeconds.
std::string write_chunks(const Layout &l, RcDevice &dev, RcQueuePair &qp, const RegisteredMemory &src,
                         const RcRegion &dst, RcDevice *receiver, std::uint32_t receiver_qpn, WriteRun *run) {
    std::size_t posted = 0, written = 0;
    auto t0 = std::chrono::steady_clock::now();
    std::string why;
    while (written < kSizes.size() || (receiver && run->imms.size() + run->receive_errors.size() < kSizes.size())) {
        while (posted < kSizes.size() && qp.send_slots_free() > 0) {
            if (qp.post_write_with_imm(posted, src, l.source_offset[posted], kSizes[posted], dst, l.slot_offset[posted],
                                       static_cast<std::uint32_t>(posted), &why) != 0)
                return "post of chunk " + std::to_string(posted) + ": " + why;
            ++posted;
            run->deepest = std::max(run->deepest, qp.sends_in_flight());
            // Once, with the queue full and nothing polled: the layer must refuse.
            if (qp.send_slots_free() == 0 && run->full_why.empty()) {
                run->full_err = qp.post_write_with_imm(99, src, 0, 1, dst, l.slot_offset[0], 99, &run->full_why);
                if (run->full_err == 0) return "a write beyond max_send_wr was accepted";
            }
        }
        RcCompletion c[8];
        for (RcDevice *d : {&dev, receiver}) {
            if (!d || (d == receiver && receiver == &dev)) continue;
            int n = d->poll(c, 8, &why);
            if (n < 0) return why;
            for (int i = 0; i < n; ++i) {
                if (c[i].qp_num == qp.qp_num() && c[i].kind == RcCompletion::kWrite) {
                    if (!c[i].ok()) return c[i].error;
                    if (c[i].opcode != IBV_WC_RDMA_WRITE)
                        return mpiacc::format("write completion with opcode %d, expected IBV_WC_RDMA_WRITE",
                                              c[i].opcode);
                    ++written;
                } else if (receiver && c[i].qp_num == receiver_qpn && c[i].kind == RcCompletion::kReceive) {
                    if (!c[i].ok())
                        run->receive_errors.push_back(c[i].error);
                    else if (c[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM || !c[i].has_imm)
                        run->receive_errors.push_back(
                            mpiacc::format("receive completion with opcode %d, imm %d", c[i].opcode, c[i].has_imm));
                    else {
                        run->imms.push_back(c[i].imm);
                        run->lengths.push_back(c[i].byte_len);
                    }
                }
            }
        }
        if (seconds_since(t0) > kTimeoutSeconds)
            return mpiacc::format("timed out after %.0f s: %zu of %zu writes completed, %zu receives", kTimeoutSeconds,
                                  written, kSizes.size(), run->imms.size());
    }
    return "";
}

std::string imm_order_problem(const WriteRun &run) {
    if (!run.receive_errors.empty()) return run.receive_errors.front();
    if (run.imms.size() != kSizes.size())
        return mpiacc::format("%zu receive completions, expected %zu", run.imms.size(), kSizes.size());
    for (std::size_t i = 0; i < run.imms.size(); ++i) {
        if (run.imms[i] != i) return mpiacc::format("receive %zu carried imm %u, expected %zu", i, run.imms[i], i);
        if (run.lengths[i] != kSizes[i])
            return mpiacc::format("receive %zu reports %u bytes, the write was %zu", i, run.lengths[i], kSizes[i]);
    }
    return "";
}

// --------------------------------------------------------------- pure logic (any host)

void address_cases() {
    RcAddress a;
    a.qpn = 0x1234;
    a.psn = 0xabcdef;
    a.lid = 7;
    a.ethernet = 1;
    a.mtu = IBV_MTU_1024;
    for (int i = 0; i < 16; ++i) a.gid[i] = static_cast<std::uint8_t>(0xf0 + i);
    std::vector<std::uint8_t> bytes = mpiacc::to_bytes(a);
    RcAddress back;
    std::string why, bad_magic, bad_len;
    bool ok = bytes.size() == 32 && mpiacc::from_bytes(bytes.data(), bytes.size(), &back, &why) == 0 &&
              std::memcmp(&a, &back, sizeof a) == 0;
    bytes[0] ^= 0xff;
    ok = ok && mpiacc::from_bytes(bytes.data(), bytes.size(), &back, &bad_magic) == EINVAL &&
         bad_magic.find("magic") != std::string::npos;
    ok = ok && mpiacc::from_bytes(bytes.data(), 31, &back, &bad_len) == EINVAL &&
         bad_len.find("31 bytes") != std::string::npos;
    tap(ok, "rc_address_round_trips_as_bytes_and_bad_bytes_are_named",
        (why.empty() ? "" : why + "\n") + bad_magic + "\n" + bad_len);

    auto entry = [](int index, bool v2, std::vector<std::uint8_t> head) {
        mpiacc::GidEntry e;
        e.index = index;
        e.roce_v2 = v2;
        std::memcpy(e.gid, head.data(), std::min<std::size_t>(head.size(), 16));
        e.gid[15] = 1;
        return e;
    };
    std::vector<std::uint8_t> link = {0xfe, 0x80}, global = {0x20, 0x01, 0x0d, 0xb8},
                              v4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0};
    std::vector<mpiacc::GidEntry> t = {entry(0, false, global), entry(1, true, v4), entry(2, true, link),
                                       entry(3, true, global)};
    mpiacc::GidEntry empty;
    empty.index = 4;
    int all = mpiacc::choose_gid_index(t);
    int no_global = mpiacc::choose_gid_index({t[0], t[1], t[2]});
    int v4_or_v1 = mpiacc::choose_gid_index({t[0], t[1]});
    int only_v1 = mpiacc::choose_gid_index({t[0], empty});
    int none = mpiacc::choose_gid_index({empty});
    tap(all == 3 && no_global == 2 && v4_or_v1 == 1 && only_v1 == 0 && none == -1,
        "rc_gid_choice_prefers_roce_v2_then_global_then_link_local_ipv6",
        mpiacc::format("chose %d %d %d %d %d, expected 3 2 1 0 -1", all, no_global, v4_or_v1, only_v1, none));
    tap(mpiacc::path_mtu(IBV_MTU_4096, IBV_MTU_1024) == IBV_MTU_1024 &&
            mpiacc::path_mtu(IBV_MTU_1024, IBV_MTU_2048) == IBV_MTU_1024,
        "rc_path_mtu_is_the_smaller_of_both_ends");

    std::shared_ptr<RcDevice> dev;
    int err = RcDevice::open("no-such-rdma-device", {}, &dev, &why);
    tap(err != 0 && !dev &&
            (why.find("no-such-rdma-device") != std::string::npos || why.find("ibv_get_device_list") == 0 ||
             why == "no RDMA device found"),
        "rc_open_of_a_missing_device_says_why", mpiacc::format("error %d: %s", err, why.c_str()));
}

// --------------------------------------------------------------- two processes

// A fixed-size message on the socketpair; `why` is empty when `err` is 0.
struct Hello {
    int err = 0;
    RcAddress address;
    RcRegion region;
    char why[400] = "";
};
struct Verdict {
    int err = 0;
    char why[400] = "";
};

void set_why(char (&dst)[400], const std::string &s) { std::snprintf(dst, sizeof dst, "%s", s.c_str()); }

bool send_all(int fd, const void *p, std::size_t n) {
    const char *c = static_cast<const char *>(p);
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        c += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}

bool recv_all(int fd, void *p, std::size_t n) {
    char *c = static_cast<char *>(p);
    auto t0 = std::chrono::steady_clock::now();
    while (n > 0) {
        pollfd pfd = {fd, POLLIN, 0};
        int left_ms = static_cast<int>((kTimeoutSeconds - seconds_since(t0)) * 1000);
        if (left_ms <= 0 || poll(&pfd, 1, left_ms) <= 0) return false;
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        c += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}

// The receiving process: device B, slots, receives posted before it connects.
int receiver_process(int fd, const Names &names) {
    Layout l;
    std::vector<std::uint8_t> slots = slot_bytes(l);
    Hello me, peer;
    std::shared_ptr<RcDevice> dev;
    std::unique_ptr<RcQueuePair> qp;
    std::unique_ptr<RegisteredMemory> mr;
    std::string why;
    mpiacc::RcDeviceOptions o;
    o.gid_index = names.gid_index;
    me.err = RcDevice::open(names.b, o, &dev, &why);
    if (!me.err) me.err = RcQueuePair::create(dev, {}, &qp, &why);
    if (!me.err) me.err = RegisteredMemory::create(dev, slots.data(), slots.size(), &mr, &why);
    for (std::size_t i = 0; !me.err && i < kSizes.size(); ++i) me.err = qp->post_receive(i, &why);
    if (!me.err) {
        me.address = qp->local_address();
        me.region = mr->region();
    }
    set_why(me.why, why);
    if (!send_all(fd, &me, sizeof me) || me.err) return 1;
    if (!recv_all(fd, &peer, sizeof peer) || peer.err) return 1;
    // The writer's address arrives as bytes, as it would from another rank.
    RcAddress remote;
    Verdict v;
    v.err = mpiacc::from_bytes(&peer.address, sizeof peer.address, &remote, &why);
    if (!v.err) v.err = qp->connect(remote, &why);
    set_why(v.why, why);
    if (!send_all(fd, &v, sizeof v) || v.err) return 1;

    WriteRun run;
    RcCompletion c[8];
    auto t0 = std::chrono::steady_clock::now();
    while (run.imms.size() + run.receive_errors.size() < kSizes.size() && seconds_since(t0) < kTimeoutSeconds) {
        int n = dev->poll(c, 8, &why);
        if (n < 0) run.receive_errors.push_back(why);
        for (int i = 0; i < n; ++i) {
            if (!c[i].ok())
                run.receive_errors.push_back(c[i].error);
            else if (c[i].kind == RcCompletion::kReceive && c[i].has_imm) {
                run.imms.push_back(c[i].imm);
                run.lengths.push_back(c[i].byte_len);
            }
        }
        if (n <= 0) usleep(100);
    }
    std::string problem = imm_order_problem(run);
    if (problem.empty()) problem = check_slots(l, slots.data(), kSizes.size());
    v.err = problem.empty() ? 0 : 1;
    set_why(v.why, problem);
    send_all(fd, &v, sizeof v);
    return v.err;
}

void two_process_cases(const Names &names) {
    const char *connect_name = "rc_two_processes_connect_through_a_socketpair";
    const char *write_name = "rc_two_processes_chunks_arrive_in_order_with_bytes_and_guards";
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        tap(false, connect_name, std::string("socketpair: ") + std::strerror(errno));
        tap(false, write_name, "not run");
        return;
    }
    std::fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        close(sv[0]);
        _exit(receiver_process(sv[1], names));
    }
    close(sv[1]);
    int fd = sv[0];

    Layout l;
    std::vector<std::uint8_t> source = source_bytes(l);
    Hello me, peer;
    Verdict connected, verdict;
    std::shared_ptr<RcDevice> dev;
    std::unique_ptr<RcQueuePair> qp;
    std::unique_ptr<RegisteredMemory> mr;
    std::string why;
    mpiacc::RcDeviceOptions o;
    o.gid_index = names.gid_index;
    mpiacc::RcQueuePairOptions qo;
    qo.max_send_wr = 2;
    me.err = RcDevice::open(names.a, o, &dev, &why);
    std::string open_why = why;
    if (!me.err) me.err = RcQueuePair::create(dev, qo, &qp, &why);
    if (!me.err) me.err = RegisteredMemory::create(dev, source.data(), source.size(), &mr, &why);
    if (!me.err) me.address = qp->local_address();
    set_why(me.why, why);
    bool got_peer = recv_all(fd, &peer, sizeof peer);
    send_all(fd, &me, sizeof me);
    if (me.err && !open_why.empty() && nothing_to_test(names, open_why)) {
        skip(connect_name, open_why);
        skip(write_name, open_why);
    } else {
        std::string problem;
        if (me.err)
            problem = "writer: " + why;
        else if (!got_peer)
            problem = "no address from the receiving process";
        else if (peer.err)
            problem = std::string("receiver: ") + peer.why;
        RcAddress remote;
        if (problem.empty() && mpiacc::from_bytes(&peer.address, sizeof peer.address, &remote, &why) != 0)
            problem = why;
        if (problem.empty() && qp->connect(remote, &why) != 0) problem = "writer: " + why;
        // The receiver must be at RTR before the first write reaches it.
        if (problem.empty() && !recv_all(fd, &connected, sizeof connected)) problem = "receiver did not answer";
        if (problem.empty() && connected.err) problem = std::string("receiver: ") + connected.why;
        tap(problem.empty(), connect_name,
            problem.empty() ? "writer " + dev->describe() + mpiacc::format(", receiver QP 0x%x", peer.address.qpn)
                            : problem);
        if (problem.empty()) {
            WriteRun run;
            problem = write_chunks(l, *dev, *qp, *mr, peer.region, nullptr, 0, &run);
            if (problem.empty() && !recv_all(fd, &verdict, sizeof verdict)) problem = "no verdict from the receiver";
            if (problem.empty() && verdict.err) problem = std::string("receiver: ") + verdict.why;
            if (problem.empty() && run.deepest < 2) problem = "never more than one write in flight";
        }
        tap(problem.empty(), write_name,
            problem.empty() ? mpiacc::format("%zu chunks, imms in order, up to 2 in flight", kSizes.size()) : problem);
    }
    close(fd);
    // Bounded: the receiver polls for kTimeoutSeconds at most, then it is killed.
    int status = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (waitpid(child, &status, WNOHANG) == 0) {
        if (seconds_since(t0) > kTimeoutSeconds + 5) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            break;
        }
        usleep(10000);
    }
}

// --------------------------------------------------------------- one process

struct Pair {
    std::unique_ptr<RcQueuePair> a, b;
};

std::string connect_pair(const std::shared_ptr<RcDevice> &da, const std::shared_ptr<RcDevice> &db, std::size_t receives,
                         Pair *p) {
    std::string why;
    mpiacc::RcQueuePairOptions qo;
    qo.max_send_wr = 2;
    if (RcQueuePair::create(da, qo, &p->a, &why) || RcQueuePair::create(db, {}, &p->b, &why)) return why;
    for (std::size_t i = 0; i < receives; ++i)
        if (p->b->post_receive(i, &why)) return why;
    // Through the bytes each would send the other.
    std::vector<std::uint8_t> wire_a = mpiacc::to_bytes(p->a->local_address());
    std::vector<std::uint8_t> wire_b = mpiacc::to_bytes(p->b->local_address());
    RcAddress addr_a, addr_b;
    if (mpiacc::from_bytes(wire_a.data(), wire_a.size(), &addr_a, &why) ||
        mpiacc::from_bytes(wire_b.data(), wire_b.size(), &addr_b, &why) || p->a->connect(addr_b, &why) ||
        p->b->connect(addr_a, &why))
        return why;
    return "";
}

void one_process_cases(const Names &names) {
    const char *names_list[] = {"rc_one_process_connects_two_devices_init_rtr_rts",
                                "rc_write_refuses_a_post_beyond_max_send_wr",
                                "rc_write_chunks_arrive_with_imms_in_order",
                                "rc_write_bytes_match_the_pattern_and_guards_are_untouched",
                                "rc_layer_refuses_bad_requests_with_messages",
                                "rc_write_with_a_wrong_rkey_completes_in_error_with_a_message",
                                "rc_queue_pair_refuses_work_after_an_error_completion"};
    std::shared_ptr<RcDevice> da, db;
    std::string why;
    // The GID each device chooses for itself (choose_gid_index).
    mpiacc::RcDeviceOptions o;
    int err = RcDevice::open(names.a, o, &da, &why);
    if (!err) err = RcDevice::open(names.b, o, &db, &why);
    if (err && nothing_to_test(names, why)) {
        for (const char *n : names_list) skip(n, why);
        return;
    }
    Layout l;
    std::vector<std::uint8_t> source = source_bytes(l), slots = slot_bytes(l);
    std::unique_ptr<RegisteredMemory> src, dst;
    Pair p;
    std::string problem = err ? why : "";
    if (problem.empty() && (RegisteredMemory::create(da, source.data(), source.size(), &src, &why) ||
                            RegisteredMemory::create(db, slots.data(), slots.size(), &dst, &why)))
        problem = why;
    if (problem.empty()) problem = connect_pair(da, db, kSizes.size(), &p);
    tap(problem.empty(), names_list[0], problem.empty() ? da->describe() + " -> " + db->describe() : problem);
    if (!problem.empty()) {
        for (int i = 1; i < 7; ++i) tap(false, names_list[i], "not run: the queue pairs did not connect");
        return;
    }

    WriteRun run;
    problem = write_chunks(l, *da, *p.a, *src, dst->region(), db.get(), p.b->qp_num(), &run);
    tap(run.full_err == EAGAIN && run.full_why.find("send queue is full") != std::string::npos && run.deepest == 2,
        names_list[1],
        mpiacc::format("error %d: %s; deepest %u of max_send_wr %u", run.full_err, run.full_why.c_str(), run.deepest,
                       p.a->max_send_wr()));
    if (problem.empty()) problem = imm_order_problem(run);
    std::string imms;
    for (std::uint32_t i : run.imms) imms += " " + std::to_string(i);
    tap(problem.empty(), names_list[2],
        problem.empty() ? "imms" + imms + ", each receive's byte_len its write's size" : problem);
    std::string bytes = check_slots(l, slots.data(), problem.empty() ? kSizes.size() : run.imms.size());
    tap(bytes.empty(), names_list[3],
        bytes.empty() ? mpiacc::format("%zu slots, %zu guards", kSizes.size(), kSizes.size() + 1) : bytes);

    // Requests the layer must refuse before verbs sees them, each with its reason.
    std::vector<std::string> refusals;
    auto refused = [&](int got, int want, const char *words) {
        refusals.push_back(mpiacc::format("error %d: %s", got, why.c_str()));
        return got == want && why.find(words) != std::string::npos;
    };
    std::unique_ptr<RcQueuePair> lone, huge;
    mpiacc::RcQueuePairOptions deep;
    deep.max_send_wr = 1u << 20;
    bool ok = RcQueuePair::create(da, {}, &lone, &why) == 0;
    ok = ok && refused(lone->post_write_with_imm(1, *src, 0, 1, dst->region(), 0, 1, &why), ENOTCONN, "not connected");
    ok = ok && refused(p.a->post_write_with_imm(1, *src, 0, 2, dst->region(), l.total - 1, 1, &why), EINVAL,
                       "outside the peer's");
    ok = ok && refused(p.a->post_write_with_imm(1, *src, l.source_total, 1, dst->region(), 0, 1, &why), EINVAL,
                       "outside the");
    ok = ok && refused(p.a->post_write_with_imm(std::uint64_t{1} << 63, *src, 0, 1, dst->region(), 0, 1, &why), EINVAL,
                       "top bit");
    ok = ok && refused(RcQueuePair::create(da, deep, &huge, &why), ENOSPC, "completion queue");
    ok = ok && !huge && p.a->sends_in_flight() == 0 && check_slots(l, slots.data(), kSizes.size()).empty();
    std::string all;
    for (const std::string &r : refusals) all += (all.empty() ? "" : "\n") + r;
    tap(ok, names_list[4], all);

    // A wrong rkey, on a fresh pair: the responder refuses it and the writer's completion
    // says so. The slots must stay as they were.
    Pair bad;
    problem = connect_pair(da, db, 1, &bad);
    RcRegion wrong = dst->region();
    wrong.rkey ^= 0xff;
    std::vector<std::uint8_t> before = slots;
    RcCompletion failed;
    bool got = false;
    if (problem.empty() && bad.a->post_write_with_imm(7, *src, 0, 4096, wrong, l.slot_offset[1], 7, &why))
        problem = why;
    std::vector<std::string> receiver_side;
    auto t0 = std::chrono::steady_clock::now();
    while (problem.empty() && !got && seconds_since(t0) < kTimeoutSeconds) {
        RcCompletion c[8];
        for (RcDevice *d : {da.get(), db.get()}) {
            if (d == db.get() && db == da) continue;
            int n = d->poll(c, 8, &why);
            if (n < 0) problem = why;
            for (int i = 0; i < n; ++i) {
                if (c[i].qp_num == bad.a->qp_num() && c[i].kind == RcCompletion::kWrite) {
                    failed = c[i];
                    got = true;
                } else if (!c[i].ok()) {
                    receiver_side.push_back(c[i].error);
                }
            }
        }
    }
    if (problem.empty() && !got) problem = mpiacc::format("no completion within %.0f s", kTimeoutSeconds);
    if (problem.empty() && failed.status != IBV_WC_REM_ACCESS_ERR)
        problem = "status " + std::to_string(failed.status) + ", expected IBV_WC_REM_ACCESS_ERR: " + failed.error;
    if (problem.empty() && (failed.error.find("remote access error") == std::string::npos ||
                            failed.error.find("RDMA write wr_id 7") == std::string::npos))
        problem = "message does not name the write and the status: " + failed.error;
    if (problem.empty() && slots != before)
        problem = "the slots changed: " + check_slots(l, slots.data(), kSizes.size());
    std::string diag = problem.empty() ? failed.error : problem;
    for (const std::string &e : receiver_side) diag += "\nreceiver side: " + e;
    tap(problem.empty(), names_list[5], diag);

    err = bad.a->post_write_with_imm(8, *src, 0, 1, dst->region(), l.slot_offset[0], 8, &why);
    tap(err == EPIPE && why.find("error state") != std::string::npos && bad.a->failure() == failed.error &&
            bad.a->sends_in_flight() == 0,
        names_list[6], mpiacc::format("error %d: %s", err, why.c_str()));
}

}  // namespace

int main(int argc, char **argv) {
    Names names;
    const char *a = std::getenv("RXE_DEV_A");
    const char *b = std::getenv("RXE_DEV_B");
    const char *g = std::getenv("RXE_GID_INDEX");
    names.a = argc > 2 ? argv[1] : (a ? a : "");
    names.b = argc > 2 ? argv[2] : (b ? b : "");
    names.named = argc > 2 || (a && *a && b && *b);
    if (g && *g) names.gid_index = std::atoi(g);
    // A receiving process that has gone must not take the writer down with it.
    signal(SIGPIPE, SIG_IGN);
    std::printf("1..13\n");
    address_cases();
    two_process_cases(names);  // first: nothing of verbs is open yet when it forks
    one_process_cases(names);
    std::printf("# %d of %d failed\n", tap_failed, tap_count);
    return tap_failed ? 1 : 0;
}
