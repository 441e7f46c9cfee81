#include "runtime/support/reference_model.h"

#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <sstream>

namespace dualpipe::testing {

using runtime::MlpStage;

ReferenceSetup make_setup(int num_stages, int num_microbatches, int64_t hidden, int64_t rows, uint64_t seed) {
  ReferenceSetup setup;
  setup.num_stages = num_stages;
  setup.num_microbatches = num_microbatches;
  setup.hidden = hidden;
  setup.rows = rows;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::NoGradGuard no_grad;
  for (int s = 0; s < num_stages; ++s) {
    MlpStage stage(hidden);
    for (auto& p : stage->parameters()) p.uniform_(-0.5, 0.5, gen);
    setup.model.push_back(stage);
  }
  setup.inputs = at::randn({num_microbatches * rows, hidden}, gen);
  setup.labels = at::randn({num_microbatches * rows, hidden}, gen);
  return setup;
}

torch::Tensor mse(const torch::Tensor& output, const torch::Tensor& label) {
  return torch::mse_loss(output, label);
}

ReferenceResult run_reference(const ReferenceSetup& setup, bool training) {
  torch::AutoGradMode grad_mode(training);
  ReferenceResult ref;
  std::vector<MlpStage> model;
  for (const auto& stage : setup.model) {  // private copies: the caller's grads stay untouched
    MlpStage copy(setup.hidden);
    torch::NoGradGuard no_grad;
    auto src = stage->parameters(), dst = copy->parameters();
    for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
    model.push_back(copy);
  }
  auto inputs = setup.inputs.chunk(setup.num_microbatches, 0);
  auto labels = setup.labels.chunk(setup.num_microbatches, 0);
  for (int m = 0; m < setup.num_microbatches; ++m) {
    torch::Tensor x = inputs[m];
    for (auto& stage : model) x = stage->forward(x);
    torch::Tensor loss = mse(x, labels[m]);
    if (training) loss.backward();
    ref.losses.push_back(loss.detach());
    ref.outputs.push_back(x.detach());
  }
  for (auto& stage : model) {
    std::vector<torch::Tensor> grads;
    for (auto& p : stage->parameters()) grads.push_back(p.grad());
    ref.grads.push_back(grads);
  }
  return ref;
}

torch::Tensor select_microbatches(const torch::Tensor& batch, const std::vector<int>& microbatches, int total) {
  if (microbatches.empty()) return {};
  auto chunks = batch.chunk(total, 0);
  std::vector<torch::Tensor> picked;
  for (int m : microbatches) picked.push_back(chunks[m]);
  return torch::cat(picked, 0);
}

double cosine_distance(const torch::Tensor& x, const torch::Tensor& y) {
  auto a = x.to(torch::kDouble).flatten(), b = y.to(torch::kDouble).flatten();
  double xy = a.dot(b).item<double>(), xx = a.dot(a).item<double>(), yy = b.dot(b).item<double>();
  if (xx + yy == 0) return 0;
  return 1.0 - 2.0 * xy / (xx + yy);
}

void Problems::check_gradients(int stage, const std::vector<torch::Tensor>& parameters,
                               const std::vector<torch::Tensor>& reference) {
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].grad().defined()) {
      add("stage ", stage, " parameter ", i, " has no gradient");
      continue;
    }
    const double d = cosine_distance(parameters[i].grad(), reference[i]);
    if (!(d <= 1e-13)) add("stage ", stage, " parameter ", i, " gradient cosine distance ", d);
  }
}

std::vector<std::string> run_and_check_rank(const ReferenceSetup& setup, const ReferenceResult& reference,
                                            const Schedule& schedule,
                                            std::shared_ptr<comm::Communicator> communicator, bool training,
                                            bool declare_shapes, const RankOptions& rank_options) {
  at::set_num_threads(1);
  torch::AutoGradMode grad_mode(training);
  int rank = communicator->rank();
  const auto& mapping = rank_options.rank_mapping;
  if (!mapping.empty()) {
    auto it = std::find(mapping.begin(), mapping.end(), rank);
    if (it == mapping.end()) return {};  // not part of the pipeline
    rank = static_cast<int>(it - mapping.begin());
  }
  std::map<int, std::shared_ptr<runtime::Stage>> stages;
  std::map<int, MlpStage> modules;
  for (int m = 0; m < schedule.num_microbatches; ++m)
    for (int s = 0; s < schedule.num_stages; ++s)
      if (schedule.placement.rank(s, m) == rank && !modules.count(s)) {
        MlpStage copy(setup.hidden);
        torch::NoGradGuard no_grad;
        auto src = setup.model[s]->parameters(), dst = copy->parameters();
        for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
        modules.emplace(s, copy);
        stages.emplace(s, rank_options.wrap ? rank_options.wrap(copy) : runtime::make_stage(copy));
      }
  runtime::ExecutorOptions options;
  options.rank_mapping = mapping;
  options.pair_weights_last = rank_options.pair_weights_last;
  if (declare_shapes)
    options.boundaries = runtime::ExecutorOptions::uniform({{{setup.rows, setup.hidden}, torch::kFloat}},
                                                           schedule.num_stages);
  runtime::Executor executor(schedule, stages, communicator, options);
  runtime::StepArgs args;
  args.inputs = {select_microbatches(setup.inputs, executor.entering_microbatches(), setup.num_microbatches)};
  args.labels = {select_microbatches(setup.labels, executor.loss_microbatches(), setup.num_microbatches)};
  args.criterion = runtime::single_tensor_criterion(mse);
  args.num_microbatches = setup.num_microbatches;
  args.return_outputs = true;
  if (rank_options.before_step) rank_options.before_step(args, modules);
  runtime::StepResult result = executor.step(args);
  if (training) executor.reduce_replica_gradients();

  Problems problems(rank);
  for (int m = 0; m < setup.num_microbatches; ++m) {
    bool owned = std::count(executor.loss_microbatches().begin(), executor.loss_microbatches().end(), m) > 0;
    if (owned != result.losses[m].defined())
      problems.add("loss of micro-batch ", m, " defined=", result.losses[m].defined());
    if (!owned) continue;
    if (!torch::equal(result.losses[m], reference.losses[m]))
      problems.add("loss of micro-batch ", m, " is ", result.losses[m].item<float>(), ", reference ",
                   reference.losses[m].item<float>());
    if (result.outputs[m].size() != 1 || !torch::equal(result.outputs[m][0], reference.outputs[m]))
      problems.add("output of micro-batch ", m, " differs");
  }
  if (training)
    for (auto& [s, module] : modules) problems.check_gradients(s, module->parameters(), reference.grads[s]);
  return problems.list;
}

}  // namespace dualpipe::testing
