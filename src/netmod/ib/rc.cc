#include "netmod/ib/rc.h"

#include <infiniband/verbs.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "netmod/ib/devices.h"
#include "util/error.h"

namespace mpiacc {

namespace {

// The top bit of a wr_id tells a receive from a write: an error completion's opcode is
// undefined (verbs), so the kind has to travel in the wr_id.
constexpr std::uint64_t kReceiveBit = std::uint64_t{1} << 63;

// "<verb> on <where>: <errno text> (errno N)", and the errno to return (never 0).
int verb_failed(std::string *why, const std::string &verb, const std::string &where, int err) {
    if (err <= 0) err = EIO;
    *why = format("%s on %s: %s (errno %d)", verb.c_str(), where.c_str(), std::strerror(err), err);
    return err;
}

int refuse(std::string *why, int err, const std::string &text) {
    *why = text;
    return err;
}

std::string gid_text(const std::uint8_t *gid) {
    char text[INET6_ADDRSTRLEN] = "";
    inet_ntop(AF_INET6, gid, text, sizeof text);
    return text;
}

bool all_zero(const std::uint8_t *gid) {
    return std::all_of(gid, gid + 16, [](std::uint8_t b) { return b == 0; });
}

// Lower is better: how choose_gid_index ranks an address family.
int address_rank(const std::uint8_t *gid) {
    static const std::uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(gid, v4_mapped, sizeof v4_mapped) == 0) return 2;
    if (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80) return 1;  // fe80::/10, link-local
    return 0;
}

}  // namespace

std::vector<std::uint8_t> to_bytes(const RcAddress &a) {
    std::vector<std::uint8_t> bytes(sizeof a);
    std::memcpy(bytes.data(), &a, sizeof a);
    return bytes;
}

int from_bytes(const void *bytes, std::size_t len, RcAddress *a, std::string *why) {
    if (len != sizeof(RcAddress))
        return refuse(why, EINVAL, format("RC address: %zu bytes, expected %zu", len, sizeof(RcAddress)));
    RcAddress got;
    std::memcpy(&got, bytes, sizeof got);
    if (got.magic != RcAddress::kMagic)
        return refuse(why, EINVAL,
                      format("RC address: magic 0x%08x, expected 0x%08x (another build or byte order)", got.magic,
                             RcAddress::kMagic));
    if (got.mtu < IBV_MTU_256 || got.mtu > IBV_MTU_4096)
        return refuse(why, EINVAL, format("RC address: MTU code %u is not one of ibv_mtu", got.mtu));
    if (got.ethernet > 1 || got.psn > 0xffffff)
        return refuse(why, EINVAL,
                      format("RC address: link-layer flag %u or PSN 0x%x out of range", got.ethernet, got.psn));
    *a = got;
    return 0;
}

int choose_gid_index(const std::vector<GidEntry> &table) {
    int best = -1;
    int best_rank = 0;
    for (const GidEntry &e : table) {
        if (all_zero(e.gid)) continue;
        int rank = (e.roce_v2 ? 0 : 10) + address_rank(e.gid);
        if (best < 0 || rank < best_rank || (rank == best_rank && e.index < best)) {
            best = e.index;
            best_rank = rank;
        }
    }
    return best;
}

// ------------------------------------------------------------------ device

