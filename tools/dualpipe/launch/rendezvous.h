// What the launcher checks of the rendezvous address before it starts any rank, so that a wrong address or a
// taken port is one clear error (exit 2) instead of every rank timing out. The rendezvous itself (rank 0's store,
// the wait for every rank) happens in the ranks: comm::GlooCommunicator.
#pragma once

#include <string>

namespace dualpipe::cli {

// A TCP port free on `address` right now (bind port 0, read the kernel's choice, close). Rank 0 binds it moments
// later; picking one per launch keeps parallel jobs on one machine from colliding.
int pick_free_port(const std::string& address);

// On the node that runs rank 0: `address` must be an address of this machine and `port` free on it. Elsewhere:
// `address` must resolve. Throws InvalidArgument naming the value ("--master-port 29500 is already taken on
// this machine ...").
void check_master_address(const std::string& address, int port, bool runs_rank0);

}  // namespace dualpipe::cli
