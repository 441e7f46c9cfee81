#include "dualpipe/runtime/split_linear.h"

#include <torch/autograd.h>
#include <torch/nn/init.h>

#include <cmath>
#include <cstdint>

#include "dualpipe/runtime/weight_grad_store.h"

namespace dualpipe::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// dW for y = x W^T: grad_out^T x with all leading dimensions folded into one.
torch::Tensor weight_gradient(const torch::Tensor& grad_out, const torch::Tensor& input) {
  auto g = grad_out.reshape({-1, grad_out.size(-1)});
  auto x = input.reshape({-1, input.size(-1)});
  return g.t().matmul(x);
}

struct SplitLinearFunction : public torch::autograd::Function<SplitLinearFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input, const torch::Tensor& weight) {
    ctx->save_for_backward({input, weight});
    // The store is taken at forward time (not from the backward's thread), so deferral also works where
    // the autograd engine runs a backward on one of its own threads.
    auto* store = WeightGradStore::current();
    ctx->saved_data["store"] = static_cast<int64_t>(reinterpret_cast<std::intptr_t>(store));
    ctx->saved_data["weight"] = weight;  // the parameter itself, to accumulate into when deferred
    return input.matmul(weight.t());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const auto& input = saved[0];
    const auto& weight = saved[1];
    const auto& grad_out = grad_outputs[0];
    torch::Tensor grad_input;
    if (ctx->needs_input_grad(0)) grad_input = grad_out.matmul(weight);
    if (!ctx->needs_input_grad(1)) return {grad_input, torch::Tensor()};

    auto* store = reinterpret_cast<WeightGradStore*>(static_cast<std::intptr_t>(ctx->saved_data["store"].toInt()));
    if (store != nullptr && store->deferring()) {
      torch::Tensor parameter = ctx->saved_data["weight"].toTensor();
      torch::Tensor g = grad_out.detach(), x = input.detach();
      store->defer([parameter, g, x] { accumulate_grad(parameter, weight_gradient(g, x)); });
      return {grad_input, torch::Tensor()};
    }
    return {grad_input, weight_gradient(grad_out, input)};
  }
};

}  // namespace

SplitLinearImpl::SplitLinearImpl(int64_t in_features, int64_t out_features)
    : in_features_(in_features), out_features_(out_features) {
  reset();
}

void SplitLinearImpl::reset() {
  weight = register_parameter("weight", torch::empty({out_features_, in_features_}));
  // Same initialisation as torch::nn::Linear (kaiming_uniform with a = sqrt(5)).
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
}

torch::Tensor SplitLinearImpl::forward(const torch::Tensor& input) {
  return SplitLinearFunction::apply(input, weight);
}

void accumulate_grad(const torch::Tensor& parameter, const torch::Tensor& gradient) {
  torch::NoGradGuard no_grad;
  auto& grad = parameter.mutable_grad();
  if (grad.defined()) {
    grad.add_(gradient);
  } else {
    grad = gradient.detach().clone();
  }
}

}  // namespace dualpipe::runtime
