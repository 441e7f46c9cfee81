// The input/weight split of a backward for any LibTorch module (internal).
//
// Zero Bubble and DualPipe run a stage's backward in two actions: I computes only the gradients the previous
// stage needs, W later computes the parameter gradients. With no cooperation from the module:
//   - I walks the autograd graph from the stage outputs and finds the *closure*: the nodes from which a stage
//     input is reachable. A closure node with an edge leaving the closure (towards parameters) is a weight
//     node: a Linear's addmm, a LayerNorm, an embedding lookup's consumer. The autograd engine runs the input
//     gradients with those nodes' incoming gradients captured; it skips their parameter outputs, because no
//     requested output lies behind them.
//   - W cuts the weight nodes' edges into the closure, so they can compute nothing but parameter gradients,
//     and runs the engine from them with the captured gradients, accumulating into the parameters.
// Nothing I computed is computed again, and each weight node sees the very gradient it would have seen in an
// unsplit backward, so the parameter gradients are bit-identical. The closure's other nodes free their saved
// tensors as I runs them, as in the unsplit backward, and cutting the edges frees the nodes themselves (the Zero
// Bubble paper's memory release).
#pragma once

#include <torch/csrc/autograd/edge.h>
#include <torch/types.h>

#include <functional>
#include <vector>

namespace dualpipe::runtime::detail {

// The weight half of one (stage, micro-batch) backward whose input half ran.
// Nodes whose backward must run exactly once (ExecutorOptions::runs_once); empty: none.
using NodeFilter = std::function<bool(const torch::autograd::Node&)>;

class DeferredWeightGrad {
 public:
  bool empty() const { return roots_.empty(); }
  // Computes the parameter gradients and accumulates them, then releases the graph.
  void run();
  // The backward from `root` seeded with `grad` is W's too.
  void add(torch::autograd::Edge root, torch::Tensor grad) {
    roots_.push_back(std::move(root));
    grads_.push_back(std::move(grad));
  }

 private:
  std::vector<torch::autograd::Edge> roots_;
  std::vector<torch::Tensor> grads_;
};

// Gradients of `inputs` (undefined for an input that needs none or that the roots do not depend on) from
// `roots` seeded with `root_grads` (undefined: ones, for a scalar loss). Parameter gradients are left to
// `weight`, unless a weight node is one of `runs_once`: then the whole backward runs now, the parameter gradients
// accumulated, and `weight` stays empty.
std::vector<torch::Tensor> backward_input(const std::vector<torch::Tensor>& roots,
                                          const std::vector<torch::Tensor>& root_grads,
                                          const std::vector<torch::Tensor>& inputs, DeferredWeightGrad& weight,
                                          const NodeFilter& runs_once = {});

// The unsplit backward: gradients of `inputs`, parameter gradients accumulated now.
std::vector<torch::Tensor> backward_full(const std::vector<torch::Tensor>& roots,
                                         const std::vector<torch::Tensor>& root_grads,
                                         const std::vector<torch::Tensor>& inputs);

// The gradients autograd accumulated into `inputs` (undefined for an input that needs none).
std::vector<torch::Tensor> accumulated_input_grads(const std::vector<torch::Tensor>& inputs);

}  // namespace dualpipe::runtime::detail
