// A pipeline stage whose forward, input-gradient and weight-gradient parts take fixed times by sleeping, so many
// ranks fit on few cores and the measured step can be compared with the simulator's makespan for the same costs.
// The weight-gradient part follows the executor's rules like SplitLinear: deferred to the W action while an I
// action runs (WeightGradStore deferring), run inside the backward otherwise (B actions, overlapped pairs).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "dualpipe/runtime/stage.h"
#include "dualpipe/runtime/weight_grad_store.h"

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
    // Taken at forward time, as SplitLinear does: the store of the executor running this stage.
    ctx->saved_data["store"] =
        static_cast<int64_t>(reinterpret_cast<std::intptr_t>(runtime::WeightGradStore::current()));
    (void)weight;
    return input.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto weight_us = std::chrono::microseconds(ctx->saved_data["w"].toInt());
    std::this_thread::sleep_for(std::chrono::microseconds(ctx->saved_data["i"].toInt()));
    auto* store =
        reinterpret_cast<runtime::WeightGradStore*>(static_cast<std::intptr_t>(ctx->saved_data["store"].toInt()));
    if (store != nullptr && store->deferring()) {
      store->defer([weight_us] { std::this_thread::sleep_for(weight_us); });
    } else {
      std::this_thread::sleep_for(weight_us);
    }
    return {grad_outputs[0], torch::Tensor(), torch::Tensor(), torch::Tensor()};
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
