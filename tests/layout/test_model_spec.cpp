// Model and cluster specs: the presets' parameter counts against the published ones, and strict reading of files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <utility>

#include "dualpipe/layout/cluster_spec.h"
#include "dualpipe/layout/model_spec.h"
#include "dualpipe/util/error.h"
#include "test_helpers.h"

namespace dualpipe::layout {
namespace {

using test::error_text;

// The refusal of a model file, or of a cluster file, that holds `text`; "(no error)" when it is accepted.
std::string model_file_error(const std::string& text) {
  return error_text([&] { parse_model_spec(text, "m.json"); });
}
std::string cluster_file_error(const std::string& text) {
  return error_text([&] { parse_cluster_spec(text, "c.json"); });
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
  // Files refused, each with the rule its refusal names.
  const std::pair<std::string, std::string> refused[] = {
      {R"({"layers": 4, "hiden": 64})", "m.json: unknown field 'hiden'"},
      {R"({"layers": 4.5})", "'layers' must be a whole number, got 4.5"},
      {"[1, 2]", "must hold one JSON object"},
      {"{", "m.json: not valid JSON"},
      {R"({"layers": )" + std::string(100000, '[') + "}", "nothing may nest inside it"},
      {R"({"layers": 4, "hidden": 64, "heads": 5, "ffn_hidden": 256, "vocab": 256, "seq_len": 32})",
       "heads=5 must divide hidden=64"},
  };
  for (const auto& [text, rule] : refused) {
    const std::string message = model_file_error(text);
    EXPECT_NE(message.find(rule), std::string::npos) << message;
  }
  EXPECT_NE(error_text([] { model_spec("llama4-1t"); }).find("'llama4-1t' is neither a preset nor an existing file"),
            std::string::npos);
}

TEST(ClusterSpec, PresetsTakeTheirGpuCountAfterX) {
  const ClusterSpec c = cluster_spec("h100-sxmx16384");
  EXPECT_EQ(c.gpus, 16384);
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.peak_tflops, 989);
  EXPECT_NE(error_text([] { cluster_spec("h800"); }).find("needs its GPU count, as in 'h800x64'"), std::string::npos);
  EXPECT_NE(error_text([] { cluster_spec("h800x12"); }).find("gpus=12 must be a multiple of gpus_per_node=8"),
            std::string::npos);
  EXPECT_NE(error_text([] { cluster_spec("h800x1e3"); }).find("must be a whole number"), std::string::npos);
  EXPECT_EQ(cluster_spec("a100-80gx4").gpus, 4);  // less than a node
  EXPECT_NE(cluster_file_error(R"({"gpus": 8, "memory_gib": 80, "peak_tflops": 100, "intra_node_gbps": 100,
                                  "inter_node_gbps": 10, "matmul_efficiency": 1.5})")
                .find("matmul_efficiency=1.5 must be above 0 and at most 1"),
            std::string::npos);
  EXPECT_NE(cluster_file_error(R"({"gpus": 8, "memory_gib": 80, "peak_tflops": 100, "intra_node_gbps": 100,
                                  "inter_node_gbps": 10, "attention_efficiency": 0})")
                .find("attention_efficiency=0 must be above 0 and at most 1"),
            std::string::npos);
}

