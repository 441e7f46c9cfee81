// Uneven stages: per-stage absolute costs and activation sizes in the cost model, the balanced cut of per-layer
// costs into stages (against every cut, enumerated), and the planner with layer costs.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/activation_memory.h"
#include "dualpipe/sim/layer_partition.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/simulate.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::contains;
using test::error_message;

TEST(UnevenStages, PerStageCostsTimeEachStage) {
  // An embedding-heavy first stage and a head-heavy last one; the uniform values become the means.
  const CostModel c = CostModel::parse("F=2:1:1:3,B=4:2:2:5,W=1:1:1:2,comm=0");
  EXPECT_DOUBLE_EQ(c.forward, 7.0 / 4);
  EXPECT_DOUBLE_EQ(c.backward, 13.0 / 4);
  EXPECT_DOUBLE_EQ(c.duration(Action::forward(0, 0)), 2);
  EXPECT_DOUBLE_EQ(c.duration(Action::backward(3, 0)), 5);
  EXPECT_DOUBLE_EQ(c.duration(Action::backward_input(3, 0)), 3);
  EXPECT_DOUBLE_EQ(c.duration(Action::backward_weight(0, 0)), 1);
  EXPECT_EQ(CostModel::parse(c.to_string()).to_string(), c.to_string());
  // GPipe R=4 M=1: forward 2+1+1+3, backward 5+2+2+4: makespan 20.
  EXPECT_DOUBLE_EQ(simulate(make_gpipe(ScheduleOptions{4, 1}), c).metrics.makespan, 20);
}

TEST(UnevenStages, PerStageListsAreChecked) {
  struct Bad {
    const char* spec;
    const char* says;
  };
  for (const Bad& b : {Bad{"F=1:2,B=3:3:3", "same length"}, Bad{"F=1:0", "stage 1 must be a positive"},
                       Bad{"B=2:2,W=1:3", "W <= B on every stage"}, Bad{"act_scale=1:-1", "act_scale for stage 1"},
                       Bad{"F=1::2", "position 2"}}) {
    SCOPED_TRACE(b.spec);
    const std::string m = error_message([&] { CostModel::parse(b.spec); });
    EXPECT_TRUE(contains(m, b.says)) << m;
  }
  const std::string m = error_message([&] { CostModel::parse("F=1:2:3").check_stages(4); });
  EXPECT_TRUE(contains(m, "cost F has 3 values for a schedule with 4 stages")) << m;
  // Comparisons spread one value per 1/R slice over the stages cut from it, times R/S.
  const CostModel v = costs_per_stage(CostModel::parse("F=2:4,B=4:8,W=2:4"), 2, 4);
  EXPECT_EQ(v.stage_forward, (std::vector<double>{1, 1, 2, 2}));
  EXPECT_EQ(v.stage_backward, (std::vector<double>{2, 2, 4, 4}));
}

TEST(UnevenStages, CostsPerSliceGatherEachSlicesStages) {
  // S=4 stages on R=2 ranks: a slice is two stages, so its F, B, W and bytes are twice a stage's (S/R), and its
  // per-stage lists the mean of its two stages, times S/R for F, B and W. Computed by hand.
  CostModel per_stage;
  per_stage.forward = 1;
  per_stage.backward = 3;
  per_stage.weight = 1;
  per_stage.overlapped = 3.5;
  per_stage.activation_bytes = 100;
  per_stage.stage_scale = {1, 2, 3, 5};
  per_stage.stage_forward = {1, 1, 2, 4};
  const CostModel slice = costs_per_slice(per_stage, 2, 4);
  EXPECT_DOUBLE_EQ(slice.forward, 2);
  EXPECT_DOUBLE_EQ(slice.backward, 6);
  EXPECT_DOUBLE_EQ(slice.weight, 2);
  EXPECT_DOUBLE_EQ(*slice.overlapped, 7);
  EXPECT_DOUBLE_EQ(slice.activation_bytes, 200);
  EXPECT_EQ(slice.stage_scale, (std::vector<double>{1.5, 4}));
  EXPECT_EQ(slice.stage_forward, (std::vector<double>{2, 6}));
  // It undoes costs_per_stage for lists of one value per slice.
  const CostModel given = CostModel::parse("F=2:4,B=4:8,W=2:4,scale=1:3,act_bytes=64");
  const CostModel back = costs_per_slice(costs_per_stage(given, 2, 4), 2, 4);
  EXPECT_EQ(back.stage_forward, given.stage_forward);
  EXPECT_EQ(back.stage_backward, given.stage_backward);
  EXPECT_EQ(back.stage_weight, given.stage_weight);
  EXPECT_EQ(back.stage_scale, given.stage_scale);
  EXPECT_DOUBLE_EQ(back.activation_bytes, 64);
  CostModel three;
  three.stage_scale = {1, 2, 3};
  const std::string m = error_message([&] { costs_per_slice(three, 2, 4); });
  EXPECT_TRUE(contains(m, "cost scale has 3 values; costs of S=4 stages need one per stage")) << m;
}

