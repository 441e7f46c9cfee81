#include "stage_state.h"

#include <sstream>
#include <type_traits>

#include "dualpipe/models/gpt_sharding.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {
namespace {

// The optimizer's state map is keyed by the parameter's TensorImpl pointer.
template <class StateMap>
typename StateMap::key_type state_key(const torch::Tensor& parameter) {
  return static_cast<typename StateMap::key_type>(parameter.unsafeGetTensorImpl());
}

using OptimizerState = std::decay_t<decltype(std::declval<torch::optim::AdamW&>().state())>;

}  // namespace

StageState::StageState(const TrainConfig& c, const models::GptConfig& model, const models::StageCut& cut, int stage,
                       models::ExpertGroup experts, c10::Device device, models::TensorGroup tp,
                       models::ContextGroup cp)
    : module(model, cut, stage, std::move(experts), tp, std::move(cp)), tp(tp) {
  module->to(device);  // initialised on the CPU first: the same values on every device
  // Weight decay on matrices and embeddings only, as in GPT-2 and nanoGPT: not on biases and LayerNorm gains.
  std::vector<torch::Tensor> decayed, plain;
  for (const auto& p : module->parameters()) (p.dim() >= 2 ? decayed : plain).push_back(p);
  auto options = [&](double decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(c.lr).betas({c.beta1, c.beta2}).weight_decay(decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, options(c.weight_decay));
  if (!plain.empty()) groups.emplace_back(plain, options(0.0));
  optimizer = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(c.lr));
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
    const torch::optim::AdamWParamState* adam = adam_state(p.value());
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
      set_adam_state(p.value(), step.item<int64_t>(), exp_avg, exp_avg_sq);
    }
  } catch (const c10::Error& e) {
    std::string message = e.what();
    message.resize(std::min(message.find('\n'), message.size()));
    throw InvalidArgument(detail::concat(what, " cannot be loaded: ", message));
  }
}

const torch::optim::AdamWParamState* StageState::adam_state(const torch::Tensor& parameter) const {
  const OptimizerState& state = optimizer->state();
  const auto found = state.find(state_key<OptimizerState>(parameter));
  return found == state.end() ? nullptr : static_cast<const torch::optim::AdamWParamState*>(found->second.get());
}

void StageState::set_adam_state(const torch::Tensor& parameter, int64_t step, torch::Tensor exp_avg,
                                torch::Tensor exp_avg_sq) {
  auto adam = std::make_unique<torch::optim::AdamWParamState>();
  adam->step(step);
  adam->exp_avg(exp_avg.to(parameter.device()));
  adam->exp_avg_sq(exp_avg_sq.to(parameter.device()));
  optimizer->state()[state_key<OptimizerState>(parameter)] = std::move(adam);
}

void StageState::drop_adam_state(const torch::Tensor& parameter) {
  optimizer->state().erase(state_key<OptimizerState>(parameter));
}

int64_t StageState::optimizer_state_bytes() const {
  int64_t bytes = 0;
  for (const auto& p : module->parameters())
    if (const auto* adam = adam_state(p))
      bytes += adam->exp_avg().nbytes() + adam->exp_avg_sq().nbytes();
  return bytes;
}

}  // namespace dualpipe::train
