// Ranks of unequal speed (CostModel::rank_speed): the simulator slows each rank's compute by its speed, and the cut
// moves layers off a slow rank's stages, checked against an exhaustive search of every cut.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/layer_partition.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/error.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

Schedule schedule_of(const std::string& kind, int ranks, int microbatches) {
  ScheduleOptions o;
  o.num_ranks = ranks, o.num_microbatches = microbatches;
  return make_schedule(kind, o);
}

TEST(RankSpeed, EveryRankAtHalfSpeedTakesTwiceAsLong) {
  const Schedule s = schedule_of("1f1b", 4, 8);
  CostModel costs;
  const double full = simulate(s, costs).metrics.makespan;
  costs.rank_speed = {0.5, 0.5, 0.5, 0.5};
  EXPECT_DOUBLE_EQ(simulate(s, costs).metrics.makespan, 2 * full);
}

// One rank at 2/3 speed in 1F1B sets the pace: the step lasts at least that rank's own work (F + B = 3 a micro-batch,
// 4.5 there), at most what it would with every rank that slow, and with 32 micro-batches near the latter.
TEST(RankSpeed, ASlowRankSetsThePipelinesPace) {
  const Schedule s = schedule_of("1f1b", 4, 32);
  CostModel costs;
  const double even = simulate(s, costs).metrics.makespan;
  costs.rank_speed = {1, 1, 2.0 / 3, 1};
  const double slow = simulate(s, costs).metrics.makespan;
  EXPECT_GE(slow, 32 * 3 * 1.5);           // the slow rank's own work
  EXPECT_LE(slow, even * 1.5 + 1e-9);      // no worse than every rank that slow
  EXPECT_GT(slow, even * 1.4);             // 32 micro-batches: the steady state dominates
}

TEST(RankSpeed, RefusesBadSpeedsNamingTheOption) {
  EXPECT_EQ(parse_rank_speed("1,1,0.67,1"), (std::vector<double>{1, 1, 0.67, 1}));
  for (const char* bad : {"1,,1", "1,0,1", "1,-2", "1,x", "", "1,1e400"}) {
    const std::string error = test::error_text([&] { parse_rank_speed(bad); });
    EXPECT_NE(error.find("--rank-speed"), std::string::npos) << bad << ": " << error;
  }
  CostModel costs;
  costs.rank_speed = {1, 1};
  EXPECT_NE(test::error_text([&] { simulate(schedule_of("1f1b", 4, 8), costs); }).find("--rank-speed has 2 values"),
            std::string::npos);
}

// The busiest rank's work over its speed, for a cut of uniform layers: the reference's own count, micro-batch by
// micro-batch, of which rank runs which stage.
double busiest(const std::vector<int>& cut, const Placement& p, int microbatches, const std::vector<double>& speed) {
  std::vector<double> load(p.num_ranks(), 0.0);
  for (int m = 0; m < microbatches; ++m)
    for (int s = 0; s < p.num_stages(); ++s) load[p.rank(s, m)] += cut[s] * 3.0 / speed[p.rank(s, m)];
  return *std::max_element(load.begin(), load.end());
}

// Every cut of `layers` into `stages` parts of at least one.
void every_cut(int layers, int stages, std::vector<int>& cut, const std::function<void()>& visit) {
  if (static_cast<int>(cut.size()) == stages - 1) {
    cut.push_back(layers);
    visit();
    cut.pop_back();
    return;
  }
  for (int n = 1; n <= layers - (stages - 1 - static_cast<int>(cut.size())); ++n) {
    cut.push_back(n);
    every_cut(layers - n, stages, cut, visit);
    cut.pop_back();
  }
}

TEST(SpeedBalancedCut, MatchesAnExhaustiveSearchForEachPlacement) {
  const std::vector<LayerCost> layers(16, LayerCost{1, 2, 1, 1});
  for (const std::string kind : {"1f1b", "dualpipe", "dualpipev", "zbv"})
    for (const std::vector<double>& speed : {std::vector<double>{1, 1, 2.0 / 3, 1}, std::vector<double>{0.5, 1, 1, 1},
                                             std::vector<double>{1, 1, 1, 1}}) {
      const Schedule s = schedule_of(kind, 4, 8);
      const std::vector<int> cut = speed_balanced_cut(layers, s.placement, 8, speed);
      double best = 1e300;
      std::vector<int> trial;
      every_cut(16, s.num_stages, trial, [&] { best = std::min(best, busiest(trial, s.placement, 8, speed)); });
      EXPECT_NEAR(busiest(cut, s.placement, 8, speed), best, 1e-9) << kind << " cut " << format_cut(cut);
    }
}

// DualPipe: rank 2 runs stages 2 and 1, as rank 1 does; slowing rank 2 moves layers from both to stages 0 and 3.
TEST(SpeedBalancedCut, DualPipeMovesLayersOffBothStagesOfTheSlowRank) {
  const std::vector<LayerCost> layers(16, LayerCost{1, 2, 1, 1});
  const Schedule s = schedule_of("dualpipe", 4, 8);
  const std::vector<int> cut = speed_balanced_cut(layers, s.placement, 8, {1, 1, 2.0 / 3, 1});
  EXPECT_LT(cut[1] + cut[2], 8) << format_cut(cut);
  EXPECT_GT(cut[0] + cut[3], 8) << format_cut(cut);
}

}  // namespace
}  // namespace dualpipe