TEST(UnevenStages, ActivationSizesWeighTheCount) {
  // One rank, stages 0 and 1 of sizes 2 and 0.5: 0F0 2, 1F0 2.5, 1B0 2, 0F1 4, 0B0 2, ... -> 4.
  CostModel c = CostModel::parse("act_scale=2:0.5");
  const Schedule s = parse_text("rank 0: 0F0 1F0 1B0 0F1 0B0 1F1 1B1 0B1\n");
  EXPECT_DOUBLE_EQ(activation_peaks(s, c)[0], 4);
  // With w_mem 0.5 and I's: 0F0 2, 1F0 2.5, 1I0 2.25, 1W0 2, 0I0 1, 0W0 0 -> 2.5.
  c.w_mem = 0.5;
  EXPECT_DOUBLE_EQ(activation_peaks(parse_text("rank 0: 0F0 1F0 1I0 1W0 0I0 0W0\n"), c)[0], 2.5);
}

// Every contiguous cut of L layers into S stages, by recursion: the reference for balanced_cut.
void every_cut(int L, int S, std::vector<int>& cut, const std::function<void(const std::vector<int>&)>& visit) {
  if (static_cast<int>(cut.size()) == S - 1) {
    int used = 0;
    for (int n : cut) used += n;
    if (L - used < 1) return;
    cut.push_back(L - used);
    visit(cut);
    cut.pop_back();
    return;
  }
  int used = 0;
  for (int n : cut) used += n;
  for (int n = 1; used + n <= L - (S - 1 - static_cast<int>(cut.size())); ++n) {
    cut.push_back(n);
    every_cut(L, S, cut, visit);
    cut.pop_back();
  }
}

TEST(UnevenStages, BalancedCutIsTheBestOfEveryCut) {
  std::vector<LayerCost> layers;
  // An embedding layer, 10 transformer layers of varying size, a head: times and bytes from a small formula.
  layers.push_back({3, 2, 1, 50});
  for (int i = 0; i < 10; ++i) layers.push_back({1 + 0.1 * (i % 3), 2 + 0.2 * (i % 3), 1, 100 + 10.0 * i});
  layers.push_back({2, 5, 2, 300});
  for (int S : {1, 2, 3, 4, 6, 8, 12}) {
    std::pair<double, double> best{1e300, 1e300};
    std::vector<int> scratch;
    every_cut(static_cast<int>(layers.size()), S, scratch, [&](const std::vector<int>& cut) {
      double slowest = 0, largest = 0;
      std::size_t l = 0;
      for (int n : cut) {
        double t = 0, b = 0;
        for (int i = 0; i < n; ++i, ++l) t += layers[l].forward + layers[l].backward, b += layers[l].activation_bytes;
        slowest = std::max(slowest, t), largest = std::max(largest, b);
      }
      best = std::min(best, {slowest, largest});
    });
    const std::vector<int> cut = balanced_cut(layers, S);
    ASSERT_EQ(static_cast<int>(cut.size()), S);
    const CostModel c = costs_of_cut(layers, cut, 4, CostModel{});
    double slowest = 0, largest = 0, total = 0;
    for (int s = 0; s < S; ++s) {
      slowest = std::max(slowest, c.stage_forward[s] + c.stage_backward[s]);
      largest = std::max(largest, c.stage_activation[s] * c.activation_bytes);
      total += c.stage_activation[s] * c.activation_bytes;
    }
    EXPECT_NEAR(slowest, best.first, 1e-9) << "S=" << S;
    EXPECT_NEAR(largest, best.second, 1e-9) << "S=" << S;
    double bytes = 0;
    for (const LayerCost& l : layers) bytes += l.activation_bytes;
    EXPECT_NEAR(total, bytes, 1e-6);
    EXPECT_NEAR(c.activation_bytes, bytes / S, 1e-9);  // the unit: a nominal stage's share
  }
  EXPECT_TRUE(contains(error_message([&] { balanced_cut(layers, 13); }), "12 layers into 13 stages"));
}

