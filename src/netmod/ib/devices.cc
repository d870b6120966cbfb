#include "netmod/ib/devices.h"

#include "config.h"

#ifdef MPIACC_HAVE_IB
#include <infiniband/verbs.h>

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#endif

#include "util/error.h"

namespace mpiacc {

#ifdef MPIACC_HAVE_IB
namespace {

int mtu_bytes(ibv_mtu m) { return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 0; }

// The port's non-zero GIDs, as the netmod will offer them to its peers.
void read_gids(ibv_context *ctx, int port, int table_len, RdmaPort *out) {
    for (int i = 0; i < table_len; ++i) {
        ibv_gid gid;
        if (ibv_query_gid(ctx, static_cast<std::uint8_t>(port), i, &gid) != 0) break;
        bool zero = true;
        for (unsigned char b : gid.raw) zero = zero && b == 0;
        if (zero) continue;
        char text[INET6_ADDRSTRLEN] = "";
        inet_ntop(AF_INET6, gid.raw, text, sizeof text);
        out->gids.push_back(std::to_string(i) + ":" + text);
    }
}

}  // namespace

const char *rdma_port_state_word(int state) {
    switch (state) {
        case IBV_PORT_DOWN: return "DOWN";
        case IBV_PORT_INIT: return "INIT";
        case IBV_PORT_ARMED: return "ARMED";
        case IBV_PORT_ACTIVE: return "ACTIVE";
        case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
        default: return "NOP";
    }
}

std::vector<RdmaPort> rdma_ports(std::string *why) {
    std::vector<RdmaPort> ports;
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    if (!list) {
        *why = format("ibv_get_device_list: %s", std::strerror(errno));
        return ports;
    }
    if (n == 0) *why = "no RDMA device found";
    for (int d = 0; d < n; ++d) {
        const char *name = ibv_get_device_name(list[d]);
        ibv_context *ctx = ibv_open_device(list[d]);
        ibv_device_attr attr;
        if (!ctx || ibv_query_device(ctx, &attr) != 0) {
            *why = format("%s: cannot be opened or queried", name ? name : "?");
            if (ctx) ibv_close_device(ctx);
            continue;
        }
        for (int p = 1; p <= attr.phys_port_cnt; ++p) {
            ibv_port_attr pa;
            if (ibv_query_port(ctx, static_cast<std::uint8_t>(p), &pa) != 0) {
                *why = format("%s port %d: cannot be queried", name, p);
                continue;
            }
            RdmaPort r;
            r.device = name ? name : "?";
            r.port = p;
            r.state = rdma_port_state_word(pa.state);
            r.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
            r.active_mtu = mtu_bytes(pa.active_mtu);
            r.lid = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : pa.lid;
            read_gids(ctx, p, pa.gid_tbl_len, &r);
            ports.push_back(std::move(r));
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    return ports;
}
#else
std::vector<RdmaPort> rdma_ports(std::string *why) {
    *why = "not built (configure found no libibverbs)";
    return {};
}
#endif

std::vector<std::string> rdma_port_lines() {
    std::string why;
    const std::vector<RdmaPort> ports = rdma_ports(&why);
    return rdma_port_lines(ports, why);
}

std::vector<std::string> rdma_port_lines(const std::vector<RdmaPort> &ports, const std::string &why) {
    std::vector<std::string> lines;
    for (const RdmaPort &p : ports) {
        std::string l = format("%s port %d: %s, %s, MTU %d", p.device.c_str(), p.port, p.state.c_str(),
                               p.link_layer.c_str(), p.active_mtu);
        if (p.lid) l += format(", LID %u", static_cast<unsigned>(p.lid));
        for (const std::string &g : p.gids) l += ", GID " + g;
        lines.push_back(l);
    }
    if (lines.empty()) lines.push_back("none (" + why + ")");
    return lines;
}

}  // namespace mpiacc
