// A pipeline stage as the executor sees it: a forward over one tensor, its parameters, and an optional
// overlapped forward-backward routine.
//
// Users keep their own torch::nn::Modules; make_stage() wraps any module holder with a
// `Tensor forward(const Tensor&)`. A stage type that can overlap the forward of one micro-batch with the
// backward of another (for example by interleaving expert-parallel all-to-all with compute, the hook DualPipe
// exposes) overrides overlapped_forward_backward(); the default runs the forward, then the backward.
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace dualpipe::runtime {

class Stage;

// The backward half of an overlapped pair: run autograd from `roots` with `grads` (empty for a loss root).
struct BackwardHalf {
  Stage* stage = nullptr;
  std::vector<torch::Tensor> roots;
  std::vector<torch::Tensor> grads;

  // torch::autograd::backward(roots, grads): gradients accumulate into the stage's parameters and into the
  // stage input's .grad.
  void run() const;
};

class Stage {
 public:
  virtual ~Stage() = default;

  virtual torch::Tensor forward(const torch::Tensor& input) = 0;
  // The module whose parameters this stage trains (for gradient reduction and inspection).
  virtual std::shared_ptr<torch::nn::Module> module() const = 0;

  // Forward of `input` on this stage and `backward` (of another stage or micro-batch on this rank) as one
  // unit. Returns the forward output. Must leave the same results as forward() followed by backward.run().
  virtual torch::Tensor overlapped_forward_backward(const torch::Tensor& input, const BackwardHalf& backward);

  std::vector<torch::Tensor> parameters() const { return module()->parameters(); }
};

// A Stage around a module and a forward function.
class ModuleStage : public Stage {
 public:
  using ForwardFn = std::function<torch::Tensor(const torch::Tensor&)>;
  ModuleStage(std::shared_ptr<torch::nn::Module> module, ForwardFn forward)
      : module_(std::move(module)), forward_(std::move(forward)) {}

  torch::Tensor forward(const torch::Tensor& input) override { return forward_(input); }
  std::shared_ptr<torch::nn::Module> module() const override { return module_; }

 private:
  std::shared_ptr<torch::nn::Module> module_;
  ForwardFn forward_;
};

// Wraps a module holder (TORCH_MODULE type) whose forward takes and returns one tensor.
template <typename Holder>
std::shared_ptr<Stage> make_stage(Holder holder) {
  return std::make_shared<ModuleStage>(holder.ptr(),
                                       [holder](const torch::Tensor& x) mutable { return holder->forward(x); });
}

}  // namespace dualpipe::runtime
