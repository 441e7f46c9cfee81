// A Linear layer (no bias) whose weight gradient can be deferred: the split-aware building block for
// Zero Bubble / DualPipe style I and W actions.
//
// Its backward always returns the input gradient. For the weight gradient it checks the WeightGradStore that
// was current when the forward ran: if that store is deferring (the executor is running an I action), it pushes
// a closure computing dW = grad_out^T x into the store and returns no weight gradient; otherwise (B actions,
// code outside an executor) it computes dW immediately. Same math either way, so results match a plain run.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace dualpipe::runtime {

class SplitLinearImpl : public torch::nn::Module {
 public:
  SplitLinearImpl(int64_t in_features, int64_t out_features);
  // y = x W^T over the last dimension of x.
  torch::Tensor forward(const torch::Tensor& input);
  void reset();

  torch::Tensor weight;  // [out_features, in_features], initialised like torch::nn::Linear

 private:
  int64_t in_features_, out_features_;
};
TORCH_MODULE(SplitLinear);

// Adds `gradient` into `parameter.grad()` (creating it if undefined), outside autograd.
void accumulate_grad(const torch::Tensor& parameter, const torch::Tensor& gradient);

}  // namespace dualpipe::runtime
