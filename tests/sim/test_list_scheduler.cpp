// The list scheduler (list_scheduler.h): what it builds is a valid schedule for every placement and policy, its
// own timing is simulate()'s (so the planner may rank policies by it), and it keeps the memory limit. Quality is
// tested against the Zero Bubble paper (test_zero_bubble_paper.cpp) and exhaustive search (test_exhaustive.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/activation_memory.h"
#include "dualpipe/sim/list_scheduler.h"
#include "dualpipe/sim/simulate.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

std::vector<std::pair<std::string, Placement>> placements(int R, int M) {
  std::vector<std::uint8_t> replica(M);
  for (int m = 0; m < M; ++m) replica[m] = m < (M + 1) / 2 ? 0 : 1;
  return {{"linear", Placement::linear(R)},
          {"V", Placement::v_shape(R)},
          {"two directions", Placement::bidirectional(R, replica)},
          {"looped v=3", Placement::looped(R, 3)}};
}

std::vector<ListPolicy> policies(double limit) {
  std::vector<ListPolicy> out;
  for (bool backward_first : {true, false})
    for (bool delay : {true, false})
      for (double w_fill : {1.0, 0.0})
        for (double inflight : {0.0, 1.0, 2.0})
          for (bool pairs : {false, true}) {
            ListPolicy p;
            p.memory_limit = limit;
            p.backward_first = backward_first;
            p.forward_may_delay_backward = delay;
            p.forward_may_delay_first_backward = !delay;
            p.w_fill = w_fill;
            p.inflight = inflight;
            p.overlap_pairs = pairs;
            out.push_back(p);
          }
  return out;
}

TEST(ListScheduler, ValidSchedulesWhoseTimingIsTheSimulators) {
  const CostModel cost_models[] = {CostModel::parse(""), CostModel::parse("F=1,B=3,W=1.5,FB=3,comm=0.2"),
                                   CostModel::parse("F=2,B=3,W=1,w_mem=0.4,recompute=1")};
  int built = 0;
  for (int R : {1, 2, 3, 4}) {
    for (int M : {1, 2, 5, 8}) {
      for (const auto& [name, placement] : placements(R, M)) {
        for (const CostModel& costs : cost_models) {
          for (const ListPolicy& policy : policies(std::numeric_limits<double>::infinity())) {
            SCOPED_TRACE(name + " R=" + std::to_string(R) + " M=" + std::to_string(M) + " " + costs.to_string());
            ListTiming timing;
            const std::optional<Schedule> s = list_schedule(placement, M, costs, policy, "auto", &timing);
            ASSERT_TRUE(s.has_value()) << "no limit, so it must finish";
            ASSERT_NO_THROW(validate(*s));
            const Simulation sim = simulate(*s, costs);
            EXPECT_NEAR(timing.makespan, sim.metrics.makespan, 1e-9);
            double span = 0;
            for (const RankMetrics& r : sim.metrics.per_rank) span = std::max(span, r.span);
            EXPECT_NEAR(timing.max_span, span, 1e-9);
            EXPECT_NEAR(timing.peak, sim.metrics.peak_activations(), 1e-9);
            ++built;
          }
        }
      }
    }
  }
  EXPECT_GT(built, 4000);
}

TEST(ListScheduler, KeepsTheMemoryLimitOrSaysItCannot) {
  const CostModel costs = CostModel::parse("F=1,B=2,W=1,w_mem=0.5");
  int kept = 0, refused = 0;
  for (int R : {2, 4}) {
    const int M = 3 * R;
    for (const auto& [name, placement] : placements(R, M)) {
      for (double limit : {1.0, 1.5, 2.0, 3.0, double(R), 2.0 * R}) {
        for (const ListPolicy& policy : policies(limit)) {
          const std::optional<Schedule> s = list_schedule(placement, M, costs, policy);
          if (!s) {
            ++refused;
            continue;
          }
          ASSERT_NO_THROW(validate(*s));
          for (double peak : activation_peaks(*s, costs)) EXPECT_LE(peak, limit + 1e-9) << name << " limit " << limit;
          ++kept;
        }
      }
    }
  }
  EXPECT_GT(kept, refused);
}

TEST(ListScheduler, OneFOneBWarmUpGivesZeroBubbleH1) {
  // inflight 1 is 1F1B's warm-up (S - s forwards in flight at stage s); at F = I = W and the memory of 1F1B the
  // deferred W's fill the drain: ZB-H1's bubble (S-1)(F+B-2W) = 3 at R=4 (spec section 3).
  ListPolicy p;
  p.memory_limit = 4;
  p.inflight = 1;
  p.backward_first = false;
  const std::optional<Schedule> s = list_schedule(Placement::linear(4), 8, CostModel{}, p);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(simulate(*s, CostModel{}).metrics.bubble, 3);
}

TEST(ListScheduler, RejectsAPlacementOfOtherMicroBatches) {
  const Placement two = Placement::bidirectional(2, {0, 0, 1, 1});
  EXPECT_THROW(list_schedule(two, 6, CostModel{}, ListPolicy{}), InvalidArgument);
  EXPECT_THROW(list_schedule(Placement::linear(2), 0, CostModel{}, ListPolicy{}), InvalidArgument);
}

}  // namespace
}  // namespace dualpipe

namespace dualpipe {
namespace {

TEST(ListScheduler, GivesUpOnlyWhenTheBoundIsBeaten) {
  const CostModel costs = CostModel::parse("F=1,B=3,W=1,comm=0.2,w_mem=0.5");
  for (bool span : {false, true}) {
    ListPolicy p;
    p.memory_limit = 6;
    ListTiming full;
    const std::optional<Schedule> s = list_schedule(Placement::linear(4), 12, costs, p, "auto", &full);
    ASSERT_TRUE(s.has_value());
    const double value = span ? full.max_span : full.makespan;
    p.give_up_on_span = span;
    p.give_up_above = value;  // reachable: the same schedule
    const std::optional<Schedule> same = list_schedule(Placement::linear(4), 12, costs, p);
    ASSERT_TRUE(same.has_value());
    EXPECT_EQ(same->actions, s->actions);
    p.give_up_above = value - 0.5;  // not reachable by this policy
    EXPECT_FALSE(list_schedule(Placement::linear(4), 12, costs, p).has_value());
  }
}

}  // namespace
}  // namespace dualpipe
