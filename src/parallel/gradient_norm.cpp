#include "dualpipe/parallel/gradient_norm.h"

#include <cmath>

#include "dualpipe/comm/channels.h"
#include "dualpipe/parallel/tensor_parallel.h"
#include "dualpipe/runtime/gather.h"

namespace dualpipe::parallel {
namespace {

constexpr int kNormTag = comm::tag(comm::Channel::GradNorm);

double scalar_sum(double value, const std::function<void(torch::Tensor&)>& sum) {
  torch::Tensor t = torch::full({1}, value, torch::kDouble);
  sum(t);
  return t.item<double>();
}

}  // namespace

double clip_to_global_norm(Stages& stages, const Placement& placement, int pipeline_rank,
                           const DataParallel& dp, const OptimizerSharding* sharded_gradients,
                           const TensorGroup& tp, comm::Communicator& pipeline,
                           std::chrono::milliseconds timeout, double clip) {
  // Squares by where they must be summed: [0] here alone, [1] over the TP group, [2] over the EP group; the
  // owned ones (ZeRO-2) go over the data-parallel or expert-data-parallel group first.
  double whole = 0, slices = 0, experts = 0, owned_whole = 0, owned_slices = 0, owned_experts = 0;
  for (auto& [s, state] : stages) {
    if (placement.rank_of(0, s) != pipeline_rank) continue;
    for (const auto& p : state.parameters) {
      if (!p.value().grad().defined()) continue;  // ZeRO-2: another replica owns it
      const double square = p.value().grad().to(torch::kDouble).pow(2).sum().item<double>();
      const bool owned = sharded_gradients && sharded_gradients->is_sharded(s, p.key());
      const ParameterSplit split = state.split(p.key());
      if (split == ParameterSplit::Expert) (owned ? owned_experts : experts) += square;
      else if (tp && split == ParameterSplit::TensorSlices) (owned ? owned_slices : slices) += square;
      else (owned ? owned_whole : whole) += square;
    }
  }
  if (sharded_gradients) {
    torch::Tensor owned = torch::tensor({owned_whole, owned_slices}, torch::kDouble);
    dp.sum(owned);
    whole += owned[0].item<double>();
    slices += owned[1].item<double>();
    experts += scalar_sum(owned_experts, [&](torch::Tensor& t) { dp.sum_over_expert_data_parallel(t); });
  }
  const double squares = whole + sum_over_tensor_parallel(torch::full({1}, slices, torch::kDouble), tp)
                                     .item<double>() +
                         dp.sum_over_expert_group(experts);
  const double norm = std::sqrt(
      runtime::sum_over_ranks(pipeline, torch::full({1}, squares, torch::kDouble), kNormTag, timeout).item<double>());
  if (clip > 0 && norm > clip) {
    const double scale = clip / (norm + 1e-6);
    for (auto& [s, state] : stages)
      for (auto& p : state.parameters.values())
        if (p.grad().defined()) p.grad().mul_(scale);
  }
  return norm;
}

}  // namespace dualpipe::parallel
