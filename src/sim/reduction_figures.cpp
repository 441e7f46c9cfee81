#include "dualpipe/sim/reduction_figures.h"

#include <algorithm>
#include <limits>

namespace dualpipe {

ReductionFigures measured_reductions(const Trace& trace, int step, int ranks) {
  ReductionFigures f;
  f.last_end.assign(static_cast<std::size_t>(ranks), 0);
  const std::vector<const TraceEvent*> compute = step_compute_events(trace, step);
  if (compute.empty()) return f;
  double begin = std::numeric_limits<double>::infinity(), end = -begin;
  for (const TraceEvent* e : compute) {
    begin = std::min(begin, e->start);
    end = std::max(end, e->start + e->duration);
  }
  for (const TraceEvent& e : trace.events) {
    if (e.step != step || e.action.type != ActionType::ReduceGrad || e.completed < 0) continue;
    if (e.rank < 0 || e.rank >= ranks) continue;
    ++f.reductions;
    const double done = e.start + e.completed;
    f.last_end[e.rank] = std::max(f.last_end[e.rank], done - begin);
    end = std::max(end, done);
  }
  f.step = end - begin;
  return f;
}

ReductionFigures planned_reductions(const Schedule& schedule, const Simulation& simulation) {
  ReductionFigures f;
  f.last_end.assign(static_cast<std::size_t>(schedule.num_ranks), 0);
  for (int r = 0; r < schedule.num_ranks; ++r)
    for (std::size_t i = 0; i < schedule.actions[r].size(); ++i) {
      const double end = simulation.timeline[r][i].end;
      f.step = std::max(f.step, end);
      if (schedule.actions[r][i].type != ActionType::ReduceGrad) continue;
      ++f.reductions;
      f.last_end[r] = std::max(f.last_end[r], end);
    }
  return f;
}

}  // namespace dualpipe
