// Which network interface a rank's transport should use. On a machine with several interfaces (or inside a
// network namespace, where the host name does not resolve to a reachable address) Gloo's default, the address of
// the host name, is often the wrong one: ranks on other machines are told to connect to 127.0.0.1. The interface
// that routes to the master address is the one the other ranks can reach, as torchrun users otherwise arrange with
// GLOO_SOCKET_IFNAME by hand. No LibTorch.
#pragma once

#include <string>

namespace dualpipe::comm {

// The local interface whose address the kernel would use as the source to reach `address` (a UDP connect(),
// which sends nothing, then getsockname() and getifaddrs()): "lo" for 127.0.0.1, "eth0" for a peer on eth0's
// network, the interface itself for one of this machine's own addresses. "" when `address` does not resolve or
// has no route.
std::string interface_routing_to(const std::string& address);

}  // namespace dualpipe::comm
