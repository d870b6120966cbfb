// Who this process is beside its peers: which host, which PID namespace. Peers compare
// them to tell whether they share a node, and whether they can open each other's memory.
#pragma once

#include <cstdint>

namespace mpiacc {

// A stable id for this host (hash of its name): equal ids mean "same node".
std::uint64_t local_node_id();
// This process's PID namespace (the inode of /proc/self/ns/pid; 0 when unknown).
std::uint64_t local_pid_namespace();

}  // namespace mpiacc
