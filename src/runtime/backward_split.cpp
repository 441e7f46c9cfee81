#include "backward_split.h"

#include "dualpipe/runtime/backward_segments.h"
#include "dualpipe/util/error.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace dualpipe::runtime::detail {

using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::Node;

struct Seeds {
  edge_list roots;
  std::vector<torch::Tensor> grads;
};

Seeds seeds(const std::vector<torch::Tensor>& roots, const std::vector<torch::Tensor>& root_grads) {
  Seeds s;
  for (size_t i = 0; i < roots.size(); ++i) {
    s.roots.push_back(torch::autograd::impl::gradient_edge(roots[i]));
    const bool given = i < root_grads.size() && root_grads[i].defined();
    // What torch.autograd.backward seeds a scalar root with.
    s.grads.push_back(given ? root_grads[i] : torch::ones_like(roots[i], at::MemoryFormat::Preserve));
  }
  return s;
}

struct Closure {
  std::unordered_set<Node*> nodes;
  std::vector<Node*> in_order;  // the same nodes, in a deterministic (depth-first post-) order
  bool contains(const Node* n) const { return nodes.count(const_cast<Node*>(n)) > 0; }
};

// The nodes from which one of `targets` is reachable, walking the graph from `roots` (iteratively: graphs of
// deep stages are deep).
Closure closure_of(const edge_list& roots, const std::unordered_set<Node*>& targets) {
  Closure closure;
  std::unordered_map<Node*, bool> reaches;
  std::vector<std::pair<Node*, size_t>> stack;
  auto visit = [&](Node* n) {
    if (n == nullptr || reaches.count(n)) return;
    const bool target = targets.count(n) > 0;
    reaches.emplace(n, target);
    // Below a target lies what another backward runs (a segment's cut, backward_segments.h): not walked.
    stack.emplace_back(n, target ? n->num_outputs() : 0);
  };
  for (const Edge& e : roots) visit(e.function.get());
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->num_outputs()) {
      visit(node->next_edge(next++).function.get());
      continue;
    }
    Node* done = node;
    stack.pop_back();
    bool& r = reaches[done];
    for (const Edge& e : done->next_edges())
      if (e.function && reaches[e.function.get()]) r = true;
    if (r) {
      closure.nodes.insert(done);
      closure.in_order.push_back(done);
    }
  }
  return closure;
}

// Frees a node's saved tensors as soon as it has run, as the engine does when it keeps no graph. The input half keeps
// the graph for the weight nodes W runs later; without this the rest of it held its saved tensors to the end of I,
// on top of the gradients I makes (bench_real_models, Llama 3 PP 2: rank 0's peak of saved tensors 3.83 MiB, now
// 3.49).
class ReleaseWhenRun : public torch::autograd::FunctionPostHook {
 public:
  explicit ReleaseWhenRun(Node& node) : node_(node) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    node_.release_variables();
    return outputs;
  }

 private:
  Node& node_;  // the node owns this hook
};

// The input half of a backward from `seed` to `targets` (edges into the graph below the seed), the parameter
// gradients left to `weight`. Returns the gradients captured at `targets`; none when a weight node runs once
// (`runs_once`): then the whole backward ran, accumulating.
std::optional<std::vector<torch::Tensor>> split_backward(Seeds& seed, const edge_list& targets,
                                                         DeferredWeightGrad& weight, const NodeFilter& runs_once) {
  std::unordered_set<Node*> target_nodes;
  for (const Edge& e : targets) target_nodes.insert(e.function.get());
  const Closure closure = closure_of(seed.roots, target_nodes);

  // Weight nodes: in the closure, with an edge leaving it. Their incoming gradients are captured. A target is not
  // one: the backward stops at it (its edges lead to the graph below, which another segment runs).
  auto leaves_closure = [&](const Node* n) {
    const auto& edges = n->next_edges();
    return std::any_of(edges.begin(), edges.end(),
                       [&](const Edge& e) { return e.function && !closure.contains(e.function.get()); });
  };
  std::vector<Node*> weight_node_list;
  for (Node* n : closure.in_order)
    if (leaves_closure(n) && !target_nodes.count(n)) weight_node_list.push_back(n);
  // A weight node that must not run twice: no split, the whole backward now (W finds nothing).
  if (runs_once && std::any_of(weight_node_list.begin(), weight_node_list.end(),
                               [&](const Node* n) { return runs_once(*n); })) {
    torch::autograd::Engine::get_default_engine().execute(seed.roots, seed.grads, /*keep_graph=*/false,
                                                          /*create_graph=*/false, /*accumulate_grad=*/true);
    return std::nullopt;
  }

  // Roots outside the closure (an output that does not depend on any input) belong to W whole.
  for (size_t i = 0; i < seed.roots.size(); ++i) {
    if (closure.contains(seed.roots[i].function.get())) continue;
    weight.add(seed.roots[i], seed.grads[i]);
  }
  // The closure's other nodes run in I and never again (W runs from the weight nodes, below the closure).
  const std::unordered_set<Node*> weight_node_set(weight_node_list.begin(), weight_node_list.end());
  for (Node* n : closure.in_order)
    if (!weight_node_set.count(n) && !target_nodes.count(n)) n->add_post_hook(std::make_unique<ReleaseWhenRun>(*n));
  std::vector<std::shared_ptr<Node>> weight_nodes;
  edge_list outputs = targets;
  for (Node* n : weight_node_list) {
    weight_nodes.push_back(n->shared_from_this());
    for (uint32_t slot = 0; slot < n->num_inputs(); ++slot) outputs.emplace_back(weight_nodes.back(), slot);
  }

  if (targets.empty()) return std::vector<torch::Tensor>();  // nothing to send back: all of it is W
  const std::vector<torch::Tensor> results = torch::autograd::Engine::get_default_engine().execute(
      seed.roots, seed.grads, /*keep_graph=*/true, /*create_graph=*/false, /*accumulate_grad=*/false, outputs);
  size_t k = targets.size();
  for (const auto& node : weight_nodes) {
    for (uint32_t slot = 0; slot < node->num_inputs(); ++slot, ++k) {
      if (!results[k].defined()) continue;
      weight.add(Edge(node, slot), results[k]);
    }
    // From now on the node can only produce parameter gradients. (Through the mutable edge list: Node's
    // set_next_edge refuses nodes that have a parent, to guard the topological order, which removing an edge
    // keeps.)
    for (Edge& e : node->next_edges())
      if (e.function && closure.contains(e.function.get())) e = Edge();
  }
  return std::vector<torch::Tensor>(results.begin(), results.begin() + static_cast<std::ptrdiff_t>(targets.size()));
}

