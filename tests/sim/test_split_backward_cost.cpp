// A split backward's input half (I) as a cost of its own: measured by the traces where a stage ran both whole and
// split backwards (a split costs more than a whole one, so I is not B - W there), given as `I=` in the costs, and
// taken by the I actions. The answers follow from the layouts and the costs.
#include <gtest/gtest.h>

#include "dualpipe/schedule/action.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/kineto_costs.h"
#include "sim/kineto_trace_text.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

KinetoSummary regions_in_turn(const std::vector<std::pair<std::string, double>>& regions) {
  std::vector<std::string> texts;
  double start = 0;
  for (const auto& [name, duration] : regions) {
    texts.push_back(test::kineto_event("user_annotation", name, 1, 1, start, duration));
    start += duration + 1;
  }
  return summarize_kineto(parse_kineto_trace(test::kineto_trace(texts), "laid.json"));
}

Action input_half(int stage) { return Action::backward_input(stage, 0); }

TEST(SplitBackwardCost, ITakesItsOwnCostWhereGivenAndBMinusWOtherwise) {
  EXPECT_DOUBLE_EQ(CostModel::parse("F=1,B=3,W=1").duration(input_half(0)), 2);
  const CostModel given = CostModel::parse("F=1,B=3,W=1,I=2.5");
  EXPECT_DOUBLE_EQ(given.duration(input_half(0)), 2.5);
  EXPECT_DOUBLE_EQ(given.duration(Action::backward(0, 0)), 3);  // a whole backward keeps B
  EXPECT_EQ(given.to_string(), "F=1,B=3,W=1,I=2.5,FB=4,comm=0");
  EXPECT_EQ(CostModel::parse(given.to_string()).to_string(), given.to_string());

  const CostModel per_stage = CostModel::parse("F=1:2,B=2:4,W=1:2,I=1.5:3");
  EXPECT_DOUBLE_EQ(per_stage.duration(input_half(1)), 3);
  // Two stages of a slice each become one slice: I follows F, B and W (the sum of the slice's stages).
  const CostModel slice = costs_per_slice(per_stage, 1, 2);
  EXPECT_DOUBLE_EQ(slice.duration(input_half(0)), 4.5);
  EXPECT_DOUBLE_EQ(slice.duration(Action::backward(0, 0)), 6);
}

TEST(SplitBackwardCost, BadIsRefusedNamingTheKey) {
  EXPECT_TRUE(test::contains(test::error_message([] { CostModel::parse("I=-1"); }), "I=-1"));
  EXPECT_TRUE(test::contains(test::error_message([] { CostModel::parse("F=1:1,I=1:1:1"); }), "I"));
  EXPECT_TRUE(test::contains(test::error_message([] { CostModel::parse("I=1:0:x"); }), "x"));
}

TEST(SplitBackwardCost, ReadFromTheTracesWhereAStageRanWholeAndSplitBackwards) {
  // Stage 0 ran a whole backward of 20 and split ones of 16 + 10: I is 16, not 20 - 10.
  const KinetoSummary both = regions_in_turn({{"forward stage 0", 10},
                                              {"backward stage 0", 20},
                                              {"forward stage 0", 10},
                                              {"backward_input stage 0", 16},
                                              {"weight stage 0", 10}});
  const KinetoCosts costs = costs_from_kineto(both, KinetoCostNames{});
  EXPECT_DOUBLE_EQ(costs.costs.backward, 20);
  EXPECT_DOUBLE_EQ(costs.costs.weight, 10);
  ASSERT_TRUE(costs.costs.input.has_value());
  EXPECT_DOUBLE_EQ(*costs.costs.input, 16);
  EXPECT_DOUBLE_EQ(costs.costs.duration(input_half(0)), 16);

  // Split backwards only: B is I + W, and I stays B - W (no I of its own).
  const KinetoSummary split = regions_in_turn({{"forward stage 0", 10},
                                               {"backward_input stage 0", 16},
                                               {"weight stage 0", 10}});
  const KinetoCosts split_costs = costs_from_kineto(split, KinetoCostNames{});
  EXPECT_DOUBLE_EQ(split_costs.costs.backward, 26);
  EXPECT_FALSE(split_costs.costs.input.has_value());
  EXPECT_DOUBLE_EQ(split_costs.costs.duration(input_half(0)), 16);
}

}  // namespace
}  // namespace dualpipe
