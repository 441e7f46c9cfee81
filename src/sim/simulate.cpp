#include "dualpipe/sim/simulate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "dualpipe/sim/activation_memory.h"
#include "dualpipe/sim/step_figures.h"
#include "dualpipe/util/error.h"

namespace dualpipe {

double Metrics::peak_activations() const {
  double peak = 0;
  for (const RankMetrics& r : per_rank) peak = std::max(peak, r.peak_activations);
  return peak;
}

StepFigures Metrics::figures() const {
  StepFigures f;
  f.makespan = makespan, f.bubble = bubble, f.bubble_rate = bubble_rate, f.step_bubble_rate = step_bubble_rate;
  f.per_rank.assign(per_rank.begin(), per_rank.end());  // each rank's RankFigures part
  return f;
}

std::vector<int> peak_activations(const Schedule& schedule) {
  std::vector<int> peaks;
  for (const double peak : activation_peaks(schedule, CostModel{})) peaks.push_back(static_cast<int>(peak));
  return peaks;
}

Simulation simulate(const Schedule& schedule, const CostModel& costs) {
  costs.check();
  costs.check_ranks(schedule.num_ranks);
  DependencyWalk walk = walk_dependencies(
      schedule, [&](int rank, const Action& a) { return costs.duration_on(rank, a); }, costs.comm, costs.gap);
  if (!walk.blocked.empty()) {
    const BlockedRank& b = walk.blocked.front();
    throw InvalidSchedule(detail::concat("cannot simulate: deadlock, rank ", b.rank, " is stuck at ",
                                         to_string(schedule.actions[b.rank][b.index]), " waiting for ",
                                         b.waiting_for, " (", walk.blocked.size(), " ranks stuck)"));
  }

  // Costs that are each finite can still add up past the largest double: the step would end at inf, every
  // metric would be inf or NaN and the picture's axis would divide by zero (found by UBSan).
  for (std::size_t r = 0; r < walk.times.size(); ++r)
    for (std::size_t i = 0; i < walk.times[r].size(); ++i)
      DUALPIPE_REQUIRE(std::isfinite(walk.times[r][i].end), "costs ", costs.to_string(),
                       " are too large to simulate: the step time overflows at rank ", r, ", action ",
                       to_string(schedule.actions[r][i]), "; give them in a larger time unit");

  Simulation sim;
  sim.timeline = std::move(walk.times);
  Metrics& m = sim.metrics;
  const int R = static_cast<int>(schedule.actions.size());
  const std::vector<double> peaks = activation_peaks(schedule, costs);
  std::vector<std::vector<ComputeInterval>> compute(R), data_parallel(R);
  for (int r = 0; r < R; ++r)
    for (std::size_t i = 0; i < schedule.actions[r].size(); ++i) {
      const Action& a = schedule.actions[r][i];
      if (a.is_compute() || a.is_data_parallel())
        (a.is_compute() ? compute : data_parallel)[r].push_back({sim.timeline[r][i].start, sim.timeline[r][i].end});
    }
  const StepFigures figures = step_figures(compute, data_parallel);
  m.makespan = figures.makespan;
  m.bubble = figures.bubble;
  m.bubble_rate = figures.bubble_rate;
  m.step_bubble_rate = figures.step_bubble_rate;
  m.per_rank.resize(R);
  const std::vector<int> stages_held = schedule.placement.stages_held_by_rank();
  for (int r = 0; r < R; ++r) {
    RankMetrics& rm = m.per_rank[r];
    static_cast<RankFigures&>(rm) = figures.per_rank[r];
    rm.rank = r;
    rm.peak_activations = peaks[r];
    rm.peak_activation_fraction = peaks[r] / schedule.num_stages;
    rm.peak_activation_bytes = peaks[r] * costs.activation_bytes;
    rm.stages_held = stages_held[r];
    rm.parameter_copies = static_cast<double>(rm.stages_held) * R / schedule.num_stages;
  }
  return sim;
}

}  // namespace dualpipe
