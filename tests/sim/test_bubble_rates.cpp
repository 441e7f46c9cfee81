// The two bubble rates (spec section 2 and issue 12): the Zero Bubble paper's (max span - max busy) / max span,
// and the step-level 1 - sum of busy / (R x makespan). They differ exactly when ranks start or end at different
// times without waiting in between, as in ZB-H2.
#include <gtest/gtest.h>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/simulate.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::costs;

TEST(BubbleRates, ZeroBubbleH2HasNoSpanBubbleButLateStarts) {
  // ZB-H2, R=4, M=8, F = I = W = 1 (B = 2): the paper's zero-bubble case. Rank r starts when the first
  // micro-batch reaches it, at time r, and then never waits (the paper's claim), so its span is its busy time
  // 8 x (F + I + W) = 24: the span rate is 0. The last rank ends at 3 + 24 = 27, the makespan; the largest
  // idle is 27 - 24 = 3 and the step rate 1 - 4 x 24 / (4 x 27) = 1/9.
  const Metrics m = simulate(make_zb_h2(ScheduleOptions{4, 8}), costs(1, 2, 1)).metrics;
  EXPECT_DOUBLE_EQ(m.bubble_rate, 0);
  EXPECT_DOUBLE_EQ(m.makespan, 27);
  EXPECT_DOUBLE_EQ(m.bubble, 3);
  EXPECT_NEAR(m.step_bubble_rate, 1.0 / 9.0, 1e-15);
  for (const RankMetrics& r : m.per_rank) {
    EXPECT_DOUBLE_EQ(r.span, 24) << "rank " << r.rank;
    EXPECT_DOUBLE_EQ(r.busy, 24) << "rank " << r.rank;
  }
}

TEST(BubbleRates, OneFOneBRatesAgreeWhenRank0SpansTheStep) {
  // 1F1B: rank 0 starts first and ends last, so its span is the makespan and all ranks are equally busy:
  // both rates are (S-1)(F+B) / ((M+S-1)(F+B)) = (S-1)/(M+S-1).
  for (int R : {2, 4, 8}) {
    const Metrics m = simulate(make_1f1b(ScheduleOptions{R, 3 * R}), costs(1, 2, 1)).metrics;
    EXPECT_NEAR(m.bubble_rate, double(R - 1) / (3 * R + R - 1), 1e-15) << R;
    EXPECT_NEAR(m.step_bubble_rate, double(R - 1) / (3 * R + R - 1), 1e-15) << R;
  }
}

TEST(BubbleRates, StepRateOnAHandComputedTimeline) {
  // R=2, S=2, M=2 (the timeline of SimulateMetrics.NoCommNoScale), F=1 B=3 W=1 FB=3.5:
  //   rank 0 busy 1+1+2+1+3 = 8, rank 1 busy 1+3.5+2+1 = 7.5, makespan 11.5
  //   step rate = 1 - 15.5 / 23 ; span rate = (max span 11.5 - max busy 8) / 11.5.
  const Schedule s = parse_text("rank 0: 0F0 0F1 0I0 0W0 0B1\nrank 1: 1F0 (1F1;1B0) 1I1 1W1\n");
  const Metrics m = simulate(s, costs(1, 3, 1, 3.5)).metrics;
  EXPECT_DOUBLE_EQ(m.step_bubble_rate, 1 - 15.5 / 23);
  EXPECT_DOUBLE_EQ(m.bubble_rate, 3.5 / 11.5);
}

}  // namespace
}  // namespace dualpipe
