#include "dualpipe/sim/activation_memory.h"

#include <algorithm>

namespace dualpipe {

void ActivationCounter::backward_starts(int stage) {
  if (!recompute_) return;
  inputs_ -= size(stage);
  full_ += size(stage);
}

double ActivationCounter::apply(const Action& a) {
  double highest = level();
  const auto forward_ends = [&](int stage) { (recompute_ ? inputs_ : full_) += size(stage); };
  // At its start a backward holds the most (a recomputed forward's too); it frees the stage's activation.
  const auto backward = [&](int stage) {
    backward_starts(stage);
    highest = std::max(highest, level());
    full_ -= size(stage);
  };
  switch (a.type) {
    case ActionType::Forward: forward_ends(a.stage); break;
    case ActionType::Backward: backward(a.stage); break;
    case ActionType::BackwardInput:
      backward(a.stage);
      weights_ += size(a.stage);  // what its W needs, kept until the W
      break;
    case ActionType::BackwardWeight: weights_ -= size(a.stage); break;
    case ActionType::Overlapped:
      backward(a.bwd_stage);
      forward_ends(a.stage);
      break;
    default: break;
  }
  highest = std::max(highest, level());
  peak_ = std::max(peak_, highest);
  return highest;
}

std::vector<double> activation_peaks(const Schedule& schedule, const CostModel& costs) {
  std::vector<double> peaks;
  peaks.reserve(schedule.actions.size());
  for (const auto& actions : schedule.actions) {
    ActivationCounter counter(costs);
    for (const Action& a : actions) counter.apply(a);
    peaks.push_back(counter.peak());
  }
  return peaks;
}

}  // namespace dualpipe
