// A traced run replayed with each action's time drawn from the spread its traces measured: the spread is each
// occurrence over its region's mean, and the step is the median of the draws, checked against every combination of
// the spread enumerated.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/action_spread.h"
#include "sim/kineto_trace_text.h"

namespace dualpipe {
namespace {

KinetoSummary laid(const std::vector<std::pair<std::string, double>>& regions) {
  std::vector<std::string> texts;
  double start = 0;
  for (const auto& [name, duration] : regions) {
    texts.push_back(test::kineto_event("user_annotation", name, 1, 1, start, duration));
    start += duration;
  }
  return summarize_kineto(parse_kineto_trace(test::kineto_trace(texts), "laid.json"));
}

TEST(ActionSpread, EachOccurrenceOverItsRegionsMeanOnItsRank) {
  const KinetoSummary rank0 = laid({{"forward stage 0", 10}, {"forward stage 0", 30}, {"update", 7}});
  const KinetoSummary rank1 = laid({{"forward stage 1", 40}, {"forward stage 1", 40}});
  const auto is_action = [](const std::string& name) { return name != "update"; };
  std::vector<double> spread = action_spread({&rank0, &rank1}, is_action);
  std::sort(spread.begin(), spread.end());
  EXPECT_EQ(spread, (std::vector<double>{0.5, 1, 1, 1.5}));
}

// Every way of giving each compute action of `schedule` one of `spread`'s values, simulated.
std::vector<double> every_step(const Schedule& schedule, const CostModel& costs, const std::vector<double>& spread) {
  std::vector<std::vector<double>> scales(schedule.actions.size());
  std::vector<std::pair<std::size_t, std::size_t>> slots;
  for (std::size_t r = 0; r < schedule.actions.size(); ++r)
    for (const Action& a : schedule.actions[r])
      if (a.is_compute()) slots.push_back({r, scales[r].size()}), scales[r].push_back(1);
  std::vector<double> steps;
  std::function<void(std::size_t)> fill = [&](std::size_t k) {
    if (k == slots.size()) {
      steps.push_back(simulate_on_shared_cores(schedule, costs, 1, 1 << 20, {}, scales).step);
      return;
    }
    for (const double v : spread) scales[slots[k].first][slots[k].second] = v, fill(k + 1);
  };
  fill(0);
  std::sort(steps.begin(), steps.end());
  return steps;
}

// 1F1B on two ranks, two micro-batches: eight actions, each half or one and a half times its cost, 256 ways.
TEST(ActionSpread, TheMedianOfTheDrawsIsTheMedianOfEveryCombination) {
  const Schedule schedule = make_1f1b({2, 2});
  const CostModel costs = CostModel::parse("F=10,B=20,W=10");
  const std::vector<double> spread = {0.5, 1.5};
  const std::vector<double> steps = every_step(schedule, costs, spread);
  ASSERT_EQ(steps.size(), 256u);
  const double at_means = simulate_on_shared_cores(schedule, costs, 1, 1 << 20).step;
  const double drawn = median_of_draws(schedule, costs, 1, 1 << 20, {}, spread, 201).step;
  // 201 draws: their median within the 40th to 60th percentiles of the exact distribution.
  EXPECT_GE(drawn, steps[102]);
  EXPECT_LE(drawn, steps[153]);
  // A rank that waits for another waits for the slower of two: the median step is above the step at the means.
  EXPECT_GT(steps[128], at_means);
  // No spread, or one draw: the step at the means.
  EXPECT_DOUBLE_EQ(median_of_draws(schedule, costs, 1, 1 << 20, {}, {}, 201).step, at_means);
  EXPECT_DOUBLE_EQ(median_of_draws(schedule, costs, 1, 1 << 20, {}, spread, 1).step, at_means);
}

}  // namespace
}  // namespace dualpipe
