// The layout search: against an exhaustive evaluation of every layout, and against published runs.
#include <gtest/gtest.h>

#include "dualpipe/layout/layout.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/util/error.h"
#include "layout/search_request.h"
#include "test_helpers.h"

namespace dualpipe::layout {
namespace {

ModelSpec small_model() {
  return parse_model_spec(R"({"name": "small", "layers": 8, "hidden": 1024, "heads": 16, "ffn_hidden": 4096,
                              "vocab": 32000, "seq_len": 2048})",
                          "small.json");
}

// The search bounds pipelines out before simulating them; its best must be the best of every layout evaluated.
TEST(SearchLayouts, FindsTheBestOfAnExhaustiveEvaluation) {
  const ModelSpec model = small_model();
  ClusterSpec cluster = cluster_spec("a100-80gx8");
  cluster.memory_gib = 12;  // tight enough that memory decides too
  const int batch = 32;
  double best = 0;
  int fitting = 0;
  for (const int tp : {1, 2, 4, 8})
    for (const int cp : {1, 2, 4, 8})
      for (const int pp : {1, 2, 4, 8}) {
        if (8 % (tp * cp * pp) != 0) continue;
        std::vector<std::pair<std::string, int>> schedules{{"none", 1}};
        if (pp > 1) {
          schedules.clear();
          for (const GeneratorInfo& g : generators()) schedules.emplace_back(std::string(g.name), 1);
          schedules.emplace_back("interleaved-1f1b", 2), schedules.emplace_back("interleaved-1f1b", 4);
        }
        for (const auto& [kind, vpp] : schedules)
          for (const int mbs : {1, 2, 4, 8})
            for (const Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
              for (const int zero : {0, 1, 2, 3}) {
                Layout l;
                l.tp = tp, l.cp = cp, l.pp = pp, l.dp = 8 / (tp * cp * pp), l.schedule = kind, l.vpp = vpp;
                l.micro_batch_size = mbs, l.recompute = r, l.zero = zero;
                try {
                  const LayoutResult result = evaluate_layout(model, cluster, batch, l);
                  if (!result.fits) continue;
                  ++fitting;
                  best = std::max(best, result.tokens_per_second_per_gpu);
                } catch (const InvalidArgument&) {
                }
              }
      }
  ASSERT_GT(fitting, 10);
  LayoutRequest request;
  request.model = model, request.cluster = cluster, request.global_batch = batch, request.top = 3;
  request.planner = false;  // the hand-made families, as evaluated above
  const LayoutSearch search = search_layouts(request);
  ASSERT_FALSE(search.ranked.empty());
  EXPECT_DOUBLE_EQ(search.ranked.front().tokens_per_second_per_gpu, best);
  EXPECT_LT(search.simulated, search.layouts);  // the bound did prune
  for (size_t i = 1; i < search.ranked.size(); ++i)
    EXPECT_GE(search.ranked[i - 1].tokens_per_second_per_gpu, search.ranked[i].tokens_per_second_per_gpu);
}

// The planner's automatic schedules join the search: they never make its best worse, and a planned row beats every
// family row of its pipeline (the planner weighed those families under the same costs and memory).
TEST(SearchLayouts, ThePlannersSchedulesJoinWhereTheyWin) {
  LayoutRequest request =
      test::search_request(model_spec("llama3-8b"), "a100-80gx8", 64, "tp=1,cp=1,pp=8,mbs=1,recompute=full", 100);
  const LayoutSearch with_planner = search_layouts(request);
  request.planner = false;
  const LayoutSearch families = search_layouts(request);
  ASSERT_FALSE(with_planner.ranked.empty());
  ASSERT_FALSE(families.ranked.empty());
  EXPECT_GE(with_planner.ranked.front().tokens_per_second_per_gpu, families.ranked.front().tokens_per_second_per_gpu);
  int planned = 0;
  for (const LayoutResult& row : with_planner.ranked) {
    if (row.layout.schedule.rfind("planned ", 0) != 0) continue;
    ++planned;
    EXPECT_NE(row.plan_command.find("dualpipe plan --ranks 8 --microbatches 64"), std::string::npos) << row.plan_command;
    for (const LayoutResult& family : families.ranked) {
      // The planner's placements hold one copy of the parameters.
      if (family.layout.recompute != row.layout.recompute || family.layout.zero != row.layout.zero ||
          family.parameter_copies != 1)
        continue;
      EXPECT_GE(row.tokens_per_second_per_gpu, family.tokens_per_second_per_gpu * (1 - 1e-9))
          << row.layout.schedule << " against " << family.layout.schedule;
    }
  }
  EXPECT_GT(planned, 0);
}

// DeepSeek-V3's published layout on 2048 H800s (PP16, EP64, no TP, ZeRO-1 data parallelism, DualPipe, batch 15360):
// it fits, and DualPipe is the best schedule of that family.
TEST(SearchLayouts, DeepSeekV3sPublishedLayoutFitsAndDualPipeLeadsItsFamily) {
  const LayoutSearch search = search_layouts(
      test::search_request(model_spec("deepseek-v3"), "h800x2048", 15360, "tp=1,cp=1,pp=16,ep=64,mbs=1,zero=1", 3));
  ASSERT_FALSE(search.ranked.empty());
  const LayoutResult& best = search.ranked.front();
  EXPECT_EQ(best.layout.schedule, "dualpipe");
  EXPECT_TRUE(best.fits);
  EXPECT_EQ(best.layout.dp, 128);
  EXPECT_DOUBLE_EQ(best.parameter_copies, 2);
}

// torchtitan (Liang et al. 2024) trained Llama 3.1 405B on 512 H100s with PP8: interleaved 1F1B reached about 1.28x
// the tokens/s of 1F1B. Same layout (TP8, PP8, DP8, 8 micro-batches of one sequence), two stages per rank.
TEST(SearchLayouts, InterleavingGainsWhatTorchtitanMeasuredForLlama405B) {
  const ModelSpec model = model_spec("llama3-405b");
  const ClusterSpec cluster = cluster_spec("h100-sxmx512");
  Layout l;
  l.tp = 8, l.pp = 8, l.dp = 8, l.zero = 1, l.recompute = Recompute::Full;
  l.schedule = "1f1b";
  const double one_f_one_b = evaluate_layout(model, cluster, 64, l).tokens_per_second_per_gpu;
  l.schedule = "interleaved-1f1b", l.vpp = 2;
  const double interleaved = evaluate_layout(model, cluster, 64, l).tokens_per_second_per_gpu;
  EXPECT_NEAR(interleaved / one_f_one_b, 1.28, 0.1);
}

TEST(EvaluateLayout, RefusesLayoutsThatDoNotDivideNamingTheRule) {
  const ModelSpec model = small_model();
  const ClusterSpec cluster = cluster_spec("a100-80gx8");
  const auto error_of = [&](Layout l, int batch = 32) {
    return test::error_text([&] { evaluate_layout(model, cluster, batch, l); });
  };
  Layout l;
  l.dp = 4;
  EXPECT_NE(error_of(l).find("tp x cp x pp x dp must be the 8 GPUs"), std::string::npos);
  l.dp = 8;
  EXPECT_NE(error_of(l, 36).find("global batch 36 must be a multiple of dp x micro-batch size = 8 x 1"),
            std::string::npos);
  l.ep = 2;
  EXPECT_NE(error_of(l).find("ep=2: the model has no experts"), std::string::npos);
  l.ep = 1, l.pp = 8, l.dp = 1;
  EXPECT_NE(error_of(l).find("a pipeline of one stage has schedule none"), std::string::npos);
  l.schedule = "dualpipe", l.pp = 2, l.dp = 4, l.tp = 1;
  EXPECT_NE(error_of(l, 4).find("schedule 'dualpipe' cannot run pp=2 with 1 micro-batches"), std::string::npos);
}

TEST(LayoutFix, ParsesItsKeysAndRefusesTheRest) {
  const LayoutFix fix = LayoutFix::parse("tp=8,pp=16,schedule=DualPipe,recompute=full,zero=1");
  EXPECT_EQ(fix.tp, 8);
  EXPECT_EQ(fix.pp, 16);
  EXPECT_EQ(fix.schedules, std::vector<std::string>{"dualpipe"});
  EXPECT_EQ(fix.recompute, Recompute::Full);
  EXPECT_FALSE(fix.cp.has_value());
  const auto error_of = [](const std::string& text) { return test::error_text([&] { LayoutFix::parse(text); }); };
  EXPECT_NE(error_of("tp=8,tp=4").find("names 'tp' twice"), std::string::npos);
  EXPECT_NE(error_of("zero=4").find("zero=4 must be between 0 and 3"), std::string::npos);
  EXPECT_NE(error_of("pipeline=4").find("key 'pipeline' is not one of"), std::string::npos);
  EXPECT_NE(error_of("tp").find("'tp' must be KEY=VALUE"), std::string::npos);
  EXPECT_NE(error_of("tp=x").find("tp='x' must be a whole number"), std::string::npos);
  EXPECT_NE(error_of("schedule=dualpip").find("'dualpip' is not a schedule"), std::string::npos);
  EXPECT_TRUE(LayoutFix::parse("").tp == std::nullopt);
}

// How the layers run, and the schedules the training software offers (Megatron-LM's in 2021, say).
TEST(LayoutFix, HoldsHowTheLayersRunAndSeveralSchedules) {
  const LayoutFix fix = LayoutFix::parse("sp=0,flash=0,dp_overlap=1,even_stages=1,schedule=none+1f1b+interleaved-1f1b");
  EXPECT_EQ(fix.sp, false);
  EXPECT_EQ(fix.flash, false);
  EXPECT_EQ(fix.dp_overlap, true);
  EXPECT_EQ(fix.schedules, (std::vector<std::string>{"none", "1f1b", "interleaved-1f1b"}));
  EXPECT_EQ(LayoutFix::parse(fix.to_string()).to_string(), fix.to_string());
  Layout l;
  fix.apply(l);
  EXPECT_FALSE(l.sequence_parallel);
  EXPECT_FALSE(l.flash_attention);
  EXPECT_TRUE(l.dp_overlap);
  const auto error_of = [](const std::string& text) { return test::error_text([&] { LayoutFix::parse(text); }); };
  EXPECT_NE(error_of("sp=2").find("--fix sp='2' must be 0 or 1"), std::string::npos);
  EXPECT_NE(error_of("schedule=1f1b+1f1b").find("names '1f1b' twice"), std::string::npos);
  EXPECT_NE(error_of("schedule=1f1b,schedule=gpipe").find("names 'schedule' twice"), std::string::npos);

  // Every row keeps to them: only those schedules, and layers that divide evenly over the stages.
  const ModelSpec model = model_spec("gpt3-175b");  // 96 layers
  const LayoutSearch search =
      search_layouts(test::search_request(model, "a100-80gx256", 512, fix.to_string() + ",tp=8", 50));
  ASSERT_FALSE(search.ranked.empty());
  for (const LayoutResult& row : search.ranked) {
    EXPECT_TRUE(fix.allows_schedule(row.layout.schedule)) << row.layout.schedule;
    EXPECT_EQ(model.layers % row.layout.stages(), 0) << row.layout.pp << "x" << row.layout.vpp;
    EXPECT_FALSE(row.layout.sequence_parallel);
  }
}

}  // namespace
}  // namespace dualpipe::layout
