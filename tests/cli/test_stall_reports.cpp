// Issue 75, item 1, through `dualpipe train`: a rank made slow (the emulated device) stalls the pipeline, and
// --stall-report-after names it inside its action; SIGUSR1 to the launcher asks for a report without stopping the
// job.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/run_command.h"

namespace dualpipe::test {
namespace {

// 1F1B on two ranks, two micro-batches; from step 2 rank 1's compute takes 100 x 15 ms per action.
const std::string kSlowRankOne =
    "train --pp 2 --schedule 1f1b -m 2 --steps 2 --experts 2 --emulate-device F=15,B=15,W=15 "
    "--emulate-slow-rank 1=100@2 --sample-tokens 0 --trace ''";

TEST(StallReports, TheTrainerNamesTheSlowRankInsideItsAction) {
  const std::string dir = ::testing::TempDir() + "/stall_train";
  std::filesystem::remove_all(dir);
  const CommandResult run = dualpipe(kSlowRankOne + " --stall-report-after 1 --stall-report-dir " + dir);
  ASSERT_EQ(run.status, 0) << run.out;  // a report, not a failure
  EXPECT_NE(run.out.find("stall report: "), std::string::npos) << run.out;
  std::ifstream in(dir + "/stall-report.json");
  ASSERT_TRUE(in) << run.out;
  const nlohmann::json report = nlohmann::json::parse(in);
  // Rank 0 has finished its part of the step and waits outside the pipeline; rank 1 computes for seconds.
  EXPECT_NE(report["headline"].get<std::string>().find("rank 1 inside 1"), std::string::npos) << report.dump(2);
  EXPECT_EQ(report["ranks"].size(), 2u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/stall-rank1.json"));
}

TEST(StallReports, SigusrOneToTheLauncherAsksTheRanksWithoutStoppingThem) {
  const std::string log = ::testing::TempDir() + "/stall_sigusr1.log";
  // Sent once rank 0 has printed its first lines (the ranks run), during the slow step 2.
  const CommandResult run = run_command(
      std::string(DUALPIPE_BIN) + " " + kSlowRankOne + " --stall-report-after 0 > " + log + " 2>&1 & P=$!; " +
      "for i in $(seq 300); do grep -q '^\\[rank 0\\]' " + log + " && break; sleep 0.1; done; sleep 3; " +
      "kill -USR1 $P; wait $P; echo \"exit $?\"; cat " + log);
  EXPECT_NE(run.out.find("exit 0"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("dualpipe launch: got SIGUSR1: asked 2 of 2 running ranks for a stall report"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("[rank 0] rank 0: stall report: "), std::string::npos) << run.out;
}

TEST(StallReports, BadValuesAreRefused) {
  expect_each_refused({{"train --stall-report-after -1",
                        "--stall-report-after must be 0 (only on SIGUSR1) or between 1 and 86400 seconds, got -1"},
                       {"train --stall-report-after nan", "--stall-report-after"},
                       {"train --stall-report-dir /proc/no-such-dir", "--stall-report-dir"},
                       // Under a second a healthy step's slowest wait would be reported as a stall.
                       {"train --stall-report-after 0.5",
                        "--stall-report-after must be 0 (only on SIGUSR1) or between 1 and 86400 seconds, got 0.5"},
                       // The report would come after the ranks gave up (it was cut to 10 s without a word).
                       {"train --stall-report-after 30 --timeout 20",
                        "--stall-report-after 30 must be at most half of --timeout 20"},
                       // Every rank's rendezvous failed with LibTorch's backtrace.
                       {"train --timeout 0.001", "--timeout must be between 1 and 86400 seconds, got 0.001"}});
}

}  // namespace
}  // namespace dualpipe::test
