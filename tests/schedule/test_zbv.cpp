// Zero Bubble V: pinned orders worked out by hand from PyTorch's ScheduleZBVZeroBubble rules, validity over a
// grid, zero bubble when F = I = W (every rank busy from its first action to its last), and peak activations
// no higher than 1F1B's as a fraction of the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/error.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::options;

void expect_zbv_invalid(const ScheduleOptions& o, const std::string& rule) { test::expect_invalid(&make_zbv, o, rule); }

// Worked by hand from the PyTorch construction. R=2, M=4; rank 0 holds stages 0 and 3, rank 1 stages 1 and 2.
// Rank 0: 3 F0; no F1,F0 pairs; 2 x (F1 I1 W1); steady F0 I0 W0 F1 I1 W1 (the second without F0, which has
// run out); cool-down 2 x (I0 W0).
// Rank 1: 1 F0; 1 x (F1 F0); 1 x (F1 I1 W1); steady twice; cool-down 1 x (I0 I1), 1 x (I0 W0), then W1, W0.
TEST(Zbv, PinnedOrderR2M4) {
  EXPECT_EQ(format_text(make_zbv(options(2, 4))),
            "rank 0: 0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 "
            "0I2 0W2 0I3 0W3\n"
            "rank 1: 1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 "
            "1I2 2I3 1I3 1W2 2W3 1W3\n");
}

// The smallest M the order serves: M = 2R-1 (rank 0's first warm-up runs 2R-1 forwards). Worked by hand.
TEST(Zbv, PinnedOrderR2M3) {
  EXPECT_EQ(format_text(make_zbv(options(2, 3))),
            "rank 0: 0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 3F2 3I2 3W2 0I1 0W1 0I2 0W2\n"
            "rank 1: 1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1I1 2I2 1I2 1W1 2W2 1W2\n");
}

TEST(Zbv, PlacementIsAV) {
  const Schedule s = make_zbv(options(4, 8));
  EXPECT_EQ(s.kind, "zbv");
  EXPECT_EQ(s.num_stages, 8);
  EXPECT_EQ(s.placement, Placement::v_shape(4));
}

// F = I = W: no rank waits between its first and last action, so the bubble rate is zero; the only idle time
// is the pipeline's start-up skew of R-1 forwards (rank r starts and ends r forwards after rank 0).
TEST(Zbv, ZeroBubbleWhenForwardInputAndWeightCostTheSame) {
  for (int R = 1; R <= 8; ++R) {
    for (int M = 2 * R - 1; M <= 4 * R + 1; ++M) {
      SCOPED_TRACE(testing::Message() << "R=" << R << " M=" << M);
      const Schedule s = make_zbv(options(R, M));
      EXPECT_NO_THROW(validate(s));
      for (const char* spec : {"F=1,B=2,W=1", "F=2,B=4,W=2", "F=0.5,B=1,W=0.5"}) {
        const CostModel costs = CostModel::parse(spec);
        const Simulation sim = simulate(s, costs);
        EXPECT_DOUBLE_EQ(sim.metrics.bubble_rate, 0.0) << spec;
        EXPECT_DOUBLE_EQ(sim.metrics.bubble, (R - 1) * costs.forward) << spec;
        for (const RankMetrics& rm : sim.metrics.per_rank) {
          EXPECT_DOUBLE_EQ(rm.span, rm.busy) << spec << " rank " << rm.rank;
          EXPECT_DOUBLE_EQ(rm.busy, 2 * M * (costs.forward + costs.backward)) << spec;
          EXPECT_EQ(rm.stages_held, 2);
        }
      }
    }
  }
}

// Other costs change the timing but never the order's validity.
TEST(Zbv, RunsUnderUnevenCosts) {
  for (int R = 1; R <= 6; ++R) {
    for (int M = 2 * R - 1; M <= 3 * R; ++M) {
      const Schedule s = make_zbv(options(R, M));
      for (const char* spec : {"F=1,B=2,W=0.5", "F=1,B=3,W=1", "F=1,B=2,W=1,comm=0.3"}) {
        EXPECT_NO_THROW(simulate(s, CostModel::parse(spec))) << "R=" << R << " M=" << M << " " << spec;
      }
    }
  }
}

// Peak activations: 2R units of a stage that is 1/(2R) of the model, i.e. the whole model's activations, the
// same fraction as 1F1B's worst rank (R units of 1/R) and never more.
TEST(Zbv, PeakActivationsNoHigherThan1F1B) {
  for (int R = 1; R <= 8; ++R) {
    for (int M = 2 * R - 1; M <= 3 * R; ++M) {
      SCOPED_TRACE(testing::Message() << "R=" << R << " M=" << M);
      const Simulation zbv = simulate(make_zbv(options(R, M)), CostModel{});
      const Simulation one_f_one_b = simulate(make_1f1b(options(R, M)), CostModel{});
      EXPECT_EQ(zbv.metrics.peak_activations(), 2 * R);
      double worst_1f1b = 0;
      for (const RankMetrics& rm : one_f_one_b.metrics.per_rank) {
        worst_1f1b = std::max(worst_1f1b, rm.peak_activation_fraction);
      }
      for (const RankMetrics& rm : zbv.metrics.per_rank) {
        EXPECT_LE(rm.peak_activations, 2 * R);
        EXPECT_LE(rm.peak_activation_fraction, worst_1f1b);
      }
    }
  }
}

TEST(Zbv, RejectsWhatItCannotServe) {
  expect_zbv_invalid(options(4, 6), "M >= 2R-1");
  expect_zbv_invalid(options(4, 6), "M=6 for R=4");
  expect_zbv_invalid(options(2, 2), "M >= 2R-1");
  expect_zbv_invalid(options(4, 8, 3), "2 stage(s) on each rank");
  expect_zbv_invalid(options(0, 8), "at least 1 rank");
  EXPECT_NO_THROW(make_zbv(options(4, 7)));
  EXPECT_NO_THROW(make_zbv(options(4, 8, 2)));
}

}  // namespace
}  // namespace dualpipe
