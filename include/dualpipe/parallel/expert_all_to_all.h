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
#include <memory>
#include <string>
#include <utility>

namespace dualpipe::parallel {

struct ExpertCommunication {
  c10::intrusive_ptr<c10d::ProcessGroup> forward;   // the EP group (MeshGroups::expert)
  c10::intrusive_ptr<c10d::ProcessGroup> backward;  // the same ranks (MeshGroups::expert_backward)
  // Told of every exchange when it is done (for the trace's communication track): when it started, when the thread
  // that started it began to wait for it (the same instant, unless it computed in between) and when it ended.
  // May be empty.
  std::function<void(const std::string& what, std::chrono::steady_clock::time_point start,
                     std::chrono::steady_clock::time_point waited_from, std::chrono::steady_clock::time_point end)>
      on_exchange;

  int size() const { return forward ? forward->getSize() : 1; }
  int rank() const { return forward ? forward->getRank() : 0; }
};

// `x`: [size * n, ...], n rows for each rank of the group, in rank order; returns the same shape, n rows from
// each rank. `what` names the exchange for on_exchange ("dispatch", "combine"); its backward reports
// "<what> backward". With a group of one, returns x.
torch::Tensor expert_all_to_all(const torch::Tensor& x, const ExpertCommunication& communication,
                                const std::string& what);

// An exchange started and not yet waited for. `output` is its result, to be read only after wait().
class ExchangeInFlight {
 public:
  struct State;  // what wait() needs (expert_all_to_all.cpp)
  ExchangeInFlight() = default;
  // `state` null: an exchange that has ended already.
  explicit ExchangeInFlight(torch::Tensor output, std::shared_ptr<State> state = nullptr)
      : output(std::move(output)), state_(std::move(state)) {}

  torch::Tensor output;

  // Waits for the exchange to end (at once if it has, or if none was started) and reports it to on_exchange.
  void wait();
  bool pending() const { return state_ != nullptr; }

 private:
  std::shared_ptr<State> state_;
};

// expert_all_to_all, started: `output` is differentiable (its backward the exchange of the gradients, waited for at
// once, as expert_all_to_all's), and may be read once wait() has returned.
ExchangeInFlight start_expert_all_to_all(const torch::Tensor& x, const ExpertCommunication& communication,
                                         const std::string& what);
// The exchange of gradients over the backward group, outside autograd: a backward run phase by phase sends the
// gradient of a forward exchange's output back this way ("<what> backward" to on_exchange).
ExchangeInFlight start_gradient_all_to_all(const torch::Tensor& grad, const ExpertCommunication& communication,
                                           const std::string& what);

}  // namespace dualpipe::parallel
