#include "dualpipe/runtime/phases.h"

#include "dualpipe/schedule/phase_order.h"

namespace dualpipe::runtime {

void interleave_phases(PhaseChain backward, PhaseChain forward,
                       const std::function<void(char chain, const std::string& name)>& ran) {
  const auto steps = [](const PhaseChain& chain) {
    std::vector<PhaseStep> s;
    for (const Phase& p : chain) s.push_back({p.starts_exchange, p.weight});
    return s;
  };
  for (const PhaseTurn& turn : interleaved_phase_order(steps(backward), steps(forward))) {
    const Phase& phase = (turn.chain == 'B' ? backward : forward)[turn.index];
    if (ran) ran(turn.chain, phase.name);
    phase.run();
  }
}

Tensors PhasedStage::forward(const Tensors& inputs) {
  auto outputs = std::make_shared<Tensors>();
  for (const Phase& phase : forward_phases(inputs, outputs)) phase.run();
  return std::move(*outputs);
}

namespace {

// `backward` as phases of its own stage, when that is a PhasedStage that can run it so; else empty.
PhaseChain phases_of(const BackwardHalf& backward) {
  auto* owner = dynamic_cast<PhasedStage*>(backward.owner);
  if (!owner || !backward.collect || backward.roots.empty()) return {};
  return owner->backward_phases(backward);
}

}  // namespace

void PhasedStage::backward(const BackwardHalf& backward) {
  const PhaseChain chain = phases_of(backward);
  if (chain.empty()) return backward.run();
  for (const Phase& phase : chain) {
    if (observer_) observer_('B', phase.name);
    phase.run();
  }
}

Tensors PhasedStage::overlapped_forward_backward(const Tensors& inputs, const BackwardHalf& backward) {
  PhaseChain backward_chain = phases_of(backward);
  if (backward_chain.empty()) return Stage::overlapped_forward_backward(inputs, backward);
  auto outputs = std::make_shared<Tensors>();
  interleave_phases(std::move(backward_chain), forward_phases(inputs, outputs), observer_);
  return std::move(*outputs);
}

}  // namespace dualpipe::runtime
