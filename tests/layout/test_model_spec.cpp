// Model and cluster specs: the presets' parameter counts against the published ones, and strict reading of files.
#include <gtest/gtest.h>

#include "dualpipe/layout/cluster_spec.h"
#include "dualpipe/layout/model_spec.h"
#include "dualpipe/util/error.h"

namespace dualpipe::layout {
namespace {

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

// Published totals: GPT-3 175.0B (Brown et al., Table 2.1); Llama 3 8.03B, 70.6B and 405.9B (the model cards);
// DeepSeek-V3 671B total and 37B active (its report). DeepSeek's multi-head latent attention is counted as full
// attention, so its counts are checked to 1% and 5%.
TEST(ModelSpec, PresetsHaveTheirPublishedParameterCounts) {
  EXPECT_NEAR(model_spec("gpt3-175b").total_parameters() / 175.0e9, 1, 0.005);
  EXPECT_NEAR(model_spec("llama3-8b").total_parameters() / 8.03e9, 1, 0.005);
  EXPECT_NEAR(model_spec("llama3-70b").total_parameters() / 70.6e9, 1, 0.005);
  EXPECT_NEAR(model_spec("llama3-405b").total_parameters() / 405.9e9, 1, 0.005);
  const ModelSpec v3 = model_spec("deepseek-v3");
  EXPECT_NEAR(v3.total_parameters() / 671e9, 1, 0.01);
  EXPECT_NEAR(v3.active_parameters() / 37e9, 1, 0.05);
  EXPECT_EQ(v3.moe_layer_count(), 58);
  EXPECT_DOUBLE_EQ(model_spec("llama3-8b").active_parameters(), model_spec("llama3-8b").total_parameters());
}

TEST(ModelSpec, ReadsAFileStrictly) {
  const ModelSpec m = parse_model_spec(
      R"({"name": "tiny", "layers": 4, "hidden": 64, "heads": 4, "ffn_hidden": 256, "vocab": 256, "seq_len": 32})",
      "tiny.json");
  EXPECT_EQ(m.name, "tiny");
  EXPECT_EQ(m.layers, 4);
  EXPECT_EQ(m.kv_heads, 0);
  EXPECT_NE(error_of([] { parse_model_spec(R"({"layers": 4, "hiden": 64})", "m.json"); })
                .find("m.json: unknown field 'hiden'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_model_spec(R"({"layers": 4.5})", "m.json"); })
                .find("'layers' must be a whole number, got 4.5"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_model_spec("[1, 2]", "m.json"); }).find("must hold one JSON object"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_model_spec("{", "m.json"); }).find("m.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([] { parse_model_spec(R"({"layers": )" + std::string(100000, '[') + "}", "m.json"); })
                .find("nothing may nest inside it"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_model_spec(R"({"layers": 4, "hidden": 64, "heads": 5, "ffn_hidden": 256, "vocab": 256,
                                  "seq_len": 32})",
                               "m.json");
            }).find("heads=5 must divide hidden=64"),
            std::string::npos);
  EXPECT_NE(error_of([] { model_spec("llama4-1t"); }).find("'llama4-1t' is neither a preset nor an existing file"),
            std::string::npos);
}

TEST(ClusterSpec, PresetsTakeTheirGpuCountAfterX) {
  const ClusterSpec c = cluster_spec("h100-sxmx16384");
  EXPECT_EQ(c.gpus, 16384);
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.peak_tflops, 989);
  EXPECT_NE(error_of([] { cluster_spec("h800"); }).find("needs its GPU count, as in 'h800x64'"), std::string::npos);
  EXPECT_NE(error_of([] { cluster_spec("h800x12"); }).find("gpus=12 must be a multiple of gpus_per_node=8"),
            std::string::npos);
  EXPECT_NE(error_of([] { cluster_spec("h800x1e3"); }).find("must be a whole number"), std::string::npos);
  EXPECT_EQ(cluster_spec("a100-80gx4").gpus, 4);  // less than a node
  EXPECT_NE(error_of([] {
              parse_cluster_spec(R"({"gpus": 8, "memory_gib": 80, "peak_tflops": 100, "intra_node_gbps": 100,
                                    "inter_node_gbps": 10, "matmul_efficiency": 1.5})",
                                 "c.json");
            }).find("matmul_efficiency and link_efficiency must be in (0, 1]"),
            std::string::npos);
}

}  // namespace
}  // namespace dualpipe::layout
