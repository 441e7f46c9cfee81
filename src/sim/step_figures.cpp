#include "dualpipe/sim/step_figures.h"

#include <algorithm>
#include <limits>

namespace dualpipe {

RankFigures busy_and_span(const std::vector<ComputeInterval>& compute) {
  RankFigures r;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const ComputeInterval& i : compute) {
    r.busy += i.end - i.start;
    first = std::min(first, i.start);
    last = std::max(last, i.end);
  }
  r.span = compute.empty() ? 0.0 : last - first;
  return r;
}

double span_bubble_rate(double max_span, double max_busy) {
  return max_span > 0 ? (max_span - max_busy) / max_span : 0.0;
}

StepFigures step_figures(const std::vector<std::vector<ComputeInterval>>& compute_by_rank) {
  StepFigures f;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const auto& compute : compute_by_rank) {
    f.per_rank.push_back(busy_and_span(compute));
    for (const ComputeInterval& i : compute) {
      first = std::min(first, i.start);
      last = std::max(last, i.end);
    }
  }
  f.makespan = first <= last ? last - first : 0.0;
  double max_span = 0, max_busy = 0, total_busy = 0;
  for (RankFigures& r : f.per_rank) {
    r.idle = f.makespan - r.busy;
    f.bubble = std::max(f.bubble, r.idle);
    max_span = std::max(max_span, r.span);
    max_busy = std::max(max_busy, r.busy);
    total_busy += r.busy;
  }
  f.bubble_rate = span_bubble_rate(max_span, max_busy);
  const double ranks = static_cast<double>(compute_by_rank.size());
  f.step_bubble_rate = f.makespan > 0 ? 1.0 - total_busy / (ranks * f.makespan) : 0.0;
  return f;
}

}  // namespace dualpipe