TEST(UnevenStages, LayerCostFiles) {
  const std::vector<LayerCost> l =
      parse_layer_costs("# layer costs\nF,B,W,act_bytes\n3,2,1,50\n1 2 1 100\n\n2, 5, 2, 300 # head\n", "x.csv");
  ASSERT_EQ(l.size(), 3u);
  EXPECT_DOUBLE_EQ(l[2].backward, 5);
  EXPECT_DOUBLE_EQ(l[1].activation_bytes, 100);
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"1,2,1\n", "x.csv:1: expected 4 values"}, {"1,2,3,0\n", "x.csv:1: W is part of B"},
           {"0,2,1,0\n", "F and B must be positive"}, {"1,2,1,-5\n", "must not be negative"},
           {"1,2,nan,0\n", "'nan' is not a finite number"}, {"# nothing\n", "no layers"}}) {
    const std::string m = error_message([&] { parse_layer_costs(text, "x.csv"); });
    EXPECT_TRUE(contains(m, says)) << m;
  }
}

TEST(UnevenStages, PlannerCutsTheLayersForEachPlacement) {
  // 16 layers with a heavy first and last layer: a linear cut into 4 stages and a V cut into 8 differ.
  std::vector<LayerCost> layers;
  for (int i = 0; i < 16; ++i) layers.push_back({i == 0 || i == 15 ? 3.0 : 1.0, i == 15 ? 5.0 : 2.0, 1, 100});
  PlanRequest q;
  q.num_ranks = 4;
  q.num_microbatches = 8;
  q.layers = layers;
  q.memory_limit = 4;
  const Plan plan = plan_schedule(q);
  for (const PlanCandidate& c : plan.candidates) {
    ASSERT_EQ(static_cast<int>(c.layers_per_stage.size()), c.schedule.num_stages) << c.name;
    EXPECT_EQ(c.layers_per_stage, balanced_cut(layers, c.schedule.num_stages)) << c.name;
    int sum = 0;
    for (int n : c.layers_per_stage) sum += n;
    EXPECT_EQ(sum, 16);
    EXPECT_LE(c.peak, 4 + 1e-9) << c.name;
  }
  // By hand: F + B is 5 for layer 0, 8 for layer 15, 3 for the others, 55 in all. The last stage can hold layers
  // 13-15 (14) and the first 0-3 (14); layers 4-12 (27) need two stages, so one takes 15: the slowest is 15, and
  // no cut does better (a stage of 14 or less next to the 27 would leave more than 15 to another).
  const CostModel c = costs_of_cut(layers, balanced_cut(layers, 4), 4, CostModel{});
  double slowest = 0;
  for (int s = 0; s < 4; ++s) slowest = std::max(slowest, c.stage_forward[s] + c.stage_backward[s]);
  EXPECT_DOUBLE_EQ(slowest, 15);
  EXPECT_EQ(format_cut({4, 5, 4, 3}), "4,5,4,3");
}

}  // namespace
}  // namespace dualpipe
