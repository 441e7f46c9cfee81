// The planner (planner.h): never worse than a hand-made family that fits the limit, always within the limit, the
// feasible minimum derived by hand, and errors that name the value and the rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/simulate.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::contains;
using test::error_message;

// The generator table's columns say what the schedules are: stages per rank and placement, read off each
// generated schedule (the planner and the memory estimate trust the columns without generating).
TEST(Generators, TableColumnsDescribeTheirSchedules) {
  for (const GeneratorInfo& g : generators()) {
    for (int v : {0, 3}) {
      if (v && g.stages_per_rank != 0) continue;
      const Schedule s = g.make(ScheduleOptions{4, 8, v});
      const int per_rank = g.stages_per_rank ? g.stages_per_rank : (v ? v : 2);
      EXPECT_EQ(s.num_stages, per_rank * 4) << g.name << " v=" << v;
      EXPECT_EQ(placement_kind(s), g.placement) << g.name << " v=" << v;
    }
  }
}

// Every family schedule that fits: its objective, computed here from simulate() with the comparison costs.
double best_family(const PlanRequest& q) {
  double best = std::numeric_limits<double>::infinity();
  for (const GeneratorInfo& g : generators()) {
    for (int v : {0, 2, 3, 4}) {
      if (v && g.name != "interleaved-1f1b") continue;
      Schedule s;
      try {
        s = g.make(ScheduleOptions{q.num_ranks, q.num_microbatches, v});
      } catch (const InvalidArgument&) {
        continue;
      }
      const CostModel c = costs_per_stage(q.costs, s.num_ranks, s.num_stages);
      const Metrics m = simulate(s, c).metrics;
      if (q.memory_limit && m.peak_activations() * s.num_ranks / s.num_stages > *q.memory_limit + 1e-9) continue;
      best = std::min(best, objective_value(m, q.objective));
    }
  }
  return best;
}

TEST(Planner, NeverWorseThanAFamilyAndWithinTheLimit) {
  int cases = 0;
  for (int R : {2, 3, 4, 6, 8}) {
    for (int M : {R, 2 * R, 3 * R + 1, 4 * R}) {
      for (const char* cost : {"", "F=1,B=2,W=1,FB=2.5", "F=1,B=3,W=1,comm=0.2", "F=2,B=3,W=1,w_mem=0.4",
                               "F=1,B=2,W=1,recompute=1", "F=1,B=2,W=0.5,scale=" /* filled below */}) {
        std::string spec = cost;
        if (spec.find("scale=") != std::string::npos) {
          for (int r = 0; r < R; ++r) spec += (r ? ":" : "") + std::string(r == 0 || r == R - 1 ? "1.5" : "1");
        }
        for (double limit : {0.0, 1.0 * R, 1.5 * R, 2.0 * R}) {
          for (PlanObjective objective : {PlanObjective::Makespan, PlanObjective::Span}) {
            PlanRequest q;
            q.num_ranks = R;
            q.num_microbatches = M;
            q.costs = CostModel::parse(spec);
            if (limit > 0) q.memory_limit = limit;
            q.objective = objective;
            SCOPED_TRACE(spec + " R=" + std::to_string(R) + " M=" + std::to_string(M) + " limit " +
                         std::to_string(limit) + (objective == PlanObjective::Span ? " span" : " makespan"));
            const Plan plan = plan_schedule(q);
            ASSERT_NO_THROW(validate(plan.best.schedule));
            // Re-simulated here: the plan's figures are what simulate() says of its schedule.
            const Metrics m = simulate(plan.best.schedule, plan.best.costs).metrics;
            EXPECT_DOUBLE_EQ(objective_value(m, objective), plan.best.score);
            if (limit > 0) {
              EXPECT_LE(slice_peak(plan.best.schedule, m), limit + 1e-9);
            }
            EXPECT_LE(plan.best.score, best_family(q) + 1e-9);
            for (std::size_t i = 1; i < plan.candidates.size(); ++i)
              EXPECT_LE(plan.candidates[i - 1].score, plan.candidates[i].score + 1e-9);
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 900);
}

TEST(Planner, FeasibleMinimumByHand) {
  // Without recomputation some rank must hold a whole 1/R slice's activation (the last stage of a linear cut between
  // its F and its B; rank 0 of a V holds stage 0's half until stage 2R-1's half has gone through): 1.
  PlanRequest q;
  q.num_ranks = 4;
  q.num_microbatches = 8;
  EXPECT_DOUBLE_EQ(plan_schedule(q).minimum_memory, 1);
  // With recomputation a V's rank 0 keeps stage 0's input (input_mem x 1/2) while stage 2R-1 recomputes its half:
  // 0.5 + 0.5 x 0.05 = 0.525; a linear cut needs 1 while a backward recomputes.
  q.costs = CostModel::parse("recompute=1");
  EXPECT_DOUBLE_EQ(plan_schedule(q).minimum_memory, 0.525);
  q.placements = {"linear"};
  EXPECT_DOUBLE_EQ(plan_schedule(q).minimum_memory, 1);
  // And a plan at the minimum exists.
  q.memory_limit = 1;
  EXPECT_LE(plan_schedule(q).best.peak, 1 + 1e-12);
}

TEST(Planner, ErrorsNameTheValueAndTheRule) {
  PlanRequest q;
  q.num_ranks = 4;
  q.num_microbatches = 8;
  q.memory_limit = 0.5;
  std::string m = error_message([&] { plan_schedule(q); });
  EXPECT_TRUE(contains(m, "memory limit 0.5 is below the feasible minimum of 1")) << m;
  q.memory_limit.reset();
  q.placements = {"diagonal"};
  m = error_message([&] { plan_schedule(q); });
  EXPECT_TRUE(contains(m, "unknown placement 'diagonal'")) << m;
  q.placements.clear();
  q.num_ranks = 0;
  EXPECT_TRUE(contains(error_message([&] { plan_schedule(q); }), "R=0"));
  q.num_ranks = 4;
  q.costs.forward = -1;
  EXPECT_TRUE(contains(error_message([&] { plan_schedule(q); }), "F=-1"));
}

TEST(Planner, PlacementsCanBeRestricted) {
  PlanRequest q;
  q.num_ranks = 4;
  q.num_microbatches = 8;
  q.placements = {"linear"};
  const Plan plan = plan_schedule(q);
  for (const PlanCandidate& c : plan.candidates) EXPECT_EQ(placement_kind(c.schedule), "linear") << c.name;
  q.placements = {"two"};
  for (const PlanCandidate& c : plan_schedule(q).candidates) EXPECT_EQ(c.schedule.placement.num_replicas(), 2);
}

}  // namespace
}  // namespace dualpipe
