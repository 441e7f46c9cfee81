// What the launcher checks of the rendezvous address before it starts any rank, so that a wrong address or a
// taken port is one clear error (exit 2) instead of every rank timing out. The rendezvous itself (rank 0's store,
// the wait for every rank) happens in the ranks: comm::GlooCommunicator.
#pragma once

#include <string>

namespace dualpipe::launch {

// A TCP port free on `address` right now, drawn at random from the 12768 ports below the system's ephemeral range
// (20000 to 32767 by default). Rank 0 binds it moments later. Not from the ephemeral range, which the kernel's
// port 0 would give: an outgoing connection of any other program may take such a port as its own end in between,
// for as long as it lasts (seen under ctest -j2: a store that could not listen for 60 s).
int pick_free_port(const std::string& address);
int pick_free_port(const std::string& address);

// On the node that runs rank 0: `address` must be an address of this machine and `port` free on it. Elsewhere:
// `address` must resolve. Throws InvalidArgument naming the value ("--master-port 29500 is already taken on
// this machine ...").
void check_master_address(const std::string& address, int port, bool runs_rank0);

}  // namespace dualpipe::launch