// Every field within its documented range (docs/layout.md): the issue's reproducers and variants.
TEST(ModelSpec, FieldsOutsideTheirRangesAreRefusedNamingThem) {
  // A valid model with the fields of `changes` ("experts": 8, ...) added or replaced.
  const auto model_error = [](const std::string& changes) {
    nlohmann::json model = nlohmann::json::parse(R"({"name": "m", "layers": 4, "hidden": 64, "heads": 4,
                                                     "ffn_hidden": 256, "vocab": 256, "seq_len": 32})");
    model.update(nlohmann::json::parse("{" + changes + "}"));
    return model_file_error(model.dump());
  };
  EXPECT_EQ(model_error(""), "(no error)");
  // A loop over expert-parallel sizes once doubled past 2^30 into 0 and divided by it (SIGFPE).
  EXPECT_NE(model_error(R"("experts": 1073741824, "top_k": 1, "expert_ffn_hidden": 64)")
                .find("model 'm': experts=1073741824 must be between 0 and 65536"),
            std::string::npos);
  EXPECT_NE(model_error(R"("experts": 65537, "top_k": 1, "expert_ffn_hidden": 64)").find("experts=65537"),
            std::string::npos);
  EXPECT_NE(model_error(R"("experts": 8, "top_k": 2, "expert_ffn_hidden": 64, "shared_experts": 2147483647)")
                .find("shared_experts=2147483647 must be between 0 and 1024"),
            std::string::npos);
  EXPECT_NE(model_file_error(R"({"layers": 1000000000, "hidden": 64, "heads": 4, "ffn_hidden": 256, "vocab": 256,
                                "seq_len": 32})")
                .find("layers=1000000000 must be between 1 and 100000"),
            std::string::npos);
  EXPECT_NE(model_error(R"("dtype_bytes": 3)").find("dtype_bytes=3 must be 1, 2, 4 or 8"), std::string::npos);
  EXPECT_NE(model_error(R"("kv_heads": 8)").find("kv_heads=8 must be between 0 and 4"), std::string::npos);
  // A missing field is named as missing, not as a zero; a field given twice is refused.
  EXPECT_NE(model_file_error(R"({"layers": 4, "hidden": 64, "heads": 4, "ffn_hidden": 256, "seq_len": 32})")
                .find("m.json: missing field 'vocab'"),
            std::string::npos);
  EXPECT_NE(model_file_error(R"({"layers": 4, "hidden": 64, "layers": 8})")
                .find("m.json: field 'layers' is given twice"),
            std::string::npos);
  // Names are printed in headers: ESC, BEL and U+202E (which reverses what follows) are refused, at their byte.
  EXPECT_NE(model_error("\"name\": \"\\u001b[2Jpwn\"").find("'name' holds a control character at byte 0 (0x1B)"),
            std::string::npos);
  EXPECT_NE(model_error("\"name\": \"ok\\u0007\"").find("at byte 2"), std::string::npos);
  EXPECT_NE(model_error("\"name\": \"abc\\u202Efdp\"").find("at byte 3"), std::string::npos);
}

TEST(ClusterSpec, FieldsOutsideTheirRangesAreRefusedNamingThem) {
  const auto cluster_error = [](const std::string& changes) {
    nlohmann::json cluster = nlohmann::json::parse(R"({"gpus": 8, "memory_gib": 80, "peak_tflops": 100,
                                                       "intra_node_gbps": 100, "inter_node_gbps": 10})");
    cluster.update(nlohmann::json::parse("{" + changes + "}"));
    return cluster_file_error(cluster.dump());
  };
  EXPECT_EQ(cluster_error(""), "(no error)");
  EXPECT_NE(cluster_error(R"("peak_tflops": 1e-300)").find("peak_tflops=1e-300 must be between 0.001 and 1e+06"),
            std::string::npos);
  EXPECT_NE(cluster_error(R"("update_ns_per_parameter": 1e300)").find("update_ns_per_parameter=1e+300"),
            std::string::npos);
  EXPECT_NE(cluster_error(R"("memory_gib": 1e308)").find("memory_gib=1e+308 must be between"), std::string::npos);
  EXPECT_NE(cluster_error(R"("inter_node_gbps": 1e12)").find("inter_node_gbps=1e+12"), std::string::npos);
  EXPECT_NE(cluster_error(R"("step_time_factor": 1000)").find("step_time_factor=1000"), std::string::npos);
  EXPECT_NE(cluster_error(R"("gpus_per_node": 4096)").find("gpus_per_node=4096 must be between 1 and 1024"),
            std::string::npos);
  EXPECT_NE(cluster_file_error(R"({"gpus": 8, "peak_tflops": 100, "intra_node_gbps": 100, "inter_node_gbps": 10})")
                .find("c.json: missing field 'memory_gib'"),
            std::string::npos);
}

// The MoE layers of a range, counted in closed form, against asking every layer.
TEST(ModelSpec, MoeLayersOfARangeAreThoseItsLayersSayTheyAre) {
  ModelSpec m = model_spec("deepseek-v3");
  for (const int dense : {0, 1, 3, 7})
    for (const int freq : {1, 2, 3, 5}) {
      m.layers = 23, m.dense_layers = dense, m.moe_layer_freq = freq;
      for (int begin = 0; begin <= m.layers; ++begin)
        for (int end = begin; end <= m.layers; ++end) {
          int expected = 0;
          for (int layer = begin; layer < end; ++layer) expected += m.is_moe_layer(layer);
          ASSERT_EQ(m.moe_layers_in(begin, end), expected)
              << dense << " " << freq << " [" << begin << ", " << end << ")";
        }
    }
  m.experts = 0;
  EXPECT_EQ(m.moe_layers_in(0, 23), 0);
}

}  // namespace
}  // namespace dualpipe::layout
