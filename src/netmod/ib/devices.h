// The RDMA devices rdma-core's verbs see on this host, port by port: what the verbs netmod
// chooses from, and what `mpiacc_info --config` lists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpiacc {

struct RdmaPort {
    std::string device;      // "mlx5_0", "rxe0"
    int port = 0;            // from 1
    std::string state;       // "ACTIVE", "DOWN", ...
    std::string link_layer;  // "InfiniBand", "Ethernet"
    int active_mtu = 0;      // bytes
    std::uint16_t lid = 0;   // InfiniBand only
    // Non-zero GIDs as "index:address" (RoCE v2 peers are reached by GID).
    std::vector<std::string> gids;
};

// Every port of every device. Empty with *why when verbs is not built in, no device is
// found, or a device cannot be opened or queried (*why names it; the others are listed).
std::vector<RdmaPort> rdma_ports(std::string *why);

// A port's state (ibv_port_state) as ibv_devinfo names it: "ACTIVE", "DOWN"... Built only
// where verbs is.
const char *rdma_port_state_word(int state);

// One line per port for mpiacc_info, or one line saying why there is none.
std::vector<std::string> rdma_port_lines();
// The same for ports already listed by rdma_ports (`why`: what it said when none).
std::vector<std::string> rdma_port_lines(const std::vector<RdmaPort> &ports, const std::string &why);

}  // namespace mpiacc
