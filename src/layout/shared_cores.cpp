#include "layout/shared_cores.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "dualpipe/schedule/dependency_walk.h"

namespace dualpipe::layout {

namespace {

// The number of pipeline ranks computing, as a step function: (time, count from then on).
std::map<double, int> concurrency(const std::vector<std::vector<ActionTime>>& compute) {
  std::map<double, int> change;
  for (const auto& rank : compute)
    for (const ActionTime& t : rank)
      if (t.end > t.start) ++change[t.start], --change[t.end];
  std::map<double, int> level;
  int running = 0;
  for (const auto& [time, delta] : change) level[time] = running += delta;
  return level;
}

// The mean of max(1, replicas x running / cores) over [start, end).
double mean_slowdown(const std::map<double, int>& level, double start, double end, int replicas, int cores) {
  if (end <= start) return 1;
  auto it = level.upper_bound(start);
  int running = it == level.begin() ? 0 : std::prev(it)->second;
  double t = start, weighted = 0;
  while (t < end) {
    const double next = it == level.end() ? end : std::min(end, it->first);
    weighted += (next - t) * std::max(1.0, double(replicas) * running / cores);
    t = next;
    if (it != level.end() && it->first <= t) running = (it++)->second;
  }
  return weighted / (end - start);
}

}  // namespace

SharedCoresStep simulate_on_shared_cores(const Schedule& schedule, const CostModel& costs, int replicas, int cores) {
  const int R = int(schedule.actions.size());
  // slowdown[r][k]: of rank r's k-th compute action, in the walk's order (each rank's actions in order).
  std::vector<std::vector<double>> slowdown(R);
  for (int r = 0; r < R; ++r)
    for (const Action& a : schedule.actions[r])
      if (a.is_compute()) slowdown[r].push_back(1.0);
  SharedCoresStep step;
  for (int iteration = 0; iteration < 50; ++iteration) {
    std::vector<size_t> next(R, 0);
    const DependencyWalk walk = walk_dependencies(
        schedule, [&](int r, const Action& a) { return costs.duration(a) * slowdown[r][next[r]++]; }, costs.comm);
    std::vector<std::vector<ActionTime>> compute(R);
    double makespan = 0;
    for (int r = 0; r < R; ++r)
      for (size_t i = 0; i < schedule.actions[r].size(); ++i)
        if (schedule.actions[r][i].is_compute()) {
          compute[r].push_back(walk.times[r][i]);
          makespan = std::max(makespan, walk.times[r][i].end);
        }
    const std::map<double, int> level = concurrency(compute);
    double busiest = 0, slowed = 0, plain = 0;
    for (int r = 0; r < R; ++r) {
      double busy = 0;
      for (size_t k = 0; k < compute[r].size(); ++k) {
        const ActionTime& t = compute[r][k];
        busy += t.end - t.start;
        plain += (t.end - t.start) / slowdown[r][k];
        // Damped: halfway to the slowdown this timeline implies, so the fixed point is approached, not circled.
        slowdown[r][k] = 0.5 * slowdown[r][k] + 0.5 * mean_slowdown(level, t.start, t.end, replicas, cores);
      }
      busiest = std::max(busiest, busy);
      slowed += busy;
    }
    const bool settled = std::abs(makespan - step.makespan) <= 1e-4 * makespan;
    step = {makespan, busiest, plain > 0 ? slowed / plain : 1.0};
    if (settled) break;
  }
  return step;
}

}  // namespace dualpipe::layout
