#include "dualpipe/sim/shared_cores.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "dualpipe/schedule/dependency_walk.h"

namespace dualpipe {

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

namespace {

// Calls fn(length, running) for each piece of [start, end) over which `level` holds one count.
template <typename Fn>
void for_each_level(const std::map<double, int>& level, double start, double end, Fn&& fn) {
  auto it = level.upper_bound(start);
  int running = it == level.begin() ? 0 : std::prev(it)->second;
  for (double t = start; t < end;) {
    const double next = it == level.end() ? end : std::min(end, it->first);
    fn(next - t, running);
    t = next;
    if (it != level.end() && it->first <= t) running = (it++)->second;
  }
}

}  // namespace

double mean_slowdown(const std::map<double, int>& level, double start, double end, int replicas, int cores) {
  if (end <= start) return 1;
  // Work done: each moment at the rate min(1, cores / wanting); the slowdown is the time over the work.
  double work = 0;
  for_each_level(level, start, end, [&](double length, int running) {
    work += length * std::min(1.0, double(cores) / std::max(1, replicas * running));
  });
  return (end - start) / work;
}

double time_with_a_free_core(const std::map<double, int>& level, double start, double end, int cores) {
  double free = 0;
  for_each_level(level, start, end, [&](double length, int running) {
    if (running < cores) free += length;
  });
  return free;
}

SharedCoresStep simulate_on_shared_cores(const Schedule& schedule, const CostModel& costs, int replicas, int cores,
                                         const std::vector<double>& updates,
                                         const std::vector<std::vector<double>>& scales) {
  const int R = int(schedule.actions.size());
  // slowdown[r][k]: of rank r's k-th compute action, in the walk's order (each rank's actions in order); the last
  // one of each rank is its update's.
  std::vector<std::vector<double>> slowdown(R);
  for (int r = 0; r < R; ++r) {
    for (const Action& a : schedule.actions[r])
      if (a.is_compute()) slowdown[r].push_back(1.0);
    slowdown[r].push_back(1.0);
  }
  SharedCoresStep step;
  for (int iteration = 0; iteration < 50; ++iteration) {
    std::vector<size_t> next(R, 0);
    const auto duration = [&](int r, const Action& a) {
      const std::size_t k = next[r]++;
      const double scale = r < static_cast<int>(scales.size()) && k < scales[r].size() ? scales[r][k] : 1.0;
      return costs.duration_on(r, a) * scale * slowdown[r][k];
    };
    const DependencyWalk walk = walk_dependencies(schedule, duration, costs.comm, costs.gap);
    std::vector<std::vector<ActionTime>> compute(R);
    double makespan = 0, end = 0;
    for (int r = 0; r < R; ++r) {
      double last = 0;
      for (size_t i = 0; i < schedule.actions[r].size(); ++i)
        if (schedule.actions[r][i].is_compute()) {
          compute[r].push_back(walk.times[r][i]);
          last = std::max(last, walk.times[r][i].end);
        }
      const double update = r < static_cast<int>(updates.size()) ? updates[r] : 0.0;
      compute[r].push_back({last, last + update * slowdown[r].back()});
      makespan = std::max(makespan, last);
      end = std::max(end, compute[r].back().end);
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
    const bool settled = std::abs(end - step.step) <= 1e-4 * end;
    step = {makespan, end, busiest, plain > 0 ? slowed / plain : 1.0};
    if (settled) break;
  }
  return step;
}

}  // namespace dualpipe
