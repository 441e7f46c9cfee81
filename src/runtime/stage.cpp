#include "dualpipe/runtime/stage.h"

namespace dualpipe::runtime {

c10::Device Stage::device() const {
  for (const auto& p : module()->parameters()) return p.device();
  return c10::Device(c10::kCPU);
}

Tensors Stage::overlapped_forward_backward(const Tensors& inputs, const BackwardHalf& backward) {
  Tensors outputs = forward(inputs);
  backward.run();
  return outputs;
}

}  // namespace dualpipe::runtime
