// A ProcessGroupCommunicator over a ProcessGroupGloo (TCP) that it builds itself, for ranks that are processes
// on one or many machines. Rendezvous goes through a c10d::TCPStore hosted by rank 0, configured like torchrun.
// It adds a peer monitor (docs/runtime.md, "Failures") so that every rank names a dead or stopped rank, also
// when it was waiting on a live neighbour. To run on a group you already have, use ProcessGroupCommunicator.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "dualpipe/comm/process_group_communicator.h"

namespace dualpipe::comm {

// False when DUALPIPE_DIRECT_LINKS=0 is set (GlooOptions::direct_links).
bool direct_links_from_environment();

struct GlooOptions {
  std::string master_addr = "127.0.0.1";  // host of rank 0's TCPStore
  int master_port = 29500;
  int rank = 0;
  int world_size = 1;
  // Rendezvous, receive, send and barrier waits. A peer whose process dies is noticed at once (its connections
  // close); one that stops responding (stopped, frozen) after this long without a heartbeat; either way every
  // rank's waits fail with a CommError naming it.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // Network interface for Gloo's transport; empty: $GLOO_SOCKET_IFNAME, else the one that routes to master_addr
  // (network_interface.h), else the host name's address.
  std::string interface;
  // The store at master_addr:master_port is hosted by torchrun's agent, not by rank 0 (launch_environment.h);
  // this attempt's keys then live under "/worker/attempt_<restart_count>".
  bool store_hosted_by_agent = false;
  int restart_count = 0;
  // Test mode: every message with tag 0 (ProcessGroupCommunicatorOptions::single_tag). Default:
  // DUALPIPE_SINGLE_TAG=1 in the environment.
  bool single_tag = single_tag_from_environment();
  // The peer monitor (docs/runtime.md, "Failures"). Off, failures are what c10d alone reports.
  bool peer_monitor = true;
  // Point-to-point messages of CPU tensors on sockets of their own, moved by the thread that waits, instead of
  // through c10d's Gloo (whose threads hand every message over three or four times: docs/runtime.md, "Transport").
  // Collectives and barriers stay on Gloo. Default: on, unless DUALPIPE_DIRECT_LINKS=0.
  bool direct_links = direct_links_from_environment();
};

class GlooCommunicator : public ProcessGroupCommunicator {
 public:
  // Rendezvous with the other ranks. Sets SIGPIPE to ignored when it has the default disposition, so that a
  // write to a dead peer fails with an error naming it instead of killing this process.
  explicit GlooCommunicator(const GlooOptions& options);
  ~GlooCommunicator() override;

  // Reads the launcher's variables (torchrun's, SLURM's or MPI's: launch_environment.h), DUALPIPE_SINGLE_TAG=1
  // (the test mode above) and DUALPIPE_DIRECT_LINKS=0 (point-to-point through c10d's Gloo), both read by their
  // defaults, and DUALPIPE_PEER_MONITOR=0 (no monitor); throws InvalidArgument naming the variable when one is
  // missing or invalid.
  static GlooOptions options_from_environment();
  static std::shared_ptr<GlooCommunicator> from_environment(
      std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // The rendezvous store every rank joined (this attempt's prefix applied): sub-groups of the world are made
  // from it (parallel/process_groups.h). The interface Gloo uses, for those groups to use the same.
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }
  const std::string& interface() const { return interface_; }

 private:
  struct Connection;
  static Connection connect(const GlooOptions& options);
  explicit GlooCommunicator(Connection connection);

  c10::intrusive_ptr<c10d::Store> store_;
  std::string interface_;
};

}  // namespace dualpipe::comm
