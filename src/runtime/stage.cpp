#include "dualpipe/runtime/stage.h"

#include <torch/autograd.h>

namespace dualpipe::runtime {

void BackwardHalf::run() const {
  torch::autograd::backward(roots, grads);
}

torch::Tensor Stage::overlapped_forward_backward(const torch::Tensor& input, const BackwardHalf& backward) {
  torch::Tensor output = forward(input);
  backward.run();
  return output;
}

}  // namespace dualpipe::runtime
