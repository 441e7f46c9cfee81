// `dualpipe layout` and `dualpipe profile` as a user runs them: the JSON fields the docs promise, files written
// whole, and bad input refused with exit status 2 naming the value and the rule.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/run_command.h"

namespace {

using dualpipe::test::CommandResult;

using dualpipe::test::dualpipe;

TEST(LayoutCommand, JsonRowsCarryEveryDocumentedField) {
  const CommandResult run =
      dualpipe("layout --model llama3-8b --cluster h100-sxmx64 --global-batch 512 --top 3 --format json");
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json out = nlohmann::json::parse(run.out);
  ASSERT_EQ(out["rows"].size(), 3u);
  for (const auto& row : out["rows"]) {
    for (const char* field : {"tp", "cp", "pp", "vpp", "dp", "ep", "zero", "recompute", "schedule", "micro_batch_size",
                              "microbatches", "sequence_parallel", "dp_overlap", "flash_attention", "memory_bytes",
                              "step_seconds", "time_seconds", "hidden_seconds", "compute_efficiency",
                              "tokens_per_second_per_gpu", "mfu", "tflops_per_gpu", "hardware_tflops_per_gpu",
                              "bubble_fraction", "fits", "plan_command", "train_command"})
      EXPECT_TRUE(row.contains(field)) << field;
    EXPECT_EQ(row["tp"].get<int>() * row["cp"].get<int>() * row["pp"].get<int>() * row["dp"].get<int>(), 64);
    EXPECT_TRUE(row["fits"].get<bool>());
    const auto& memory = row["memory_bytes"];
    // The peak: the states, and the activations or the optimizer step's fp32 gradients, whichever is larger.
    EXPECT_DOUBLE_EQ(memory["total"].get<double>(),
                     memory["parameters"].get<double>() + memory["gradients"].get<double>() +
                         memory["optimizer"].get<double>() +
                         std::max(memory["activations"].get<double>(), memory["optimizer_step"].get<double>()));
    EXPECT_LE(memory["total"].get<double>(), memory["limit"].get<double>());
    // tokens/s per GPU is the batch's tokens over the step and the GPUs.
    EXPECT_NEAR(row["tokens_per_second_per_gpu"].get<double>(), 512.0 * 8192 / row["step_seconds"].get<double>() / 64,
                1e-6 * row["tokens_per_second_per_gpu"].get<double>());
  }
  EXPECT_GE(out["rows"][0]["tokens_per_second_per_gpu"].get<double>(),
            out["rows"][1]["tokens_per_second_per_gpu"].get<double>());
}

// --explain takes one layout apart: its parts add up to its step, in the JSON and in the text a user reads.
TEST(LayoutCommand, ExplainsOneLayoutWhosePartsAddUpToItsStep) {
  const std::string base = "layout --model deepseek-v3 --cluster h800x2048 --global-batch 15360 --explain "
                           "--fix tp=1,cp=1,pp=16,ep=64,mbs=1,zero=1,schedule=dualpipe";
  const CommandResult json_run = dualpipe(base + " --format json");
  ASSERT_EQ(json_run.status, 0) << json_run.out;
  const nlohmann::json layout = nlohmann::json::parse(json_run.out)["layout"];
  double parts = 0;
  for (const auto& [name, seconds] : layout["time_seconds"].items()) parts += seconds.get<double>();
  const double step = layout["step_seconds"].get<double>();
  EXPECT_NEAR(parts, step, 1e-9 * step);
  for (const char* part : {"compute", "recompute", "tp", "cp", "ep", "bubble", "dp", "update", "other"})
    EXPECT_TRUE(layout["time_seconds"].contains(part)) << part;
  EXPECT_GT(layout["hidden_seconds"]["ep"].get<double>(), 0);  // DualPipe's pairs hide the all-to-all
  EXPECT_GT(layout["compute_efficiency"].get<double>(), 0);
  EXPECT_LE(layout["compute_efficiency"].get<double>(), 1);

  // The text: every part's seconds, summed, give the step line's.
  const CommandResult text_run = dualpipe(base);
  ASSERT_EQ(text_run.status, 0) << text_run.out;
  std::istringstream lines(text_run.out);
  std::string line;
  double summed = 0, stated = -1;
  int counted = 0;
  while (std::getline(lines, line) && line.find("on the busiest rank:") == std::string::npos) {
  }
  while (stated < 0 && std::getline(lines, line)) {  // the parts, down to the step's line
    char name[64];
    double seconds = 0;
    if (std::sscanf(line.c_str(), "  %63[a-z ] %lf s", name, &seconds) != 2) continue;
    const std::string part = name;
    if (part.rfind("step", 0) == 0) stated = seconds;
    else summed += seconds, ++counted;
  }
  EXPECT_GE(counted, 8) << text_run.out;
  EXPECT_NEAR(summed, stated, 1e-3 * stated) << text_run.out;
  EXPECT_NEAR(stated, step, 1e-3 * step);
  EXPECT_NE(text_run.out.find("memory per GPU"), std::string::npos);
}

TEST(LayoutCommand, FixHoldsTheSizesAndTheTableGoesToAFile) {
  const std::string path = testing::TempDir() + "layout_table.txt";
  std::remove(path.c_str());
  const CommandResult run = dualpipe("layout --model gpt3-175b --cluster a100-80gx1024 --global-batch 1536 "
                                     "--fix tp=8,pp=16,schedule=interleaved-1f1b --top 2 -o " + path);
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_EQ(run.out, "");
  std::ifstream file(path);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("model gpt3-175b: 174.6B parameters"), std::string::npos) << text;
  EXPECT_NE(text.find("tp8 cp1 pp16x"), std::string::npos) << text;
  EXPECT_NE(text.find("interleaved-1f1b"), std::string::npos) << text;
}

