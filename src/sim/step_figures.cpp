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

StepFigures step_figures(const std::vector<std::vector<ComputeInterval>>& compute_by_rank,
                         const std::vector<std::vector<ComputeInterval>>& beside_by_rank) {
  StepFigures f;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (std::size_t r = 0; r < compute_by_rank.size(); ++r) {
    const auto& compute = compute_by_rank[r];
    RankFigures& rank = f.per_rank.emplace_back(busy_and_span(compute));
    for (const ComputeInterval& i : compute) {
      first = std::min(first, i.start);
      last = std::max(last, i.end);
    }
    if (r >= beside_by_rank.size() || beside_by_rank[r].empty()) continue;
    std::vector<ComputeInterval> all = compute;
    all.insert(all.end(), beside_by_rank[r].begin(), beside_by_rank[r].end());
    rank.span = busy_and_span(all).span;
    for (const ComputeInterval& i : beside_by_rank[r]) {
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