int RcDevice::open(const std::string &name, const RcDeviceOptions &options, std::shared_ptr<RcDevice> *out,
                   std::string *why) {
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    if (!list) return verb_failed(why, "ibv_get_device_list", "this host", errno);
    ibv_device *chosen = nullptr;
    std::string seen;
    for (int i = 0; i < n; ++i) {
        const char *dev_name = ibv_get_device_name(list[i]);
        seen += std::string(seen.empty() ? "" : ", ") + (dev_name ? dev_name : "?");
        if (!chosen && dev_name && (name.empty() || name == dev_name)) chosen = list[i];
    }
    if (!chosen) {
        ibv_free_device_list(list);
        if (n == 0) return refuse(why, ENODEV, "no RDMA device found");
        return refuse(why, ENODEV, format("no RDMA device named %s (found: %s)", name.c_str(), seen.c_str()));
    }
    auto dev = std::make_shared<RcDevice>(Key{});
    dev->name_ = ibv_get_device_name(chosen);
    dev->port_ = options.port;
    dev->context_ = ibv_open_device(chosen);
    int err = errno;
    ibv_free_device_list(list);  // an open context stays valid without the list
    if (!dev->context_) return verb_failed(why, "ibv_open_device", dev->name_, err);

    std::string where = format("%s port %d", dev->name_.c_str(), options.port);
    ibv_port_attr pa;
    if ((err = ibv_query_port(dev->context_, static_cast<std::uint8_t>(options.port), &pa)) != 0)
        return verb_failed(why, "ibv_query_port", where, err);
    if (pa.state != IBV_PORT_ACTIVE)
        return refuse(why, ENETDOWN, format("%s is %s, not ACTIVE", where.c_str(), rdma_port_state_word(pa.state)));
    dev->ethernet_ = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    dev->active_mtu_ = static_cast<std::uint8_t>(pa.active_mtu);
    dev->lid_ = dev->ethernet_ ? 0 : pa.lid;
    dev->max_msg_bytes_ = pa.max_msg_sz;

    // RoCE reaches the peer by GID; InfiniBand by LID (a GRH only across subnets, not
    // supported here).
    if (dev->ethernet_) {
        int index = options.gid_index;
        if (index < 0) {
            std::vector<GidEntry> table;
            for (int i = 0; i < pa.gid_tbl_len; ++i) {
                ibv_gid_entry entry;
                if (ibv_query_gid_ex(dev->context_, static_cast<std::uint32_t>(options.port),
                                     static_cast<std::uint32_t>(i), &entry, 0) != 0)
                    continue;  // an empty entry answers ENODATA
                GidEntry g;
                g.index = i;
                g.roce_v2 = entry.gid_type == IBV_GID_TYPE_ROCE_V2;
                std::memcpy(g.gid, entry.gid.raw, sizeof g.gid);
                table.push_back(g);
            }
            index = choose_gid_index(table);
            if (index < 0)
                return refuse(why, EADDRNOTAVAIL, where + ": the GID table has no address (is the link up?)");
        } else if (index >= pa.gid_tbl_len) {
            return refuse(
                why, EINVAL,
                format("%s: GID index %d is past the table's %d entries", where.c_str(), index, pa.gid_tbl_len));
        }
        ibv_gid chosen_gid;
        if ((err = ibv_query_gid(dev->context_, static_cast<std::uint8_t>(options.port), index, &chosen_gid)) != 0)
            return verb_failed(why, format("ibv_query_gid(index %d)", index), where, err);
        if (all_zero(chosen_gid.raw))
            return refuse(why, EADDRNOTAVAIL, format("%s: GID %d is empty", where.c_str(), index));
        dev->gid_index_ = index;
        std::memcpy(dev->gid_, chosen_gid.raw, sizeof dev->gid_);
    }

    dev->pd_ = ibv_alloc_pd(dev->context_);
    if (!dev->pd_) return verb_failed(why, "ibv_alloc_pd", dev->name_, errno);
    dev->cq_ = ibv_create_cq(dev->context_, options.cq_entries, nullptr, nullptr, 0);
    if (!dev->cq_) return verb_failed(why, format("ibv_create_cq(%d entries)", options.cq_entries), dev->name_, errno);
    dev->cq_entries_ = dev->cq_->cqe;
    *out = std::move(dev);
    return 0;
}

