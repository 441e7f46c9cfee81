#include "dualpipe/sim/action_spread.h"

#include <algorithm>
#include <random>

namespace dualpipe {

std::vector<double> action_spread(const std::vector<const KinetoSummary*>& ranks,
                                  const std::function<bool(const std::string&)>& is_action) {
  std::vector<double> spread;
  for (const KinetoSummary* rank : ranks)
    for (const KinetoRegion& region : rank->regions)
      if (is_action(region.name) && region.mean_duration > 0)
        for (const double d : region.durations) spread.push_back(d / region.mean_duration);
  return spread;
}

SharedCoresStep median_of_draws(const Schedule& schedule, const CostModel& costs, int replicas, int cores,
                                const std::vector<double>& updates, const std::vector<double>& spread, int draws) {
  if (spread.empty() || draws <= 1) return simulate_on_shared_cores(schedule, costs, replicas, cores, updates);
  std::mt19937 random(20261207);
  std::uniform_int_distribution<std::size_t> pick(0, spread.size() - 1);
  std::vector<SharedCoresStep> steps;
  for (int d = 0; d < draws; ++d) {
    std::vector<std::vector<double>> times(schedule.actions.size());
    for (std::size_t r = 0; r < schedule.actions.size(); ++r)
      for (const Action& a : schedule.actions[r])
        if (a.is_compute()) times[r].push_back(spread[pick(random)]);
    steps.push_back(simulate_on_shared_cores(schedule, costs, replicas, cores, updates, times));
  }
  const auto middle = steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2);
  std::nth_element(steps.begin(), middle, steps.end(),
                   [](const SharedCoresStep& a, const SharedCoresStep& b) { return a.step < b.step; });
  return *middle;
}

}  // namespace dualpipe
