#include "stage_state.h"

#include <sstream>

#include "dualpipe/error.h"

namespace dualpipe::train {

StageState::StageState(const TrainConfig& c, const models::GptConfig& model, const models::StageCut& cut, int stage)
    : module(model, cut, stage) {
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

std::string StageState::save() const {
  torch::serialize::OutputArchive archive;
  for (const auto& p : module->named_parameters()) archive.write("parameter." + p.key(), p.value().detach().cpu());
  torch::serialize::OutputArchive optimizer_archive;
  optimizer->save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void StageState::load(const std::string& bytes, const std::string& what) {
  try {
    std::istringstream in(bytes);
    torch::serialize::InputArchive archive;
    archive.load_from(in);
    torch::NoGradGuard no_grad;
    for (auto& p : module->named_parameters()) {
      torch::Tensor saved;
      archive.read("parameter." + p.key(), saved);
      DUALPIPE_REQUIRE(saved.sizes() == p.value().sizes(), what, ": ", p.key(), " has shape ", saved.sizes(),
                       ", the model needs ", p.value().sizes());
      p.value().copy_(saved);
    }
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    optimizer->load(optimizer_archive);
  } catch (const c10::Error& e) {
    std::string message = e.what();
    message.resize(std::min(message.find('\n'), message.size()));
    throw InvalidArgument(detail::concat(what, " cannot be loaded: ", message));
  }
}

}  // namespace dualpipe::train
