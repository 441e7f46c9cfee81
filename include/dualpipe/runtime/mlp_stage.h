// The example stage used by tests, docs and examples: Linear(h, 4h) -> GELU -> Linear(4h, h), no biases,
// built from split-aware layers so its weight gradients can be deferred to W actions.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "dualpipe/runtime/split_linear.h"

namespace dualpipe::runtime {

class MlpStageImpl : public torch::nn::Module {
 public:
  explicit MlpStageImpl(int64_t hidden);
  torch::Tensor forward(const torch::Tensor& input);

  SplitLinear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(MlpStage);

}  // namespace dualpipe::runtime
