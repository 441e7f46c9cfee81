// What crosses a stage boundary: the executor declares it, the mailbox checks and allocates receives by it.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace dualpipe::runtime {

// One tensor of one micro-batch at a stage boundary. A dimension of -1 may differ between micro-batches
// (sequence length, a smaller last micro-batch); the actual shape then travels with the message.
struct TensorSpec {
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
  c10::Device device = c10::kCPU;
  // Whether the tensor carries a gradient back (floating-point activations do; masks and ids do not). Only
  // checked for floating-point dtypes while training.
  bool requires_grad = true;
};
// The tensors crossing one stage boundary, in the order the stages take and return them.
using BoundarySpec = std::vector<TensorSpec>;

}  // namespace dualpipe::runtime