TEST(LayoutCommand, BadInputIsRefusedNamingTheValue) {
  EXPECT_REFUSED(dualpipe("layout --model gpt5 --cluster h800x8 --global-batch 8"),
                 "--model 'gpt5' is neither a preset nor an existing file");
  EXPECT_REFUSED(dualpipe("layout --model llama3-8b --cluster h800 --global-batch 8"),
                 "a preset needs its GPU count, as in 'h800x64'");
  EXPECT_REFUSED(dualpipe("layout --model llama3-8b --cluster h800x8 --global-batch 8 --fix tp=3"),
                 "no layout of llama3-8b on h800x8 divides with global batch 8 and --fix tp=3");
  EXPECT_REFUSED(dualpipe("layout --model llama3-8b --cluster h800x8 --global-batch 8 --fix zero=5"),
                 "--fix zero=5 must be between 0 and 3");
  EXPECT_EQ(dualpipe("layout --model llama3-8b --cluster h800x8").status, 2);  // --global-batch is required
}

// A --cost string calibrates the compute rate: the stated efficiency scales by modelled / measured, so twice the
// measured time gives half the rate.
TEST(LayoutCommand, CalibratesOnACostStringAndRefusesBadOnes) {
  const std::string model = std::string(DUALPIPE_SOURCE_DIR) + "/examples/layout/small-moe.json";
  const std::string cluster = std::string(DUALPIPE_SOURCE_DIR) + "/examples/layout/this-machine-x4.json";
  const std::string base = "layout --model " + model + " --cluster " + cluster + " --global-batch 32 --top 1 ";
  const auto efficiency = [&](const std::string& costs) {
    const CommandResult run = dualpipe(base + "--calibrate " + costs + " --calibrate-mbs 2 --format json");
    EXPECT_EQ(run.status, 0) << run.out;
    const nlohmann::json out = nlohmann::json::parse(run.out);
    EXPECT_EQ(out["calibration"]["matmul_efficiency"], out["cluster"]["matmul_efficiency"]);
    return out["calibration"]["matmul_efficiency"].get<double>();
  };
  const double fast = efficiency("F=100000,B=200000"), slow = efficiency("F=200000,B=400000");
  EXPECT_NEAR(slow, fast / 2, 1e-12);
  EXPECT_REFUSED(dualpipe(base + "--calibrate nonsense --calibrate-mbs 2"),
                 "--calibrate 'nonsense' is neither a file or directory (a dualpipe train --trace, or its "
                 "--kineto-trace) nor a --cost string");
  EXPECT_REFUSED(dualpipe(base + "--calibrate F=1,B=2 --calibrate-mbs 2"), "a rate above peak means peak_tflops");
  EXPECT_EQ(dualpipe(base + "--calibrate F=1,B=2").status, 2);  // --calibrate-mbs is required with it
}

TEST(ProfileCommand, BadTracesAreRefusedNamingTheFile) {
  const std::string path = testing::TempDir() + "not_a_trace.json";
  std::ofstream(path) << "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, "
                         "\"tid\": 1, \"ts\": 5, \"dur\": -1}]}";
  EXPECT_REFUSED(dualpipe("profile --kineto " + path), "traceEvents[0].dur: must be >= 0, got -1");
  EXPECT_REFUSED(dualpipe("profile --kineto /nonexistent/trace.json"), "/nonexistent/trace.json");
}

}  // namespace
