#include "stage_state.h"

#include <sstream>

#include "dualpipe/models/gpt_sharding.h"
#include "dualpipe/models/moe.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {
StageState::StageState(const run::OptimizerConfig& o, const models::GptConfig& model, const models::StageCut& cut, int stage,
                       const LayerGroups& groups, c10::Device device)
    : module(model, cut, stage, groups.experts, groups.tp, groups.cp), tp(groups.tp) {
  module->to(device);  // initialised on the CPU first: the same values on every device
  // Weight decay on matrices and embeddings only, as in GPT-2 and nanoGPT: not on biases and LayerNorm gains.
  std::vector<torch::Tensor> decayed, plain;
  for (const auto& p : module->parameters()) (p.dim() >= 2 ? decayed : plain).push_back(p);
  auto options = [&](double decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).weight_decay(decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> parameter_groups;
  parameter_groups.emplace_back(decayed, options(o.weight_decay));
  if (!plain.empty()) parameter_groups.emplace_back(plain, options(0.0));
  optimizer = std::make_unique<torch::optim::AdamW>(parameter_groups, torch::optim::AdamWOptions(o.lr));
}

void StageState::set_lr(double lr) {
  for (auto& group : optimizer->param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

// AdamW's state is written per parameter name ("adam.<name>.step", ".exp_avg", ".exp_avg_sq"), not through
// Optimizer::save, which keys it by tensor addresses: the same state would give other bytes in every process,
// and a checkpoint could not be compared (or deduplicated) byte for byte. A parameter not stepped yet has none.
SavedStage StageState::save() const {
  torch::serialize::OutputArchive archive;
  SavedStage saved;
  const auto whole = [this](const std::string& name, const torch::Tensor& slice) {
    return models::tensor_unshard(name, parallel::all_gather(slice, tp)).cpu();
  };
  for (const auto& p : module->named_parameters()) {
    const torch::Tensor parameter = whole(p.key(), p.value());
    archive.write("parameter." + p.key(), parameter);
    saved.tensors.emplace_back(p.key(), parameter.sizes().vec());
    const torch::optim::AdamWParamState* adam = parallel::adam_state(*optimizer, p.value());
    if (!adam) continue;  // the same on every rank of the group: they take the same steps
    archive.write("adam." + p.key() + ".step", torch::tensor(static_cast<int64_t>(adam->step())));
    archive.write("adam." + p.key() + ".exp_avg", whole(p.key(), adam->exp_avg()));
    archive.write("adam." + p.key() + ".exp_avg_sq", whole(p.key(), adam->exp_avg_sq()));
  }
  std::ostringstream out;
  archive.save_to(out);
  saved.bytes = out.str();
  return saved;
}

void StageState::load(const SavedTensors& saved, const std::string& what) {
  const auto read = [&](const std::string& key) {
    torch::Tensor tensor;
    DUALPIPE_REQUIRE(saved(key, tensor), what, " has no tensor ", key, " for this stage");
    return tensor;
  };
  try {
    torch::NoGradGuard no_grad;
    const int tp_rank = tp ? tp->rank() : 0, tp_size = tp ? tp->size() : 1;
    const auto mine = [&](const std::string& name, const torch::Tensor& whole) {
      return models::tensor_shard(name, whole, tp_rank, tp_size);
    };
    for (auto& p : module->named_parameters()) {
      const torch::Tensor slice = mine(p.key(), read("parameter." + p.key()));
      DUALPIPE_REQUIRE(slice.sizes() == p.value().sizes(), what, ": ", p.key(), " has shape ", slice.sizes(),
                       ", the model needs ", p.value().sizes());
      p.value().copy_(slice);
    }
    optimizer->state().clear();
    for (auto& p : module->named_parameters()) {
      torch::Tensor step;
      if (!saved("adam." + p.key() + ".step", step)) continue;
      const torch::Tensor exp_avg = mine(p.key(), read("adam." + p.key() + ".exp_avg"));
      const torch::Tensor exp_avg_sq = mine(p.key(), read("adam." + p.key() + ".exp_avg_sq"));
      DUALPIPE_REQUIRE(exp_avg.sizes() == p.value().sizes() && exp_avg_sq.sizes() == p.value().sizes(), what,
                       ": the optimizer state of ", p.key(), " has shape ", exp_avg.sizes(), ", the model needs ",
                       p.value().sizes());
      parallel::set_adam_state(*optimizer, p.value(), step.item<int64_t>(), exp_avg, exp_avg_sq);
    }
  } catch (const c10::Error& e) {
    std::string message = e.what();
    message.resize(std::min(message.find('\n'), message.size()));
    throw InvalidArgument(detail::concat(what, " cannot be loaded: ", message));
  }
}

parallel::StageParameters StageState::parallel_view() {
  const bool sliced = tp != nullptr;
  return {module->named_parameters(), optimizer.get(), [sliced](const std::string& name) {
            if (models::is_expert_parameter(name)) return parallel::ParameterSplit::Expert;
            if (sliced && models::tensor_split(name) != models::TensorSplit::Whole)
              return parallel::ParameterSplit::TensorSlices;
            return parallel::ParameterSplit::Whole;
          }};
}

parallel::Stages parallel_view(std::map<int, StageState>& stages) {
  parallel::Stages view;
  for (auto& [s, state] : stages) view.emplace(s, state.parallel_view());
  return view;
}

}  // namespace dualpipe::train
