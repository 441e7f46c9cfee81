#include "dualpipe/parallel/stage_parameters.h"

#include <type_traits>

namespace dualpipe::parallel {
namespace {

// The optimizer's state map is keyed by the parameter's TensorImpl pointer.
using OptimizerState = std::decay_t<decltype(std::declval<torch::optim::AdamW&>().state())>;
OptimizerState::key_type state_key(const torch::Tensor& parameter) {
  return static_cast<OptimizerState::key_type>(parameter.unsafeGetTensorImpl());
}

}  // namespace

const torch::optim::AdamWParamState* adam_state(const torch::optim::AdamW& optimizer, const torch::Tensor& parameter) {
  const auto& state = optimizer.state();
  const auto found = state.find(state_key(parameter));
  return found == state.end() ? nullptr : static_cast<const torch::optim::AdamWParamState*>(found->second.get());
}

void set_adam_state(torch::optim::AdamW& optimizer, const torch::Tensor& parameter, int64_t step,
                    const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq) {
  auto adam = std::make_unique<torch::optim::AdamWParamState>();
  adam->step(step);
  adam->exp_avg(exp_avg.to(parameter.device()));
  adam->exp_avg_sq(exp_avg_sq.to(parameter.device()));
  optimizer.state()[state_key(parameter)] = std::move(adam);
}

void drop_adam_state(torch::optim::AdamW& optimizer, const torch::Tensor& parameter) {
  optimizer.state().erase(state_key(parameter));
}

int64_t optimizer_state_bytes(const StageParameters& stage) {
  int64_t bytes = 0;
  for (const auto& p : stage.parameters)
    if (const auto* adam = adam_state(*stage.optimizer, p.value()))
      bytes += adam->exp_avg().nbytes() + adam->exp_avg_sq().nbytes();
  return bytes;
}

}  // namespace dualpipe::parallel
