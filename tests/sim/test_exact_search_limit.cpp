// The exact search's node limit (ExactRequest::node_limit, PlanRequest::exact_node_limit): a search cut short stops
// within its limit and keeps the best schedule found so far, never better than the one the whole search proves
// optimal; and a plan held to few nodes is still a valid plan, no better than one allowed more. The costs are those of
// a search a CI fuzzing run found slow (there three ranks in a V and four micro-batches: 3M nodes, too many for the
// sanitized run of this test): forwards far dearer than backwards, a memory limit. Here 3,979 nodes in all.
#include <gtest/gtest.h>

#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/exact_search.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/simulate.h"

namespace dualpipe {
namespace {

ExactRequest slow_case(std::int64_t node_limit) {
  ExactRequest r;
  r.placement = Placement::linear(3);
  r.num_microbatches = 3;
  r.costs = CostModel::parse("F=2.49,B=0.28,W=0.04");
  r.memory_limit = 4;
  r.node_limit = node_limit;
  return r;
}

TEST(ExactSearchLimit, ASearchCutShortKeepsTheBestFoundAndNoneBetterThanTheOptimum) {
  const ExactResult whole = exact_search(slow_case(ExactRequest{}.node_limit));
  ASSERT_TRUE(whole.complete);
  ASSERT_TRUE(whole.schedule);
  const double optimum = simulate(*whole.schedule, slow_case(0).costs).metrics.makespan;
  const ExactResult cut = exact_search(slow_case(1000));
  EXPECT_FALSE(cut.complete);
  EXPECT_EQ(cut.nodes, 1000);
  ASSERT_TRUE(cut.schedule);   // depth-first: a whole schedule is reached within the first few dozen nodes
  validate(*cut.schedule);
  EXPECT_GE(simulate(*cut.schedule, slow_case(0).costs).metrics.makespan, optimum - 1e-9);
}

TEST(ExactSearchLimit, APlanHeldToFewNodesIsStillAValidPlanAndNoBetter) {
  PlanRequest request;
  request.num_ranks = 3;
  request.num_microbatches = 3;
  request.costs = CostModel::parse("F=2.49,B=0.28,W=0.04");
  request.memory_limit = 4;
  request.exact_node_limit = 100;
  const Plan few = plan_schedule(request);
  validate(few.best.schedule);
  request.exact_node_limit = 20'000;  // depth first: a larger limit searches a superset of the nodes
  const Plan more = plan_schedule(request);
  EXPECT_GE(few.best.score, more.best.score - 1e-9);
}

}  // namespace
}  // namespace dualpipe
