// The step's figures from compute intervals (sim/step_figures.h), derived by hand from their definitions in
// docs/schedules.md ("Metrics").
#include <gtest/gtest.h>

#include "dualpipe/sim/step_figures.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

TEST(StepFigures, BusySpanIdleAndBothBubbleRatesByHand) {
  // Rank 0: [0,2] and [3,5]: busy 4, span 5. Rank 1: [1,4]: busy 3, span 3. Rank 2: nothing.
  const StepFigures f = step_figures({{{0, 2}, {3, 5}}, {{1, 4}}, {}});
  ASSERT_EQ(f.per_rank.size(), 3u);
  EXPECT_DOUBLE_EQ(f.makespan, 5);
  test::expect_busy_idle_span(f.per_rank[0], 4, 1, 5);
  test::expect_busy_idle_span(f.per_rank[1], 3, 2, 3);
  EXPECT_DOUBLE_EQ(f.per_rank[2].span, 0);
  EXPECT_DOUBLE_EQ(f.per_rank[2].idle, 5);
  EXPECT_DOUBLE_EQ(f.bubble, 5);  // the idle rank's whole step
  EXPECT_DOUBLE_EQ(f.bubble_rate, (5.0 - 4) / 5);     // (max span - max busy) / max span
  EXPECT_DOUBLE_EQ(f.step_bubble_rate, 1 - 7.0 / 15);  // 1 - sum busy / (R x makespan)
}

TEST(StepFigures, AStepWithoutComputeIsAllZero) {
  const StepFigures f = step_figures({{}, {}});
  EXPECT_DOUBLE_EQ(f.makespan, 0);
  EXPECT_DOUBLE_EQ(f.bubble, 0);
  EXPECT_DOUBLE_EQ(f.bubble_rate, 0);
  EXPECT_DOUBLE_EQ(f.step_bubble_rate, 0);
}

}  // namespace
}  // namespace dualpipe
