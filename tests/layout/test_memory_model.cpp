// The memory model against the published figures it comes from: the ZeRO paper's worked example and Korthikanti
// et al.'s activation formulas (Table 2) and their GPT-3 figure.
#include <gtest/gtest.h>

#include <vector>

#include "dualpipe/layout/memory_model.h"
#include "dualpipe/util/error.h"
#include "layout/published_runs.h"

namespace dualpipe::layout {
namespace {

using test::published_figures;

// Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models" (2020), Figure 1: a
// 7.5B-parameter model on 64 data-parallel GPUs with mixed-precision Adam (K = 12) needs 120 GB per GPU as the
// baseline, 31.4 GB with P_os, 16.6 GB with P_os+g and 1.9 GB with P_os+g+p.
TEST(ModelStateBytes, ReproducesTheZeroPapersSevenAndAHalfBillionExample) {
  const nlohmann::json figure = published_figures("zero2020");
  const std::vector<double> gb = figure.at("gb_per_gpu_by_zero_stage");
  ASSERT_EQ(gb.size(), 4u);
  for (int stage = 0; stage < 4; ++stage)
    EXPECT_NEAR(model_state_bytes(figure.at("parameters"), zero_stage(stage), figure.at("gpus")).total() / 1e9,
                gb[stage], 0.05)
        << "ZeRO-" << stage;
}

TEST(ModelStateBytes, ShardsOnlyWhatEachStageShards) {
  const ModelStateBytes zero1 = model_state_bytes(1e9, ZeroStage::OptimizerState, 8);
  EXPECT_DOUBLE_EQ(zero1.parameters, 2e9);
  EXPECT_DOUBLE_EQ(zero1.gradients, 2e9);
  EXPECT_DOUBLE_EQ(zero1.optimizer, 12e9 / 8);
  const ModelStateBytes zero2 = model_state_bytes(1e9, ZeroStage::Gradients, 8);
  EXPECT_DOUBLE_EQ(zero2.parameters, 2e9);
  EXPECT_DOUBLE_EQ(zero2.gradients, 2e9 / 8);
  EXPECT_THROW(zero_stage(4), InvalidArgument);
  EXPECT_THROW(model_state_bytes(1e9, ZeroStage::OptimizerState, 0), InvalidArgument);
}

// Korthikanti et al. 2022, Table 2, for GPT-3 175B (s = 2048, h = 12288, a = 96) at b = 1 and t = 8, the formulas
// evaluated by hand: sbh = 25,165,824 and 5as/h = 80.
TEST(KorthikantiActivations, MatchTableTwoForGpt3) {
  const double s = 2048, b = 1, h = 12288, a = 96, sbh = 25165824;
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, 1, false, Recompute::None), sbh * (34 + 80));
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, 8, false, Recompute::None),
                   sbh * (10 + 24.0 / 8 + 80.0 / 8));
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, 8, true, Recompute::None), sbh / 8 * (34 + 80));
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, 8, false, Recompute::Selective),
                   sbh * (10 + 24.0 / 8));
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, 8, true, Recompute::Selective), sbh * 34 / 8);
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, 8, false, Recompute::Full), 2 * sbh);
}

// The paper, section 4.3: for GPT-3, selective recomputation cuts the activation memory by 70% (34 of 114 left).
TEST(KorthikantiActivations, SelectiveRecomputationSavesSeventyPercentForGpt3) {
  const double kept = korthikanti_layer_activation_bytes(2048, 1, 12288, 96, 8, true, Recompute::Selective) /
                      korthikanti_layer_activation_bytes(2048, 1, 12288, 96, 8, true, Recompute::None);
  EXPECT_NEAR(1 - kept, published_figures("korthikanti2022_selective_saving").at("saving").get<double>(), 0.005);
}

// The per-model accounting reduces to the paper's for a standard GPT layer, in every mode.
TEST(LayerActivationBytes, EqualsKorthikantiForAStandardGptLayer) {
  const ModelSpec gpt3 = model_spec("gpt3-175b");
  for (const int t : {1, 2, 8})
    for (const bool sp : {false, true})
      for (const Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
        LayerShape shape;
        shape.micro_batch = 2, shape.tp = t, shape.sequence_parallel = sp, shape.recompute = r;
        EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3, false, shape),
                         korthikanti_layer_activation_bytes(2048, 2, 12288, 96, t, sp, r))
            << "t=" << t << " sp=" << sp << " recompute=" << recompute_name(r);
      }
}

TEST(LayerActivationBytes, ContextParallelismDividesTheSequence) {
  const ModelSpec gpt3 = model_spec("gpt3-175b");
  LayerShape whole, halves;
  whole.recompute = halves.recompute = Recompute::Selective;
  halves.cp = 2;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3, false, halves), layer_activation_bytes(gpt3, false, whole) / 2);
}

TEST(Recompute, NamesRoundTripAndUnknownNamesAreRefused) {
  for (const Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    EXPECT_EQ(parse_recompute(recompute_name(r)), r);
  try {
    parse_recompute("partial");
    FAIL() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'partial' is not one of none, selective, full"), std::string::npos);
  }
}

}  // namespace
}  // namespace dualpipe::layout
