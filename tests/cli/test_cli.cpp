// The `dualpipe` command as a user runs it: output forms, the spec's example line, exit statuses, help.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "cli/run_command.h"

namespace {

using dualpipe::test::CommandResult;

using dualpipe::test::dualpipe;
using dualpipe::test::expect_each_refused;

std::string line_starting(const std::string& text, const std::string& prefix) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end - pos);
    if (line.rfind(prefix, 0) == 0) return line;
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return {};
}

TEST(Cli, DualPipeRankZeroIsTheSpecExample) {
  const CommandResult run = dualpipe("schedule --kind dualpipe --ranks 4 --microbatches 8");
  ASSERT_EQ(run.status, 0) << run.out;
  // Verbatim from spec section 4.
  EXPECT_EQ(line_starting(run.out, "rank 0:"),
            "rank 0: 0F0 0F1 0F2 3F4 3I4 3W4 3F5 (0F3;3B5) (3F6;0B0) 3B6 (3F7;0B1) 3B7 0I2 0W2 0I3 0W3");
  EXPECT_NE(line_starting(run.out, "rank 3:"), "");
  EXPECT_EQ(line_starting(run.out, "rank 4:"), "");
}

TEST(Cli, SimulateJsonHasTheDocumentedKeys) {
  const CommandResult run = dualpipe("simulate --kind 1f1b --ranks 4 --microbatches 8 --format json");
  ASSERT_EQ(run.status, 0) << run.out;
  const auto j = nlohmann::json::parse(run.out);
  for (const char* key : {"kind", "ranks", "stages", "microbatches", "makespan", "bubble", "bubble_rate", "per_rank"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  // 1F1B with F=1, B=2: bubble (S-1)(F+B) = 9, makespan (M+S-1)(F+B) = 33.
  EXPECT_DOUBLE_EQ(j["bubble"].get<double>(), 9.0);
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), 33.0);
  ASSERT_EQ(j["per_rank"].size(), 4u);
  for (const auto& r : j["per_rank"]) {
    for (const char* key : {"rank", "busy", "idle", "span", "peak_activations"}) EXPECT_TRUE(r.contains(key)) << key;
    EXPECT_DOUBLE_EQ(r["busy"].get<double>(), 24.0);  // M (F + B)
  }
}

TEST(Cli, SimulateAllIsSortedByBubbleAndSaysWhatItSkipped) {
  // R=3 is odd: DualPipe and Chimera must be skipped with their rule.
  const CommandResult run = dualpipe("simulate --kind all --ranks 3 --microbatches 6 --format json");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("skipped dualpipe: DualPipe needs an even number of ranks, got R=3"), std::string::npos)
      << run.out;
  const auto j = nlohmann::json::parse(run.out.substr(0, run.out.rfind(']') + 1));
  ASSERT_GE(j.size(), 4u);
  for (std::size_t i = 1; i < j.size(); ++i) EXPECT_LE(j[i - 1]["bubble"], j[i]["bubble"]);
}

TEST(Cli, CsvAndTextFilesRoundTripThroughFrom) {
  const std::string dir = testing::TempDir();
  for (const std::string format : {"text", "csv"}) {
    const std::string path = dir + "/dualpipe_cli_roundtrip." + (format == "csv" ? "csv" : "txt");
    CommandResult written = dualpipe("schedule --kind zb-h1 --ranks 3 --microbatches 5 --format " + format + " > " + path);
    ASSERT_EQ(written.status, 0) << written.out;
    const CommandResult direct = dualpipe("simulate --kind zb-h1 --ranks 3 --microbatches 5 --format json");
    const CommandResult loaded = dualpipe("simulate --from " + path + " --format json");
    ASSERT_EQ(loaded.status, 0) << loaded.out;
    const auto a = nlohmann::json::parse(direct.out), b = nlohmann::json::parse(loaded.out);
    EXPECT_EQ(a["makespan"], b["makespan"]) << format;
    EXPECT_EQ(a["per_rank"], b["per_rank"]) << format;
    EXPECT_EQ(b["kind"], "custom");
  }
}

TEST(Cli, BadArgumentsExitWithStatusTwoAndSayWhy) {
  expect_each_refused({
      {"schedule --kind dualpipe --ranks 4 --microbatches 6", "M >= 2R"},
      {"schedule --kind dualpipe --ranks 5 --microbatches 10", "even number of ranks"},
      {"schedule --kind nosuch", "unknown schedule kind 'nosuch'"},
      {"simulate --cost F=1,B=oops", "'oops' is not a number"},
      {"simulate --cost W=3", "W <= B"},
      // Costs whose sum overflows are refused for every kind, not "no schedule accepts".
      {"simulate --kind all --cost F=1e308,B=1e308", "too large to simulate"},
      // The output path is checked first, so this one is writable (and never written).
      {"draw --compare all --cost F=1e308,B=1e308 -o /tmp/dualpipe_never_written.svg", "too large to simulate"},
      {"schedule --ranks many", "many"},
      {"simulate --from /nonexistent/file.txt", "/nonexistent/file.txt"},
      {"schedule --format xml", "xml"},
      {"frobnicate", ""},
  });
}

TEST(Cli, EveryCommandHasHelp) {
  for (const char* command : {"", "schedule ", "simulate ", "draw "}) {
    const CommandResult run = dualpipe(std::string(command) + "--help");
    EXPECT_EQ(run.status, 0) << command;
    EXPECT_NE(run.out.find("Usage"), std::string::npos) << command << run.out;
  }
}

}  // namespace
