// A pipeline stage whose forward, input-gradient and weight-gradient parts take fixed times by sleeping, so many
// ranks fit on few cores and the measured step can be compared with the simulator's makespan for the same costs.
// Its backward behaves like LibTorch's own layers: it sleeps for the input gradient only when the engine asks
// for the input's gradient, and for the weight gradient only when it asks for the weight's. So the executor's
// generic I/W split (docs/runtime.md) puts the first sleep in the I action and the second in the W action, and a
// full backward (B actions, overlapped pairs) runs both.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "dualpipe/runtime/stage.h"

namespace dualpipe::bench {

struct SleepCosts {
  std::chrono::microseconds forward, input_grad, weight_grad;
};

namespace detail {
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct SleepFunction : public torch::autograd::Function<SleepFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input, const torch::Tensor& weight,
                               int64_t input_grad_us, int64_t weight_grad_us) {
    ctx->saved_data["i"] = input_grad_us;
    ctx->saved_data["w"] = weight_grad_us;
    ctx->save_for_backward({weight});
    return input.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    torch::Tensor grad_input, grad_weight;
    if (ctx->needs_input_grad(0)) {
      std::this_thread::sleep_for(std::chrono::microseconds(ctx->saved_data["i"].toInt()));
      grad_input = grad_outputs[0];
    }
    if (ctx->needs_input_grad(1)) {
      std::this_thread::sleep_for(std::chrono::microseconds(ctx->saved_data["w"].toInt()));
      grad_weight = torch::zeros_like(ctx->get_saved_variables()[0]);
    }
    return {grad_input, grad_weight, torch::Tensor(), torch::Tensor()};
  }
};
}  // namespace detail

class SleepStage : public runtime::Stage {
 public:
  explicit SleepStage(SleepCosts costs) : costs_(costs), module_(std::make_shared<torch::nn::Module>()) {
    weight_ = module_->register_parameter("weight", torch::zeros({1}));
  }
  runtime::Tensors forward(const runtime::Tensors& input) override {
    std::this_thread::sleep_for(costs_.forward);
    return {detail::SleepFunction::apply(input.at(0), weight_, costs_.input_grad.count(), costs_.weight_grad.count())};
  }
  std::shared_ptr<torch::nn::Module> module() const override { return module_; }

 private:
  SleepCosts costs_;
  std::shared_ptr<torch::nn::Module> module_;
  torch::Tensor weight_;
};

}  // namespace dualpipe::bench