std::vector<torch::Tensor> backward_input(const std::vector<torch::Tensor>& roots,
                                          const std::vector<torch::Tensor>& root_grads,
                                          const std::vector<torch::Tensor>& inputs, DeferredWeightGrad& weight,
                                          const NodeFilter& runs_once) {
  Seeds seed = seeds(roots, root_grads);
  edge_list input_edges;
  for (const auto& x : inputs)
    if (x.defined() && x.requires_grad()) input_edges.push_back(torch::autograd::impl::gradient_edge(x));
  const auto captured = split_backward(seed, input_edges, weight, runs_once);
  if (!captured) return accumulated_input_grads(inputs);
  std::vector<torch::Tensor> input_grads(inputs.size());
  if (captured->empty()) return input_grads;
  size_t k = 0;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) input_grads[i] = (*captured)[k++];
  return input_grads;
}

void DeferredWeightGrad::run() {
  if (roots_.empty()) return;
  edge_list roots = std::move(roots_);
  std::vector<torch::Tensor> grads = std::move(grads_);
  roots_.clear();
  grads_.clear();
  torch::autograd::Engine::get_default_engine().execute(roots, grads, /*keep_graph=*/false, /*create_graph=*/false,
                                                        /*accumulate_grad=*/true);
}

std::vector<torch::Tensor> backward_full(const std::vector<torch::Tensor>& roots,
                                         const std::vector<torch::Tensor>& root_grads,
                                         const std::vector<torch::Tensor>& inputs) {
  Seeds seed = seeds(roots, root_grads);
  torch::autograd::Engine::get_default_engine().execute(seed.roots, seed.grads, /*keep_graph=*/false,
                                                        /*create_graph=*/false, /*accumulate_grad=*/true);
  return accumulated_input_grads(inputs);
}

std::vector<torch::Tensor> accumulated_input_grads(const std::vector<torch::Tensor>& inputs) {
  std::vector<torch::Tensor> input_grads(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) input_grads[i] = inputs[i].grad();
  return input_grads;
}

}  // namespace dualpipe::runtime::detail

namespace dualpipe::runtime {

using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::Node;

GraphPoint GraphPoint::of(const torch::Tensor& t) {
  const Edge e = torch::autograd::impl::gradient_edge(t);
  return {e.function, e.input_nr};
}

Edge GraphPoint::edge() const {
  std::shared_ptr<Node> n = node.lock();
  return n ? Edge(std::move(n), input_nr) : Edge();
}

namespace {

Edge live_edge(const GraphPoint& point) {
  Edge e = point.edge();
  // The caller holds the nodes it runs from and to (GraphPoint holds them weakly): a backward that ran earlier
  // segments frees what they no longer need.
  DUALPIPE_CHECK(e.function, "a backward segment's graph is gone: hold its nodes while it runs");
  return e;
}

detail::Seeds defined_seeds(const std::vector<GraphPoint>& roots, const std::vector<torch::Tensor>& grads) {
  detail::Seeds seed;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!grads.at(i).defined()) continue;
    seed.roots.push_back(live_edge(roots[i]));
    seed.grads.push_back(grads[i]);
  }
  return seed;
}

}  // namespace

BackwardSegment backward_segment(const std::vector<GraphPoint>& roots, const std::vector<torch::Tensor>& grads,
                                 const std::vector<GraphPoint>& cuts) {
  detail::Seeds seed = defined_seeds(roots, grads);
  edge_list targets;
  for (const GraphPoint& c : cuts) targets.push_back(live_edge(c));
  auto weight = std::make_shared<detail::DeferredWeightGrad>();
  BackwardSegment segment;
  segment.weight = [weight] { weight->run(); };
  segment.at_cuts.resize(cuts.size());
  if (seed.roots.empty()) return segment;
  segment.at_cuts = *detail::split_backward(seed, targets, *weight, {});
  return segment;
}

void backward_rest(const std::vector<GraphPoint>& roots, const std::vector<torch::Tensor>& grads) {
  detail::Seeds seed = defined_seeds(roots, grads);
  if (seed.roots.empty()) return;
  torch::autograd::Engine::get_default_engine().execute(seed.roots, seed.grads, /*keep_graph=*/false,
                                                        /*create_graph=*/false, /*accumulate_grad=*/true);
}

}  // namespace dualpipe::runtime
