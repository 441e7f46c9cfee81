// The communicator over any c10d::ProcessGroup: Gloo here; NCCL, MPI or UCC with a LibTorch that has them.
//
// Hand it the group your job already has (a pipeline sub-group of a larger world works: ranks are the group's
// own), or let GlooCommunicator (gloo_communicator.h) build one from torchrun's environment.
//
// Failures: every wait has a timeout and a failed or timed-out transfer throws CommError naming the peer it was
// with. c10d itself cannot name the root cause when a rank waits on a live neighbour that is stuck behind a
// dead rank, nor notice a stopped (SIGSTOP, frozen) peer before the timeout; a peer monitor (peer_monitor.h)
// covers those cases (see docs/runtime.md, "Failures").
//
// Sends: c10d only reports a Gloo send complete once it is waited on, so a watcher thread per destination waits
// on the sends in order; is_completed() then tells the executor that it may drop the buffer.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <memory>
#include <vector>

#include "dualpipe/comm/communicator.h"

namespace dualpipe::comm {

class PeerMonitor;

// True when DUALPIPE_SINGLE_TAG=1 or DUALPIPE_NCCL_RULES=1 is set: the default of the test mode below, so that the
// variable puts every communicator of the process in it, those over sub-groups included (a training job's pipeline
// group as well as its world). A program that sets `single_tag` itself overrides it.
bool single_tag_from_environment();

// True when DUALPIPE_NCCL_RULES=1 is set: NCCL's rules on Gloo, for tests. Every message on tag 0 (matched by order
// alone), and `dualpipe train` sends its pipeline's messages over the two directional channels it makes for NCCL
// (directional_communicator.h).
bool nccl_rules_from_environment();

struct ProcessGroupCommunicatorOptions {
  // Wait limit for sends, receives and barriers.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // Test mode: every message travels with tag 0, as on a backend that ignores tags (NCCL). Runs must be
  // bit-identical with and without it (channels.h). Default: DUALPIPE_SINGLE_TAG=1 in the environment.
  bool single_tag = single_tag_from_environment();
};

class ProcessGroupCommunicator : public Communicator {
 public:
  explicit ProcessGroupCommunicator(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                    ProcessGroupCommunicatorOptions options = {});
  ~ProcessGroupCommunicator() override;

  int rank() const override;
  int size() const override;
  std::shared_ptr<Work> isend(const at::Tensor& tensor, int dst, int tag) override;
  std::shared_ptr<Work> irecv(at::Tensor& tensor, int src, int tag) override;
  void barrier() override;
  std::chrono::milliseconds timeout() const override;
  bool matches_by_tag() const override;  // Gloo's, outside the single-tag test mode

  // With a peer monitor over the group's ranks (peer_monitor.h), which names lost and stuck ranks and ends the
  // waits in flight when one is lost (GlooCommunicator's, and Python's DualPipe's).
  ProcessGroupCommunicator(c10::intrusive_ptr<c10d::ProcessGroup> group, ProcessGroupCommunicatorOptions options,
                           std::shared_ptr<PeerMonitor> monitor);

  // From now on, point-to-point messages of CPU tensors travel on `sockets` (by peer rank, -1 at this rank: the mesh
  // connect_socket_mesh makes over the group's ranks, socket_mesh.h), which this communicator then owns, instead of
  // through the group: a message costs one thread wake-up instead of c10d's three or four (docs/runtime.md,
  // "Transport"). Barriers, and tensors on a device, stay on the group. Call before the first message.
  void use_direct_links(std::vector<int> sockets);

  const c10::intrusive_ptr<c10d::ProcessGroup>& group() const;
  // The peer monitor (null without one); stall reports share the ranks' states over it (runtime/stall_watch.h).
  PeerMonitor* peer_monitor() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dualpipe::comm