RcDevice::~RcDevice() {
    // Queue pairs and registrations hold the device, so none is left by now.
    if (cq_) ibv_destroy_cq(cq_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (context_) ibv_close_device(context_);
}

std::string RcDevice::describe() const {
    if (ethernet_)
        return format("%s port %d (RoCE, GID %d %s)", name_.c_str(), port_, gid_index_, gid_text(gid_).c_str());
    return format("%s port %d (InfiniBand, LID %u)", name_.c_str(), port_, static_cast<unsigned>(lid_));
}

int RcDevice::reserve_cq(int entries, std::string *why) {
    if (entries > cq_entries_ - cq_reserved_)
        return refuse(why, ENOSPC,
                      format("%s: the completion queue has %d of %d entries free, a queue pair needs %d", name_.c_str(),
                             cq_entries_ - cq_reserved_, cq_entries_, entries));
    cq_reserved_ += entries;
    return 0;
}

int RcDevice::poll(RcCompletion *out, int max, std::string *why) {
    int got = 0;
    while (got < max) {
        ibv_wc wc[16];
        int want = std::min(max - got, 16);
        int n = ibv_poll_cq(cq_, want, wc);
        if (n < 0) {
            *why = format("ibv_poll_cq on %s: failed (returned %d)", name_.c_str(), n);
            return -1;
        }
        for (int i = 0; i < n; ++i) {
            RcCompletion &c = out[got++];
            c = RcCompletion();
            c.kind = (wc[i].wr_id & kReceiveBit) ? RcCompletion::kReceive : RcCompletion::kWrite;
            c.wr_id = wc[i].wr_id & ~kReceiveBit;
            c.status = wc[i].status;
            c.qp_num = wc[i].qp_num;
            if (wc[i].status == IBV_WC_SUCCESS) {
                c.opcode = wc[i].opcode;
                c.byte_len = wc[i].byte_len;
                c.has_imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) != 0;
                if (c.has_imm) c.imm = ntohl(wc[i].imm_data);
            } else {
                c.error = format("%s wr_id %llu on QP 0x%x of %s failed: %s (status %d, vendor error 0x%x)",
                                 c.kind == RcCompletion::kWrite ? "RDMA write" : "receive",
                                 static_cast<unsigned long long>(c.wr_id), c.qp_num, name_.c_str(),
                                 ibv_wc_status_str(wc[i].status), static_cast<int>(wc[i].status), wc[i].vendor_err);
            }
            auto qp = queue_pairs_.find(c.qp_num);
            if (qp != queue_pairs_.end()) qp->second->on_completion(c);
        }
        if (n < want) break;
    }
    return got;
}

// ------------------------------------------------------------------ registered memory

int RegisteredMemory::create(const std::shared_ptr<RcDevice> &device, void *base, std::size_t bytes,
                             std::unique_ptr<RegisteredMemory> *out, std::string *why) {
    if (!base || bytes == 0)
        return refuse(why, EINVAL, format("ibv_reg_mr on %s: empty region", device->name().c_str()));
    ibv_mr *mr = ibv_reg_mr(device->pd_, base, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr) return verb_failed(why, format("ibv_reg_mr(%zu bytes at %p)", bytes, base), device->name(), errno);
    auto m = std::make_unique<RegisteredMemory>(Key{});
    m->device_ = device;
    m->base_ = base;
    m->bytes_ = bytes;
    m->mr_ = mr;
    *out = std::move(m);
    return 0;
}

RegisteredMemory::~RegisteredMemory() {
    if (mr_) ibv_dereg_mr(mr_);
}

std::uint32_t RegisteredMemory::lkey() const { return mr_->lkey; }
std::uint32_t RegisteredMemory::rkey() const { return mr_->rkey; }

RcRegion RegisteredMemory::region() const {
    RcRegion r;
    r.address = reinterpret_cast<std::uintptr_t>(base_);
    r.length = bytes_;
    r.rkey = mr_->rkey;
    return r;
}

// ------------------------------------------------------------------ queue pair

