// CostModel::parse is strict (issue 10): every item KEY=VALUE, each key once, no empty items, finite numbers,
// per-stage lists that fit the schedule; and the memory-model keys of issue 12 (w_mem, recompute, input_mem).
#include <gtest/gtest.h>

#include <string>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/simulate.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::contains;
using test::error_message;

struct Bad {
  const char* spec;
  const char* mentions;  // the value or rule the message must name
};

void expect_refused(const Bad& b) {
  SCOPED_TRACE(b.spec);
  const std::string m = error_message([&] { CostModel::parse(b.spec); });
  EXPECT_TRUE(contains(m, b.mentions)) << m;
}

TEST(CostParseStrict, EmptyItemsAndDuplicateKeysAreRefused) {
  for (const Bad& b : {Bad{"F=1,,B=2", "item 2"}, Bad{"F=1,,B=2", "is empty"}, Bad{",F=1", "item 1"},
                       Bad{"F=1,", "ends with a comma"}, Bad{"F=1,F=2", "'F' is given twice"},
                       Bad{"f=1,F=2", "given twice"}, Bad{"w_mem=0.5,W_MEM=0.4", "given twice"},
                       Bad{"scale=1:1,scale=2:2", "'scale' is given twice"}}) {
    expect_refused(b);
  }
}

TEST(CostParseStrict, NonFiniteAndNonNumbersAreRefused) {
  for (const Bad& b : {Bad{"F=inf", "'inf' is not a number"}, Bad{"F=-inf", "not a number"},
                       Bad{"B=nan", "'nan'"}, Bad{"B=NaN", "'NaN'"}, Bad{"F=0x10", "'0x10'"},
                       Bad{"F= 1", "not a number"}, Bad{"F=1e999", "overflows"}, Bad{"comm=-1e400", "overflows"},
                       Bad{"scale=1:inf", "'inf'"}, Bad{"F=1e308,B=1e308", "too large to simulate"}}) {
    expect_refused(b);
  }
}

TEST(CostParseStrict, ListsNeedEveryValue) {
  for (const Bad& b : {Bad{"scale=", "empty list"}, Bad{"scale=1::2", "position 2"}, Bad{"scale=1:2:", "position 3"},
                       Bad{"scale=:1", "position 1"}}) {
    expect_refused(b);
  }
}

TEST(CostParseStrict, ScaleListMustHaveOneValuePerStage) {
  const Schedule s = make_1f1b(ScheduleOptions{4, 8});
  for (const char* spec : {"scale=1:1:2", "scale=1:1:2:1:1"}) {
    SCOPED_TRACE(spec);
    const CostModel c = CostModel::parse(spec);
    const std::string m = error_message([&] { c.check_stages(s.num_stages); });
    EXPECT_TRUE(contains(m, "values for a schedule with 4 stages")) << m;
    EXPECT_TRUE(contains(m, std::to_string(c.stage_scale.size()) + " values")) << m;
  }
  EXPECT_NO_THROW(CostModel::parse("scale=1:1:2:1").check_stages(s.num_stages));
  EXPECT_NO_THROW(CostModel::parse("").check_stages(s.num_stages));
}

TEST(CostParseStrict, MemoryKeys) {
  const CostModel d = CostModel::parse("");
  EXPECT_EQ(d.w_mem, 1);
  EXPECT_FALSE(d.recompute);
  EXPECT_EQ(d.input_mem, 0.05);
  const CostModel c = CostModel::parse("W_MEM=0.366,recompute=1,input_mem=0.1");
  EXPECT_EQ(c.w_mem, 0.366);
  EXPECT_TRUE(c.recompute);
  EXPECT_EQ(c.input_mem, 0.1);
  // Shown in the canonical form only where they differ from the defaults, and read back.
  EXPECT_EQ(d.to_string(), "F=1,B=2,W=1,FB=3,comm=0");
  EXPECT_EQ(c.to_string(), "F=1,B=2,W=1,FB=3,comm=0,w_mem=0.366,recompute=1,input_mem=0.1");
  EXPECT_EQ(CostModel::parse(c.to_string()).to_string(), c.to_string());
  EXPECT_FALSE(CostModel::parse("recompute=0").recompute);
  for (const Bad& b : {Bad{"w_mem=1.5", "0 <= w_mem <= 1"}, Bad{"w_mem=-0.1", "w_mem=-0.1"},
                       Bad{"input_mem=2", "0 <= input_mem <= 1"}, Bad{"recompute=2", "recompute must be 0 or 1"},
                       Bad{"recompute=yes", "recompute=yes"}, Bad{"recompute=", "recompute must be 0 or 1"}}) {
    expect_refused(b);
  }
}

TEST(CostParseStrict, RecomputeMakesEveryBackwardLongerByF) {
  // With recompute a backward first re-runs its forward: B, I and a pair's backward half take F (times the
  // stage's multiplier) longer; F and W do not change.
  CostModel c = CostModel::parse("F=1.5,B=4,W=1,FB=5,recompute=1,scale=1:2");
  EXPECT_DOUBLE_EQ(c.duration(Action::forward(1, 0)), 3);
  EXPECT_DOUBLE_EQ(c.duration(Action::backward(1, 0)), 8 + 3);
  EXPECT_DOUBLE_EQ(c.duration(Action::backward_input(0, 0)), 3 + 1.5);
  EXPECT_DOUBLE_EQ(c.duration(Action::backward_weight(1, 0)), 2);
  // Pair (0F0;1B0): FB scaled like its halves, 5 * (1.5*1 + 4*2) / (1.5 + 4), plus the backward's F*2.
  EXPECT_DOUBLE_EQ(c.duration(Action::overlapped(0, 1, 1, 0)), 5 * 9.5 / 5.5 + 3);
}

}  // namespace
}  // namespace dualpipe
