// The differentiable expert all-to-all (see expert_all_to_all.h).
#include "dualpipe/parallel/expert_all_to_all.h"

#include <torch/csrc/autograd/custom_function.h>

#include "dualpipe/runtime/concurrent_overlap.h"
#include "dualpipe/util/error.h"

namespace dualpipe::parallel {
namespace {

torch::Tensor exchange(const torch::Tensor& x, c10d::ProcessGroup& group, const ExpertCommunication& communication,
                       const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  torch::Tensor input = x.contiguous();
  torch::Tensor output = torch::empty_like(input);
  std::vector<int64_t> equal_splits;  // empty: equal chunks of the first dimension
  const c10::intrusive_ptr<c10d::Work> work = group.alltoall_base(output, input, equal_splits, equal_splits);
  // The other half of an overlapped pair computes while the exchange runs.
  runtime::yield_overlap_turn([&work] { return work->isCompleted(); });
  work->wait();
  if (communication.on_exchange) communication.on_exchange(what, start, std::chrono::steady_clock::now());
  return output;
}

struct AllToAll : torch::autograd::Function<AllToAll> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const ExpertCommunication* communication, const std::string& what) {
    ctx->saved_data["communication"] = reinterpret_cast<int64_t>(communication);
    ctx->saved_data["what"] = what;
    return exchange(x, *communication->forward, *communication, what);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto* communication = reinterpret_cast<const ExpertCommunication*>(ctx->saved_data["communication"].toInt());
    const std::string what = ctx->saved_data["what"].toStringRef() + " backward";
    return {exchange(grads[0], *communication->backward, *communication, what), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor expert_all_to_all(const torch::Tensor& x, const ExpertCommunication& communication,
                                const std::string& what) {
  const int size = communication.size();
  if (size == 1) return x;
  DUALPIPE_CHECK(communication.backward && communication.backward->getSize() == size,
                 "the expert all-to-all needs a backward group of the forward group's ", size, " ranks");
  DUALPIPE_CHECK(x.dim() >= 1 && x.size(0) % size == 0, "the expert all-to-all splits the first dimension ",
                 x.sizes(), " into ", size, " equal chunks");
  // The communication outlives the graph: it belongs to the model's layer, which the graph's owner keeps.
  return AllToAll::apply(x, &communication, what);
}

}  // namespace dualpipe::parallel
