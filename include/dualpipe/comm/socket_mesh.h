// One TCP connection between every pair of ranks, outside any process group, met through a c10d store: the peer
// monitor's heartbeats (peer_monitor.h) and the direct point-to-point links of GlooCommunicator travel on their own
// meshes. Each rank listens on an ephemeral port, publishes "address:port" under `key_prefix`/rank (the address of
// the interface that routes to `master_addr`, so that ranks on other machines can reach it), connects to every
// lower rank and accepts every higher one; the connecting rank says its rank first. No LibTorch beyond the store.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace c10d {
class Store;
}

namespace dualpipe::comm {

// The sockets by peer rank (-1 at `rank`): blocking, TCP_NODELAY, close-on-exec; the caller owns them. Throws
// CommError "rank R: <what>: ..." naming the peer that could not be reached, or how many never connected.
std::vector<int> connect_socket_mesh(c10d::Store& store, const std::string& key_prefix, const std::string& master_addr,
                                     int rank, int world_size, std::chrono::milliseconds timeout,
                                     const std::string& what);

}  // namespace dualpipe::comm
