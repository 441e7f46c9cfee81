// The all-to-all of expert parallelism, differentiable: an MoE layer's dispatch (tokens to the ranks holding
// their experts) and combine (results back), over the EP group of mesh.h.
//
// Chunk i of the input goes to rank i of the group and chunk i of the output came from rank i: every rank sends
// equal chunks (a fixed number of token slots per expert, the capacity), so the exchange is its own inverse and
// the backward is the same all-to-all of the gradients. Forward exchanges use one group and backward exchanges
// another over the same ranks: with the forward-backward overlap (runtime/concurrent_overlap.h) a forward and a
// backward run at once on two threads, and c10d matches collectives by their order within a group. Between starting
// an exchange and waiting for it, the overlap's other half takes its turn (runtime::yield_overlap_turn).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

#include <chrono>
#include <functional>
#include <string>

namespace dualpipe::parallel {

struct ExpertCommunication {
  c10::intrusive_ptr<c10d::ProcessGroup> forward;   // the EP group (MeshGroups::expert)
  c10::intrusive_ptr<c10d::ProcessGroup> backward;  // the same ranks (MeshGroups::expert_backward)
  // Told of every exchange when it is done (for the trace's communication track); may be empty.
  std::function<void(const std::string& what, std::chrono::steady_clock::time_point start,
                     std::chrono::steady_clock::time_point end)>
      on_exchange;

  int size() const { return forward ? forward->getSize() : 1; }
  int rank() const { return forward ? forward->getRank() : 0; }
};

// `x`: [size * n, ...], n rows for each rank of the group, in rank order; returns the same shape, n rows from
// each rank. `what` names the exchange for on_exchange ("dispatch", "combine"); its backward reports
// "<what> backward". With a group of one, returns x.
torch::Tensor expert_all_to_all(const torch::Tensor& x, const ExpertCommunication& communication,
                                const std::string& what);

}  // namespace dualpipe::parallel
