// A pipeline's messages on two channels, one per direction, as NCCL needs them.
//
// NCCL matches a pair's sends and receives by issue order alone, and runs each communicator's operations on one
// stream, in that order: a send waits there until its receive is running on the peer. If both ranks of a pair sent
// to each other before receiving (DualPipe's middle ranks do), both streams would wait on a send and neither
// receive would run. The executor posts receives ahead and sends when their tensors are ready, in whatever order
// the schedule needs, so here no stream carries both directions of a pair: messages to a higher rank go over
// `upward`, to a lower rank over `downward`. Each channel then runs one direction of each pair, its receives
// posted in the sender's order (runtime/mailbox.h), and a send never waits behind a receive. With NCCL groups made
// without a bound device (ProcessGroupSpec::bind_device false), each pair of each channel has its own NCCL
// communicator and stream. The Gloo test mode (DUALPIPE_NCCL_RULES=1, process_group_communicator.h) runs the same
// channels with every message on tag 0.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dualpipe/comm/backend.h"
#include "dualpipe/comm/communicator.h"

namespace dualpipe::comm {

class PeerMonitor;

class DirectionalCommunicator : public Communicator {
 public:
  // Two communicators over the same ranks, in the same order.
  DirectionalCommunicator(std::shared_ptr<Communicator> upward, std::shared_ptr<Communicator> downward);

  int rank() const override;
  int size() const override;
  std::shared_ptr<Work> isend(const at::Tensor& tensor, int dst, int tag) override;
  std::shared_ptr<Work> irecv(at::Tensor& tensor, int src, int tag) override;
  void barrier() override;
  std::chrono::milliseconds timeout() const override;

  // One message each way with every rank of `peers` (symmetric: each peer lists this rank too), over `options`'
  // device. NCCL makes a pair's communicator at its first message, and both ranks wait there for each other: every
  // rank takes its pairs in the order of (lower rank, higher rank), so the first pair not yet made always has both
  // ranks waiting on it, and none waits on a rank that waits elsewhere.
  void connect(std::vector<int> peers, const at::TensorOptions& options);

 private:
  Communicator& channel_to(int dst) const;
  Communicator& channel_from(int src) const;

  std::shared_ptr<Communicator> upward_, downward_;
};

// The two channels' groups for the `size` ranks that rendezvous through `store` under `prefix`, as `rank`: two groups
// of `spec`'s backend, never bound to a device (spec.bind_device is ignored), so that NCCL gives each pair of each
// channel its own communicator and stream.
struct DirectionalGroups {
  c10::intrusive_ptr<c10d::ProcessGroup> upward, downward;
};
DirectionalGroups make_directional_groups(const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix,
                                          int rank, int size, ProcessGroupSpec spec);

// The channels as one communicator whose waits end after `timeout` (or when `monitor`, shared by both channels,
// loses a peer), connected (connect()) to `peers` over `device` before it is returned.
std::shared_ptr<DirectionalCommunicator> connect_directional_channels(c10::intrusive_ptr<c10d::ProcessGroup> upward,
                                                                     c10::intrusive_ptr<c10d::ProcessGroup> downward,
                                                                     const std::vector<int>& peers, c10::Device device,
                                                                     std::chrono::milliseconds timeout,
                                                                     std::shared_ptr<PeerMonitor> monitor = nullptr);

}  // namespace dualpipe::comm
