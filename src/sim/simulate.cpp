#include "dualpipe/simulate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "dualpipe/activation_memory.h"
#include "dualpipe/error.h"

namespace dualpipe {

double Metrics::peak_activations() const {
  double peak = 0;
  for (const RankMetrics& r : per_rank) peak = std::max(peak, r.peak_activations);
  return peak;
}

std::vector<int> peak_activations(const Schedule& schedule) {
  std::vector<int> peaks;
  for (const double peak : activation_peaks(schedule, CostModel{})) peaks.push_back(static_cast<int>(peak));
  return peaks;
}

Simulation simulate(const Schedule& schedule, const CostModel& costs) {
  costs.check();
  DependencyWalk walk = walk_dependencies(
      schedule, [&](int, const Action& a) { return costs.duration(a); }, costs.comm);
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
  double first = std::numeric_limits<double>::infinity();
  double last = -std::numeric_limits<double>::infinity();
  m.per_rank.resize(R);
  std::vector<double> rank_first(R, std::numeric_limits<double>::infinity()), rank_last(R, 0.0);
  for (int r = 0; r < R; ++r) {
    RankMetrics& rm = m.per_rank[r];
    rm.rank = r;
    for (std::size_t i = 0; i < schedule.actions[r].size(); ++i) {
      if (!schedule.actions[r][i].is_compute()) continue;
      const ActionTime& t = sim.timeline[r][i];
      rm.busy += t.end - t.start;
      rank_first[r] = std::min(rank_first[r], t.start);
      rank_last[r] = std::max(rank_last[r], t.end);
    }
    if (rank_first[r] <= rank_last[r]) {
      rm.span = rank_last[r] - rank_first[r];
      first = std::min(first, rank_first[r]);
      last = std::max(last, rank_last[r]);
    }
    rm.peak_activations = peaks[r];
    rm.peak_activation_fraction = peaks[r] / schedule.num_stages;
    rm.peak_activation_bytes = peaks[r] * costs.activation_bytes;
    rm.parameter_copies = schedule.placement.stages_held(r);
  }
  m.makespan = first <= last ? last - first : 0.0;
  double max_span = 0, max_busy = 0, total_busy = 0;
  for (RankMetrics& rm : m.per_rank) {
    total_busy += rm.busy;
    rm.idle = m.makespan - rm.busy;
    m.bubble = std::max(m.bubble, rm.idle);
    max_span = std::max(max_span, rm.span);
    max_busy = std::max(max_busy, rm.busy);
  }
  m.bubble_rate = max_span > 0 ? (max_span - max_busy) / max_span : 0.0;
  m.step_bubble_rate = m.makespan > 0 ? 1.0 - total_busy / (R * m.makespan) : 0.0;
  return sim;
}

}  // namespace dualpipe
