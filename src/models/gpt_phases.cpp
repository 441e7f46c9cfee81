// A transformer stage's forward and backward as phases (GptStageImpl::forward_phases, backward_phases), and the
// runtime stage that interleaves them (make_phased_stage).
#include <torch/torch.h>

#include <map>
#include <mutex>

#include "dualpipe/models/gpt.h"
#include "dualpipe/util/error.h"

namespace dualpipe::models {

using runtime::GraphPoint;
using runtime::Phase;
using runtime::PhaseChain;

// One MoE block's cuts.
struct GptStageImpl::BlockPoints {
  GraphPoint input, residual;
  MoePoints moe;
};

// The cuts of each remembered forward, by its input's tensor.
struct GptStageImpl::PhaseRecords {
  std::mutex mutex;
  std::map<const c10::TensorImpl*, std::vector<BlockPoints>> by_input;

  void remember(const torch::Tensor& input, std::vector<BlockPoints> blocks) {
    const std::lock_guard<std::mutex> lock(mutex);
    // Forget the forwards whose graphs are gone (their backward ran otherwise, or never will).
    for (auto it = by_input.begin(); it != by_input.end();)
      it = it->second.front().input.node.expired() ? by_input.erase(it) : std::next(it);
    by_input[input.unsafeGetTensorImpl()] = std::move(blocks);
  }
  std::vector<BlockPoints> take(const torch::Tensor& input) {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = by_input.find(input.unsafeGetTensorImpl());
    if (it == by_input.end()) return {};
    std::vector<BlockPoints> blocks = std::move(it->second);
    by_input.erase(it);
    return blocks;
  }
};

namespace {

// Runs `parts` in order as one phase.
std::function<void()> in_order(std::vector<std::function<void()>> parts) {
  return [parts = std::move(parts)] {
    for (const auto& part : parts) part();
  };
}

}  // namespace

PhaseChain GptStageImpl::forward_phases(const runtime::Tensors& inputs, std::shared_ptr<runtime::Tensors> outputs) {
  TORCH_CHECK(inputs.size() == 1, "a transformer stage takes one tensor, got ", inputs.size());
  struct State {
    torch::Tensor x;
    std::vector<BlockInFlight> blocks;  // the MoE blocks' in order
  };
  auto state = std::make_shared<State>();
  state->x = inputs[0];
  PhaseChain chain;
  std::vector<std::function<void()>> parts;  // of the phase being built
  if (first_) parts.push_back([this, state] { state->x = embed(state->x); });
  bool exchanges = false;
  for (GptBlock& block : blocks_) {
    if (!block->moe()) {
      parts.push_back([state, block]() mutable { state->x = block(state->x); });
      continue;
    }
    exchanges |= block->moe()->communication().size() > 1;
    const size_t i = state->blocks.size();
    state->blocks.emplace_back();
    parts.push_back([state, block, i]() mutable { state->blocks[i] = block->start_moe(state->x); });
    chain.push_back({"attn", in_order(std::move(parts)), /*starts_exchange=*/true});
    parts.clear();
    chain.push_back({"mlp", [state, block, i] { block->moe()->start_combine(*state->blocks[i].moe); }, true});
    parts.push_back([state, block, i]() mutable { state->x = block->finish_moe(state->blocks[i]); });
  }
  const bool remember = exchanges && torch::GradMode::is_enabled();
  parts.push_back([this, state, outputs, remember, input = inputs[0]] {
    if (last_) state->x = head(parallel::enter_tensor_parallel(final_norm(state->x), tp_));
    *outputs = {state->x};
    if (remember) {
      std::vector<BlockPoints> points;
      for (const BlockInFlight& b : state->blocks)
        points.push_back({GraphPoint::of(b.input), GraphPoint::of(b.residual), MoeLayerImpl::points(*b.moe)});
      if (!phase_records_) phase_records_ = std::make_shared<PhaseRecords>();
      phase_records_->remember(input, std::move(points));
    }
    state->blocks.clear();
  });
  chain.push_back({chain.empty() ? "forward" : "combine", in_order(std::move(parts))});
  return chain;
}

PhaseChain GptStageImpl::backward_phases(const runtime::BackwardHalf& backward) {
  if (!phase_records_ || backward.inputs.empty()) return {};
  std::vector<BlockPoints> blocks = phase_records_->take(backward.inputs[0]);
  if (blocks.empty()) return {};
  // What each phase leaves the next: where the backward goes on from and with which gradients, the exchange under
  // way, the parameter gradients still to run.
  struct State {
    std::vector<std::shared_ptr<torch::autograd::Node>> held;  // every cut's node, while the phases run
    std::vector<GraphPoint> roots;
    runtime::Tensors grads;
    runtime::Tensors handed;  // the gradients of the residual and of what the MoE layer's first phase handed its last
    parallel::ExchangeInFlight exchange;
    std::function<void()> weight;
  };
  auto state = std::make_shared<State>();
  for (const BlockPoints& b : blocks)
    for (const GraphPoint& p : {b.input, b.residual, b.moe.dispatch_sent, b.moe.dispatch_received,
                                b.moe.combine_sent, b.moe.combine_received})
      state->held.push_back(p.hold());
  for (const BlockPoints& b : blocks)
    for (const GraphPoint& p : b.moe.handed) state->held.push_back(p.hold());
  for (size_t i = 0; i < backward.roots.size(); ++i) {
    const bool given = i < backward.root_grads.size() && backward.root_grads[i].defined();
    state->roots.push_back(GraphPoint::of(backward.roots[i]));
    // What torch.autograd.backward seeds a scalar loss with.
    state->grads.push_back(given ? backward.root_grads[i] : torch::ones_like(backward.roots[i]));
  }
  const auto exchange_gradient = [](const torch::Tensor& grad, const BlockPoints& b, const char* what) {
    DUALPIPE_CHECK(grad.defined(), "no gradient reached the ", what, " exchange of an MoE layer");
    return parallel::start_gradient_all_to_all(grad, *b.moe.group, what);
  };
  const auto run_weight = [state] { std::exchange(state->weight, nullptr)(); };
  PhaseChain chain;
  for (size_t k = blocks.size(); k-- > 0;) {
    const BlockPoints& b = blocks[k];
    // Below the combine's result, the residual and the handed tensors: the rest is the layer's first phase's.
    std::vector<GraphPoint> handed = {b.residual};
    handed.insert(handed.end(), b.moe.handed.begin(), b.moe.handed.end());
    chain.push_back({"combine", [state, b, handed, exchange_gradient] {
                       std::vector<GraphPoint> cuts = {b.moe.combine_received};
                       cuts.insert(cuts.end(), handed.begin(), handed.end());
                       runtime::BackwardSegment segment = runtime::backward_segment(state->roots, state->grads, cuts);
                       state->handed.assign(segment.at_cuts.begin() + 1, segment.at_cuts.end());
                       state->weight = std::move(segment.weight);
                       state->exchange = exchange_gradient(segment.at_cuts[0], b, "combine");
                     },
                     true});
    chain.push_back({"combine W", run_weight, false, true});
    chain.push_back({"mlp", [state, b, exchange_gradient] {
                       state->exchange.wait();
                       runtime::BackwardSegment segment = runtime::backward_segment(
                           {b.moe.combine_sent}, {state->exchange.output}, {b.moe.dispatch_received});
                       state->weight = std::move(segment.weight);
                       state->exchange = exchange_gradient(segment.at_cuts[0], b, "dispatch");
                     },
                     true});
    chain.push_back({"mlp W", run_weight, false, true});
    const bool last = k == 0;
    chain.push_back({"attn", [state, b, handed, last, collect = backward.collect] {
                       state->exchange.wait();
                       std::vector<GraphPoint> roots = {b.moe.dispatch_sent};
                       roots.insert(roots.end(), handed.begin(), handed.end());
                       runtime::Tensors grads = {state->exchange.output};
                       grads.insert(grads.end(), state->handed.begin(), state->handed.end());
                       if (last) {  // the rest of the stage, down to its inputs, whose gradients the executor takes
                         runtime::backward_rest(roots, grads);
                         state->held.clear();
                         collect();
                         return;
                       }
                       runtime::BackwardSegment segment = runtime::backward_segment(roots, grads, {b.input});
                       state->roots = {b.input};
                       state->grads = {segment.at_cuts[0]};
                       state->weight = std::move(segment.weight);
                     }});
    if (!last) chain.push_back({"attn W", run_weight, false, true});
  }
  return chain;
}

namespace {

class PhasedGptStage : public runtime::PhasedStage {
 public:
  explicit PhasedGptStage(GptStage stage) : stage_(std::move(stage)) {}
  std::shared_ptr<torch::nn::Module> module() const override { return stage_.ptr(); }
  PhaseChain forward_phases(const runtime::Tensors& inputs, std::shared_ptr<runtime::Tensors> outputs) override {
    return stage_->forward_phases(inputs, std::move(outputs));
  }
  PhaseChain backward_phases(const runtime::BackwardHalf& backward) override {
    return stage_->backward_phases(backward);
  }

 private:
  GptStage stage_;
};

}  // namespace

std::shared_ptr<runtime::PhasedStage> make_phased_stage(GptStage stage) {
  return std::make_shared<PhasedGptStage>(std::move(stage));
}

}  // namespace dualpipe::models
