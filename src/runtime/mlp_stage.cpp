#include "dualpipe/runtime/mlp_stage.h"

#include <torch/torch.h>

namespace dualpipe::runtime {

MlpStageImpl::MlpStageImpl(int64_t hidden) {
  fc1 = register_module("fc1", SplitLinear(hidden, 4 * hidden));
  fc2 = register_module("fc2", SplitLinear(4 * hidden, hidden));
}

torch::Tensor MlpStageImpl::forward(const torch::Tensor& input) {
  return fc2->forward(torch::gelu(fc1->forward(input)));
}

}  // namespace dualpipe::runtime
