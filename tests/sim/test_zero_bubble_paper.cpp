// The planner against the Zero Bubble paper's published bubble rates (zero_bubble_table.h): first that the
// simulator's conventions are the paper's (its handcrafted 1F1B, ZB-H1 and ZB-H2 rates come out to the published
// digits), then that the planner reaches its automatic ZB-1p (memory of 1F1B) and ZB-2p (twice it) within 0.002,
// or lower, under the paper's objective (the largest per-rank span) and w_mem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/simulate.h"
#include "sim/zero_bubble_table.h"

namespace dualpipe {
namespace {

using test::ZeroBubbleRow;

CostModel paper_costs(const ZeroBubbleRow& r) {
  CostModel c;
  c.forward = r.t_f;
  c.backward = r.t_b + r.t_w;  // the paper's B is our I
  c.weight = r.t_w;
  c.comm = r.t_comm;
  c.w_mem = r.w_mem;
  return c;
}

TEST(ZeroBubblePaper, WMemOfTheModels) {
  // Issue 12: 0.366 for the 1.5B model, 0.432 for the others.
  for (const ZeroBubbleRow& r : test::zero_bubble_rows())
    EXPECT_NEAR(r.w_mem, std::string(r.model) == "1.5B" ? 0.366 : 0.432, 0.0005) << r.model;
}

TEST(ZeroBubblePaper, HandcraftedSchedulesGiveThePublishedRates) {
  for (const ZeroBubbleRow& r : test::zero_bubble_rows()) {
    SCOPED_TRACE(test::describe(r));
    const CostModel c = paper_costs(r);
    const ScheduleOptions o{r.p, r.m};
    // Published to four decimals.
    EXPECT_NEAR(simulate(make_1f1b(o), c).metrics.bubble_rate, r.one_f_one_b, 0.00005);
    EXPECT_NEAR(simulate(make_zb_h1(o), c).metrics.bubble_rate, r.zb_h1, 0.00005);
    EXPECT_NEAR(simulate(make_zb_h2(o), c).metrics.bubble_rate, r.zb_h2, 0.00005);
  }
}

double span_rate(const PlanCandidate& c) {
  double span = 0, busy = 0;
  for (const RankMetrics& r : c.metrics.per_rank) span = std::max(span, r.span), busy = std::max(busy, r.busy);
  return (span - busy) / span;
}

void expect_reaches(const ZeroBubbleRow& r, int memory_factor, double published, const std::vector<std::string>& where) {
  PlanRequest q;
  q.num_ranks = r.p;
  q.num_microbatches = r.m;
  q.costs = paper_costs(r);
  q.memory_limit = memory_factor * r.p;  // p M_B or 2p M_B, in activations of one stage
  q.objective = PlanObjective::Span;
  q.placements = where;
  const Plan plan = plan_schedule(q);
  EXPECT_LE(plan.best.peak, memory_factor * r.p + 1e-9);
  EXPECT_LE(span_rate(plan.best), published + 0.002) << plan.best.name;
  EXPECT_DOUBLE_EQ(plan.best.metrics.bubble_rate, span_rate(plan.best));
}

// The paper's own placement (one stage per rank): the like-for-like comparison with its scheduler.
TEST(ZeroBubblePaper, PlannerReachesZB1pAndZB2pOnTheirPlacement) {
  for (const ZeroBubbleRow& r : test::zero_bubble_rows()) {
    SCOPED_TRACE(test::describe(r));
    expect_reaches(r, 1, r.zb_1p, {"linear"});
    expect_reaches(r, 2, r.zb_2p, {"linear"});
  }
}

// Every placement the planner knows: never worse (V and two-direction schedules may do better at the same
// activation memory; two directions hold twice the parameters).
TEST(ZeroBubblePaper, PlannerReachesZB1pAndZB2pOverAllPlacements) {
  for (const ZeroBubbleRow& r : test::zero_bubble_rows()) {
    if (r.p > 16) continue;  // the largest settings run in the test above; this one triples the work
    SCOPED_TRACE(test::describe(r));
    expect_reaches(r, 1, r.zb_1p, {});
    expect_reaches(r, 2, r.zb_2p, {});
  }
}

}  // namespace
}  // namespace dualpipe
