#include "dualpipe/activation_memory.h"

#include <algorithm>

namespace dualpipe {

void ActivationCounter::backward_starts() {
  if (!recompute_) return;
  --inputs_;
  ++full_;
}

double ActivationCounter::apply(const Action& a) {
  double highest = level();
  switch (a.type) {
    case ActionType::Forward:
      ++(recompute_ ? inputs_ : full_);
      break;
    case ActionType::Backward:
      backward_starts();
      highest = std::max(highest, level());
      --full_;
      break;
    case ActionType::BackwardInput:
      backward_starts();
      highest = std::max(highest, level());
      --full_;
      ++weights_;
      break;
    case ActionType::BackwardWeight:
      --weights_;
      break;
    case ActionType::Overlapped:
      backward_starts();
      highest = std::max(highest, level());
      --full_;
      ++(recompute_ ? inputs_ : full_);
      break;
    default:
      break;
  }
  highest = std::max(highest, level());
  raise(highest);
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
