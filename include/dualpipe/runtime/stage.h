// A pipeline stage as the executor sees it: a forward over a list of tensors, its parameters, its device, and
// an optional overlapped forward-backward routine.
//
// Like the reference DualPipe's List[Tensor] interface, a stage takes and returns any number of tensors of any
// dtype. Floating-point tensors that require a gradient carry one back to the previous stage; the others
// (attention masks, position ids, anything computed without grad) pass through.
//
// Users keep their own torch::nn::Modules: make_stage() wraps any module holder whose forward takes and
// returns one tensor, make_list_stage() one whose forward takes and returns a std::vector<torch::Tensor>.
// A stage type that can overlap the forward of one micro-batch with the backward of another (for example by
// interleaving expert-parallel all-to-all with compute, the hook DualPipe exposes) overrides
// overlapped_forward_backward(); the default runs the forward, then the backward.
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace dualpipe::runtime {

using Tensors = std::vector<torch::Tensor>;
class Stage;

// The backward half of an overlapped pair, prepared by the executor. `body` leaves the input gradients where the
// executor reads them, and computes the parameter gradients too unless `weight` is set: then `body` computes the
// input gradients only and `weight` the parameter gradients after them (ExecutorOptions::pair_weights_last).
// run() does both; a Stage that runs the halves side by side may do other work between them.
struct BackwardHalf {
  std::function<void()> body;
  std::function<void()> weight = {};  // empty: `body` computes the parameter gradients too
  // On a GPU, the stream autograd runs this backward on: the one its forward ran on. None on the CPU.
  std::optional<c10::Stream> stream = std::nullopt;
  // For a stage that runs this backward its own way instead of calling run() (DeepSeek's
  // overlapped_forward_backward hook, in Python): the stage whose backward it is, what the backward starts from
  // (the loss alone on the last stage, with an undefined gradient; else the outputs that carry a gradient and
  // those gradients), and `collect`, to call once autograd ran from them accumulating into .grad (as
  // loss.backward() or torch.autograd.backward(roots, root_grads) do): it takes the inputs' gradients. Not set
  // when the parameter gradients are left to `weight`.
  // `owner`: the Stage object of `stage`; `inputs`: the stage inputs of the forward whose backward this is (as the
  // stage's forward got them).
  int stage = -1;
  Stage* owner = nullptr;
  Tensors inputs = {};
  Tensors roots = {};
  Tensors root_grads = {};
  std::function<void()> collect = {};
  void run() const {
    body();
    if (weight) weight();
  }
};

// The loss of an overlapped pair's forward half, for a stage that computes it inside the pair (DeepSeek's hook takes
// criterion0 and labels0): `labels` are the forward's micro-batch's labels when its stage is the last one and the
// step has a criterion (else null). A stage that computes the loss leaves it in `loss`; when it leaves none, the
// executor computes it after the pair.
struct ForwardLoss {
  const Tensors* labels = nullptr;
  torch::Tensor loss;
};

class Stage {
 public:
  virtual ~Stage() = default;

  virtual Tensors forward(const Tensors& inputs) = 0;
  // The module whose parameters this stage trains (for gradient reduction and inspection).
  virtual std::shared_ptr<torch::nn::Module> module() const = 0;
  // Where the stage computes: received tensors are placed here. Default: its first parameter's device, else CPU.
  virtual c10::Device device() const;

  // Forward of `inputs` on this stage and `backward` (of another stage or micro-batch on this rank) as one
  // unit. Returns the forward outputs. Must leave the same results as forward() followed by backward.run().
  virtual Tensors overlapped_forward_backward(const Tensors& inputs, const BackwardHalf& backward);
  // What the executor calls for a pair: overlapped_forward_backward(), unless the stage computes the forward's
  // loss inside the pair too (see ForwardLoss).
  virtual Tensors overlapped_pair(const Tensors& inputs, const BackwardHalf& backward, ForwardLoss& /*loss*/) {
    return overlapped_forward_backward(inputs, backward);
  }
  // A backward on its own (a B action): run(), unless the stage runs it its own way (PhasedStage: as phases, each
  // exchange waited for where its result is first used). Must leave the same results as run().
  virtual void backward(const BackwardHalf& backward) { backward.run(); }

  std::vector<torch::Tensor> parameters() const { return module()->parameters(); }
};

// A Stage around a module and a forward function.
class ModuleStage : public Stage {
 public:
  using ForwardFn = std::function<Tensors(const Tensors&)>;
  ModuleStage(std::shared_ptr<torch::nn::Module> module, ForwardFn forward)
      : module_(std::move(module)), forward_(std::move(forward)) {}

  Tensors forward(const Tensors& inputs) override { return forward_(inputs); }
  std::shared_ptr<torch::nn::Module> module() const override { return module_; }

 private:
  std::shared_ptr<torch::nn::Module> module_;
  ForwardFn forward_;
};

// Wraps a module holder (TORCH_MODULE type) whose forward takes and returns one tensor.
template <typename Holder>
std::shared_ptr<Stage> make_stage(Holder holder) {
  return std::make_shared<ModuleStage>(holder.ptr(), [holder](const Tensors& x) mutable -> Tensors {
    TORCH_CHECK(x.size() == 1, "this stage takes one tensor, got ", x.size());
    return {holder->forward(x[0])};
  });
}

// Wraps a module holder whose forward takes and returns a list of tensors.
template <typename Holder>
std::shared_ptr<Stage> make_list_stage(Holder holder) {
  return std::make_shared<ModuleStage>(holder.ptr(), [holder](const Tensors& x) mutable { return holder->forward(x); });
}

}  // namespace dualpipe::runtime
