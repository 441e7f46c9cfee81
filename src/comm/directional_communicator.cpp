#include "dualpipe/comm/directional_communicator.h"

#include <ATen/ops/zeros.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <utility>

#include "dualpipe/comm/process_group_communicator.h"
#include "dualpipe/util/error.h"

namespace dualpipe::comm {

DirectionalCommunicator::DirectionalCommunicator(std::shared_ptr<Communicator> upward,
                                                 std::shared_ptr<Communicator> downward)
    : upward_(std::move(upward)), downward_(std::move(downward)) {
  DUALPIPE_REQUIRE(upward_ && downward_, "DirectionalCommunicator needs two communicators");
  DUALPIPE_REQUIRE(upward_->rank() == downward_->rank() && upward_->size() == downward_->size(),
                   "the two channels must hold the same ranks: rank ", upward_->rank(), " of ", upward_->size(),
                   " upward, rank ", downward_->rank(), " of ", downward_->size(), " downward");
}

int DirectionalCommunicator::rank() const { return upward_->rank(); }
int DirectionalCommunicator::size() const { return upward_->size(); }
std::chrono::milliseconds DirectionalCommunicator::timeout() const { return upward_->timeout(); }

Communicator& DirectionalCommunicator::channel_to(int dst) const { return dst > rank() ? *upward_ : *downward_; }
Communicator& DirectionalCommunicator::channel_from(int src) const { return src < rank() ? *upward_ : *downward_; }

std::shared_ptr<Work> DirectionalCommunicator::isend(const at::Tensor& tensor, int dst, int tag) {
  return channel_to(dst).isend(tensor, dst, tag);
}

std::shared_ptr<Work> DirectionalCommunicator::irecv(at::Tensor& tensor, int src, int tag) {
  return channel_from(src).irecv(tensor, src, tag);
}

void DirectionalCommunicator::barrier() { upward_->barrier(); }

void DirectionalCommunicator::connect(std::vector<int> peers, const at::TensorOptions& options) {
  const int me = rank();
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  // (lower, higher) order: the pairs with lower ranks than this one come first, in increasing order, and they
  // all sort before (me, higher) pairs.
  for (int peer : peers) {
    DUALPIPE_REQUIRE(peer >= 0 && peer < size() && peer != me, "rank ", me, " cannot connect to rank ", peer,
                     " of ", size());
    at::Tensor out = at::zeros({1}, options), in = at::zeros({1}, options);
    // Upward, the lower rank sends; downward, the higher one.
    if (peer < me) {
      upward_->irecv(in, peer, 0)->wait(timeout());
      downward_->isend(out, peer, 0)->wait(timeout());
    } else {
      upward_->isend(out, peer, 0)->wait(timeout());
      downward_->irecv(in, peer, 0)->wait(timeout());
    }
  }
}

DirectionalGroups make_directional_groups(const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix,
                                          int rank, int size, ProcessGroupSpec spec) {
  spec.bind_device = false;
  DirectionalGroups groups;
  auto group = [&](const char* direction) {
    return make_process_group(c10::make_intrusive<c10d::PrefixStore>(prefix + direction, store), rank, size, spec);
  };
  groups.upward = group("/upward");
  groups.downward = group("/downward");
  return groups;
}

std::shared_ptr<DirectionalCommunicator> connect_directional_channels(c10::intrusive_ptr<c10d::ProcessGroup> upward,
                                                                     c10::intrusive_ptr<c10d::ProcessGroup> downward,
                                                                     const std::vector<int>& peers, c10::Device device,
                                                                     std::chrono::milliseconds timeout,
                                                                     std::shared_ptr<PeerMonitor> monitor) {
  ProcessGroupCommunicatorOptions options;
  options.timeout = timeout;
  auto channels = std::make_shared<DirectionalCommunicator>(
      std::make_shared<ProcessGroupCommunicator>(std::move(upward), options, monitor),
      std::make_shared<ProcessGroupCommunicator>(std::move(downward), options, monitor));
  channels->connect(peers, at::TensorOptions().device(device));
  return channels;
}

}  // namespace dualpipe::comm
