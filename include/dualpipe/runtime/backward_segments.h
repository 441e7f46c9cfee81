// A backward run segment by segment, for a stage that runs it as phases (phases.h): each segment runs the autograd
// graph from some of its tensors, whose gradients are known, down to others, where it stops and hands over the
// gradients that reached them. Between two segments the stage does what autograd cannot: it starts an exchange of
// those gradients and lets other work run until the exchange has ended.
//
// A segment's input gradients come first and its parameter gradients are left to `weight` (the I/W split of
// backward_split.h, cut at the segment's ends instead of at the stage's inputs), so the parameter gradients can run
// where they fill a gap. Each node sees the gradients it would see in one backward of the whole graph, so the
// results are the same, bit for bit.
#pragma once

#include <torch/csrc/autograd/edge.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <vector>

namespace dualpipe::runtime {

// Where a segment starts or stops: a tensor's place in the graph (torch::autograd::impl::gradient_edge), held
// weakly, so that a stage may remember it for a backward that never comes without keeping the graph alive. While
// the segments run, their caller holds the nodes (hold()): an earlier segment's parameter gradients free the parts
// of the graph they no longer need, which may be all that held a later segment's starting point.
struct GraphPoint {
  std::weak_ptr<torch::autograd::Node> node;
  uint32_t input_nr = 0;

  static GraphPoint of(const torch::Tensor& t);
  // The edge, or an empty one when the graph is gone.
  torch::autograd::Edge edge() const;
  std::shared_ptr<torch::autograd::Node> hold() const { return node.lock(); }
};

struct BackwardSegment {
  std::vector<torch::Tensor> at_cuts;  // the gradient that reached each cut (undefined: none)
  std::function<void()> weight;        // accumulates the segment's parameter gradients (call once)
};

// From `roots` seeded with `grads` (a root whose gradient is undefined is left out) down to `cuts`: the graph's
// nodes between them run, none below the cuts. Throws if the graph of a root or cut is gone.
BackwardSegment backward_segment(const std::vector<GraphPoint>& roots, const std::vector<torch::Tensor>& grads,
                                 const std::vector<GraphPoint>& cuts);

// The rest of the backward from `roots` seeded with `grads`: all of the graph below them now, parameter and leaf
// gradients accumulated into .grad.
void backward_rest(const std::vector<GraphPoint>& roots, const std::vector<torch::Tensor>& grads);

}  // namespace dualpipe::runtime