int RcQueuePair::create(const std::shared_ptr<RcDevice> &device, const RcQueuePairOptions &options,
                        std::unique_ptr<RcQueuePair> *out, std::string *why) {
    if (options.max_send_wr == 0 || options.max_recv_wr == 0 || options.max_send_wr > 1u << 20 ||
        options.max_recv_wr > 1u << 20)
        return refuse(why, EINVAL,
                      format("RC queue pair on %s: depths %u (send) and %u (receive) must be 1 to 2^20",
                             device->name().c_str(), options.max_send_wr, options.max_recv_wr));
    // Every work request is signaled, so a QP can have this many completions pending.
    int share = static_cast<int>(options.max_send_wr + options.max_recv_wr);
    int err = device->reserve_cq(share, why);
    if (err) return err;
    auto qp = std::make_unique<RcQueuePair>(Key{});
    qp->device_ = device;
    qp->cq_share_ = share;  // the destructor gives it back from here on

    ibv_qp_init_attr init;
    std::memset(&init, 0, sizeof init);
    init.send_cq = device->cq_;
    init.recv_cq = device->cq_;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 1;
    init.cap.max_send_wr = options.max_send_wr;
    init.cap.max_recv_wr = options.max_recv_wr;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    qp->qp_ = ibv_create_qp(device->pd_, &init);
    if (!qp->qp_) return verb_failed(why, "ibv_create_qp(RC)", device->name(), errno);
    // The device may grant deeper queues; the CQ was sized for what was asked.
    qp->max_send_wr_ = options.max_send_wr;
    qp->max_recv_wr_ = options.max_recv_wr;
    qp->psn_ = std::random_device{}() & 0xffffff;
    device->queue_pairs_[qp->qp_->qp_num] = qp.get();

    ibv_qp_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = static_cast<std::uint8_t>(device->port_);
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if ((err = ibv_modify_qp(qp->qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
        return verb_failed(why, "ibv_modify_qp(INIT)", format("QP 0x%x of %s", qp->qp_->qp_num, device->name().c_str()),
                           err);
    *out = std::move(qp);
    return 0;
}

RcQueuePair::~RcQueuePair() {
    if (qp_) {
        device_->queue_pairs_.erase(qp_->qp_num);
        ibv_destroy_qp(qp_);
    }
    device_->cq_reserved_ -= cq_share_;
}

std::uint32_t RcQueuePair::qp_num() const { return qp_->qp_num; }

RcAddress RcQueuePair::local_address() const {
    RcAddress a;
    a.qpn = qp_->qp_num;
    a.psn = psn_;
    a.lid = device_->lid_;
    a.ethernet = device_->ethernet_ ? 1 : 0;
    a.mtu = device_->active_mtu_;
    std::memcpy(a.gid, device_->gid_, sizeof a.gid);
    return a;
}

int RcQueuePair::connect(const RcAddress &remote, std::string *why) {
    std::string where = format("QP 0x%x of %s", qp_->qp_num, device_->name().c_str());
    if (connected_) return refuse(why, EISCONN, where + ": already connected");
    if (remote.ethernet != (device_->ethernet_ ? 1 : 0))
        return refuse(
            why, EINVAL,
            format("%s: the peer's link layer is %s, this port's is %s", where.c_str(),
                   remote.ethernet ? "Ethernet" : "InfiniBand", device_->ethernet_ ? "Ethernet" : "InfiniBand"));

    ibv_qp_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = static_cast<ibv_mtu>(path_mtu(device_->active_mtu_, remote.mtu));
    attr.dest_qp_num = remote.qpn;
    attr.rq_psn = remote.psn;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;  // 0.64 ms before a sender that met no receive retries
    attr.ah_attr.port_num = static_cast<std::uint8_t>(device_->port_);
    attr.ah_attr.sl = 0;
    if (device_->ethernet_) {
        attr.ah_attr.is_global = 1;
        std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, sizeof remote.gid);
        attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(device_->gid_index_);
        attr.ah_attr.grh.hop_limit = 64;  // RoCE v2 may cross IP routers
    } else {
        attr.ah_attr.dlid = remote.lid;
    }
    int err = ibv_modify_qp(qp_, &attr,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (err)
        return verb_failed(why,
                           format("ibv_modify_qp(RTR to QP 0x%x, GID %s, LID %u)", remote.qpn,
                                  gid_text(remote.gid).c_str(), static_cast<unsigned>(remote.lid)),
                           where, err);

    std::memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = psn_;
    attr.timeout = 14;   // 4.096 us * 2^14 = 67 ms per ACK timeout
    attr.retry_cnt = 7;  // transport retries before an error completion
    attr.rnr_retry = 7;  // no limit: the receiver's credits keep receives posted
    attr.max_rd_atomic = 1;
    err = ibv_modify_qp(
        qp_, &attr,
        IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    if (err) return verb_failed(why, "ibv_modify_qp(RTS)", where, err);
    connected_ = true;
    return 0;
}

int RcQueuePair::post_write_with_imm(std::uint64_t wr_id, const RegisteredMemory &src, std::size_t src_offset,
                                     std::size_t len, const RcRegion &dst, std::size_t dst_offset, std::uint32_t imm,
                                     std::string *why) {
    std::string where = format("QP 0x%x of %s", qp_->qp_num, device_->name().c_str());
    if (!failure_.empty()) return refuse(why, EPIPE, where + " is in the error state after: " + failure_);
    if (!connected_) return refuse(why, ENOTCONN, where + ": not connected");
    if (wr_id & kReceiveBit) return refuse(why, EINVAL, where + ": wr_id uses the top bit, which the layer keeps");
    if (sends_in_flight_ >= max_send_wr_)
        return refuse(why, EAGAIN,
                      format("%s: the send queue is full (%u writes in flight)", where.c_str(), sends_in_flight_));
    if (src_offset > src.length() || len > src.length() - src_offset)
        return refuse(why, EINVAL,
                      format("%s: %zu bytes at offset %zu are outside the %zu-byte source region", where.c_str(), len,
                             src_offset, src.length()));
    if (dst_offset > dst.length || len > dst.length - dst_offset)
        return refuse(why, EINVAL,
                      format("%s: %zu bytes at offset %zu are outside the peer's %llu-byte region", where.c_str(), len,
                             dst_offset, static_cast<unsigned long long>(dst.length)));
    if (len > device_->max_msg_bytes_)
        return refuse(
            why, EMSGSIZE,
            format("%s: %zu bytes exceed the port's message limit of %u", where.c_str(), len, device_->max_msg_bytes_));
    ibv_sge sge;
    sge.addr = reinterpret_cast<std::uintptr_t>(src.address()) + src_offset;
    sge.length = static_cast<std::uint32_t>(len);
    sge.lkey = src.lkey();
    ibv_send_wr wr;
    std::memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = len ? &sge : nullptr;
    wr.num_sge = len ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm);
    wr.wr.rdma.remote_addr = dst.address + dst_offset;
    wr.wr.rdma.rkey = dst.rkey;
    ibv_send_wr *bad = nullptr;
    int err = ibv_post_send(qp_, &wr, &bad);
    if (err) return verb_failed(why, format("ibv_post_send(RDMA write with immediate, %zu bytes)", len), where, err);
    ++sends_in_flight_;
    return 0;
}

int RcQueuePair::post_receive(std::uint64_t wr_id, std::string *why) {
    std::string where = format("QP 0x%x of %s", qp_->qp_num, device_->name().c_str());
    if (!failure_.empty()) return refuse(why, EPIPE, where + " is in the error state after: " + failure_);
    if (wr_id & kReceiveBit) return refuse(why, EINVAL, where + ": wr_id uses the top bit, which the layer keeps");
    if (receives_posted_ >= max_recv_wr_)
        return refuse(why, EAGAIN,
                      format("%s: the receive queue is full (%u receives posted)", where.c_str(), receives_posted_));
    // No scatter list: a write-with-immediate puts its bytes where the writer said, and
    // the receive only carries the immediate.
    ibv_recv_wr wr;
    std::memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id | kReceiveBit;
    ibv_recv_wr *bad = nullptr;
    int err = ibv_post_recv(qp_, &wr, &bad);
    if (err) return verb_failed(why, "ibv_post_recv", where, err);
    ++receives_posted_;
    return 0;
}

void RcQueuePair::on_completion(const RcCompletion &c) {
    // Guarded: a destroyed QP's number can be reused while its last completions sit in
    // the CQ.
    if (c.kind == RcCompletion::kWrite && sends_in_flight_ > 0) --sends_in_flight_;
    if (c.kind == RcCompletion::kReceive && receives_posted_ > 0) --receives_posted_;
    if (!c.ok() && failure_.empty()) failure_ = c.error;
}

}  // namespace mpiacc
