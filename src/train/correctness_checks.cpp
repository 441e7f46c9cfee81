#include "correctness_checks.h"

#include <torch/torch.h>

#include <algorithm>

#include "dualpipe/comm/channels.h"
#include "dualpipe/models/gpt_sharding.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {
namespace {

// 1 - 2 x.y / (x.x + y.y) in double: 0 for equal tensors, also sensitive to a difference in norm.
double cosine_distance(const torch::Tensor& x, const torch::Tensor& y) {
  auto a = x.to(torch::kDouble).flatten(), b = y.to(torch::kDouble).flatten();
  const double xy = a.dot(b).item<double>(), xx = a.dot(a).item<double>(), yy = b.dot(b).item<double>();
  return xx + yy == 0 ? 0 : 1.0 - 2.0 * xy / (xx + yy);
}

constexpr int kReplicaCheckTag = comm::tag(comm::Channel::ReplicaCheck);

}  // namespace

ReferenceCheck check_against_reference(const RunPlan& plan, const std::vector<torch::Tensor>& inputs,
                                       const std::vector<torch::Tensor>& targets, const runtime::Executor& executor,
                                       const runtime::StepResult& result, const std::map<int, StageState>& stages,
                                       const parallel::DataParallel& dp,
                                       const parallel::OptimizerSharding* gradient_owners, bool experts_sharded,
                                       const models::TensorGroup& tp, bool context_parallel) {
  // The whole model, fresh from the seed: the weights the pipeline started the step with, on the stages' device (the
  // same kernels, so the same bits).
  const c10::Device device = stages.begin()->second.module->parameters().front().device();
  std::vector<models::GptStage> model;
  for (int s = 0; s < plan.cut.num_stages(); ++s) {
    model.emplace_back(plan.model, plan.cut, s);
    model.back()->to(device);
  }
  const int M = static_cast<int>(inputs.size());
  std::vector<torch::Tensor> losses;
  for (int m = 0; m < M; ++m) {
    runtime::Tensors x = {inputs[m].to(device)};
    for (auto& stage : model) x = stage->forward(x);
    torch::Tensor loss = models::next_token_loss(x[0], targets[m].to(device), M);
    loss.backward();
    losses.push_back(loss.detach());
  }

  ReferenceCheck check;
  const int rank = executor.pipeline_rank();
  const int tp_rank = tp ? tp->rank() : 0, tp_size = tp ? tp->size() : 1;
  const bool exact = tp_size == 1 && !context_parallel;  // else the sums run in another order
  for (int m : executor.loss_microbatches()) {
    ++check.losses_compared;
    const bool same = result.losses[m].defined() &&
                      (exact ? torch::equal(result.losses[m], losses[m])
                                    : std::abs(result.losses[m].item<double>() / losses[m].item<double>() - 1) <=
                                          kMaxTensorParallelLossError);
    if (!same)
      check.problems.push_back(detail::concat(
          "rank ", rank, ": loss of micro-batch ", m, " is ",
          result.losses[m].defined() ? std::to_string(result.losses[m].item<double>()) : "missing",
          ", the single-process reference has ", losses[m].item<double>(),
          exact ? " (they must be bit-identical)"
                : detail::concat(" (tensor or context parallelism: they must agree to a relative ",
                                        kMaxTensorParallelLossError, ")")));
  }
  for (const auto& [s, stage] : stages) {
    const auto reference = model[s]->named_parameters();
    std::vector<std::string> names;
    std::vector<torch::Tensor> expected;
    for (const auto& p : stage.module->named_parameters()) {
      if (experts_sharded && models::is_expert_parameter(p.key())) continue;
      names.push_back(p.key());
      expected.push_back(models::tensor_shard(p.key(), reference[p.key()].grad(), tp_rank, tp_size));
    }
    if (expected.empty()) continue;
    torch::Tensor sum = torch::flatten_dense_tensors(expected);
    dp.sum(sum);  // every replica's reference (the group's members hold the stage's tensors in one order)
    expected = torch::unflatten_dense_tensors(sum.div_(dp.replicas()), expected);
    auto parameters = stage.module->named_parameters();
    for (size_t i = 0; i < names.size(); ++i) {
      if (gradient_owners && !gradient_owners->owns(s, names[i])) continue;  // reduced onto another replica
      const torch::Tensor& grad = parameters[names[i]].grad();
      ++check.gradients_compared;
      if (!grad.defined()) {
        check.problems.push_back(detail::concat("rank ", rank, ": stage ", s, " ", names[i], " has no gradient"));
        continue;
      }
      const double d = cosine_distance(grad, expected[i]);
      check.worst_cosine_distance = std::max(check.worst_cosine_distance, d);
      const double limit = exact ? kMaxGradientCosineDistance : kMaxTensorParallelGradientCosineDistance;
      if (!(d <= limit))
        check.problems.push_back(detail::concat("rank ", rank, ": stage ", s, " ", names[i],
                                                " gradient differs from the single-process reference: cosine "
                                                "distance ", d, " > ", limit));
    }
  }
  return check;
}

ReplicaCheck compare_replicas(const Placement& placement, int rank, const std::map<int, StageState>& stages,
                              comm::Communicator& communicator, std::chrono::milliseconds timeout) {
  ReplicaCheck check;
  if (placement.num_replicas() < 2) return check;
  struct Exchange {
    int stage;
    std::string name;
    torch::Tensor mine, theirs;
    std::shared_ptr<comm::Work> send, recv;
  };
  std::vector<Exchange> exchanges;
  for (const auto& [s, stage] : stages) {
    const int other = placement.rank_of(0, s) == rank ? placement.rank_of(1, s) : placement.rank_of(0, s);
    if (other == rank) continue;  // both replicas are this module
    for (const auto& p : stage.module->named_parameters()) {
      Exchange e{s, p.key(), p.value().detach().contiguous(), torch::empty_like(p.value()), nullptr, nullptr};
      // One channel: both replicas walk their stages and parameters in the same order.
      e.send = communicator.isend(e.mine, other, kReplicaCheckTag);
      e.recv = communicator.irecv(e.theirs, other, kReplicaCheckTag);
      exchanges.push_back(std::move(e));
    }
  }
  for (auto& e : exchanges) {
    e.recv->wait(timeout);
    e.send->wait(timeout);
    ++check.tensors_compared;
    if (!torch::equal(e.mine, e.theirs))
      check.problems.push_back(detail::concat("rank ", rank, ": stage ", e.stage, " ", e.name,
                                              " differs from its other replica (max difference ",
                                              (e.mine - e.theirs).abs().max().item<double>(), ")"));
  }
  return check;
}

std::string problems_text(const std::vector<std::string>& problems) {
  std::string text;
  for (const std::string& line : problems) text += (text.empty() ? "" : "\n") + line;
  return text;
}

}  // namespace dualpipe::train
