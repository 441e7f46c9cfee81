// Issue 75, item 1: when a pipeline stalls, the ranks say why within seconds. Two runtime_failure_worker processes
// over Gloo/TCP under 1F1B, one of them made to stall: stuck inside an action, its message lost, or running another
// schedule. Rank 0's report must name the rank and the action the stall comes from, long before the timeout.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/support/rank_processes.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct WorkerRun {
  std::vector<int> codes;  // -1: still running at the limit (killed)
  std::vector<std::string> errors;  // each rank's stderr
  nlohmann::json report;            // DIR/stall-report.json (null when none was written)
  double seconds = 0;
};

// Two worker ranks with `args` plus their output folder; every rank is reaped, killed at the limit.
WorkerRun run_workers(const std::vector<std::string>& args, const std::string& name, int limit_s = 60,
                std::function<void(const std::vector<pid_t>&)> meanwhile = nullptr) {
  const std::string dir = ::testing::TempDir() + "/stall_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<std::string> all = args;
  all.insert(all.end(), {"--out", dir});
  const int port = dualpipe::testing::free_local_port();
  std::vector<pid_t> pids;
  const auto start = Clock::now();
  for (int r = 0; r < 2; ++r)
    pids.push_back(dualpipe::testing::spawn_process(DUALPIPE_FAILURE_WORKER, all,
                                                    dualpipe::testing::rank_environment(r, 2, port),
                                                    dir + "/rank" + std::to_string(r) + ".err"));
  if (meanwhile) meanwhile(pids);
  WorkerRun run;
  run.codes.assign(2, -2);
  const auto deadline = start + std::chrono::seconds(limit_s);
  for (int left = 2; left > 0;) {
    for (int r = 0; r < 2; ++r) {
      int status = 0;
      if (run.codes[r] != -2 || ::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      run.codes[r] = dualpipe::testing::exit_code(status);
      --left;
    }
    if (left > 0 && Clock::now() > deadline) {
      for (int r = 0; r < 2; ++r)
        if (run.codes[r] == -2) {
          ::kill(pids[r], SIGKILL);
          ::waitpid(pids[r], nullptr, 0);
          run.codes[r] = -1;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (int r = 0; r < 2; ++r) run.errors.push_back(read_text(dir + "/rank" + std::to_string(r) + ".err"));
  const std::string report = read_text(dir + "/stall-report.json");
  if (!report.empty()) run.report = nlohmann::json::parse(report);
  return run;
}

std::vector<std::string> worker_args(const std::string& timeout_ms, const std::vector<std::string>& fault) {
  std::vector<std::string> args = {"--kind", "1f1b", "--steps", "2", "--timeout-ms", timeout_ms, "--stall-after-ms",
                                   "1000"};
  args.insert(args.end(), fault.begin(), fault.end());
  return args;
}

// 1F1B on two ranks, four micro-batches: rank 1 (stage 1) runs F0 B0 F1 B1 F2 B2 F3 B3; asleep in its third
// forward (1F2), rank 0 has sent F3 and waits for B2.
TEST(Stall, ARankStuckInsideAnActionIsNamedWithTheAction) {
  const WorkerRun run = run_workers(worker_args("30000", {"--fault", "sleep", "--fault-rank", "1", "--fault-step", "1",
                                                     "--fault-after-forwards", "3", "--fault-seconds", "5"}),
                              "sleep");
  ASSERT_EQ(run.codes, (std::vector<int>{0, 0})) << run.errors[0] << run.errors[1];  // the job goes on after
  ASSERT_FALSE(run.report.is_null()) << run.errors[0];
  EXPECT_EQ(run.report["cause"], "inside_action") << run.report.dump(2);
  EXPECT_EQ(run.report["rank"], 1);
  EXPECT_EQ(run.report["action"], "1F2");
  EXPECT_NE(run.errors[0].find("rank 0 waits for 1SEND_B2 from rank 1"), std::string::npos) << run.errors[0];
  EXPECT_NE(run.errors[0].find("rank 1 is inside 1F2 for"), std::string::npos) << run.errors[0];
  EXPECT_TRUE(std::filesystem::exists(::testing::TempDir() + "/stall_sleep/stall-rank1.json"));
}

// Rank 0's fourth message of step 1 (0SEND_F3) never leaves: rank 1 waits for it, rank 0 for 1SEND_B2 or later.
TEST(Stall, ALostMessageIsNamedWithItsSender) {
  const WorkerRun run = run_workers(worker_args("8000", {"--fault", "lose", "--fault-rank", "0", "--fault-step", "1",
                                                    "--fault-after-forwards", "4"}),
                              "lose");
  EXPECT_EQ(run.codes, (std::vector<int>{1, 1}));  // the waits still end with their timeout
  ASSERT_FALSE(run.report.is_null()) << run.errors[0];
  EXPECT_EQ(run.report["cause"], "lost_message") << run.report.dump(2);
  EXPECT_EQ(run.report["rank"], 0);
  EXPECT_EQ(run.report["action"], "0SEND_F3");
  EXPECT_NE(run.errors[0].find("rank 1 waits for 0SEND_F3 from rank 0"), std::string::npos) << run.errors[0];
  // Said before the timeout's errors.
  EXPECT_LT(run.errors[0].find("stall report"), run.errors[0].find("failed")) << run.errors[0];
}

// Rank 1 runs six micro-batches, rank 0 four: rank 0 ends its step, rank 1 waits for a fifth forward.
TEST(Stall, RanksRunningDifferentSchedulesAreNamed) {
  std::vector<std::string> args = worker_args("8000", {"--fault", "mismatch", "--fault-rank", "1"});
  args[3] = "1";  // one step
  const WorkerRun run = run_workers(args, "mismatch");
  EXPECT_NE(run.codes, (std::vector<int>{0, 0}));
  ASSERT_FALSE(run.report.is_null()) << run.errors[0];
  EXPECT_EQ(run.report["cause"], "schedule_mismatch") << run.report.dump(2);
  EXPECT_EQ(run.report["rank"], 1);
  const std::string headline = run.report["headline"];
  EXPECT_NE(headline.find("rank 0 runs 1f1b, 2 ranks, 4 micro-batches"), std::string::npos) << headline;
  EXPECT_NE(headline.find("rank 1 runs 1f1b, 2 ranks, 6 micro-batches"), std::string::npos) << headline;
  EXPECT_NE(headline.find("rank 1 waits for 0SEND_F4 from rank 0"), std::string::npos) << headline;
}

// SIGUSR1 to every rank asks for a report while nothing stalls, and the job goes on.
TEST(Stall, SigusrOneAsksForAReportWithoutStoppingTheJob) {
  const WorkerRun run = run_workers({"--kind", "1f1b", "--steps", "3", "--timeout-ms", "30000", "--fault", "sleep",
                               "--fault-rank", "1", "--fault-step", "1", "--fault-seconds", "4"},
                              "sigusr1", 60, [](const std::vector<pid_t>& pids) {
                                // The pid files come after the handler is installed.
                                const std::string dir = ::testing::TempDir() + "/stall_sigusr1/";
                                const auto limit = Clock::now() + std::chrono::seconds(30);
                                while ((!std::filesystem::exists(dir + "rank0.pid") ||
                                        !std::filesystem::exists(dir + "rank1.pid")) &&
                                       Clock::now() < limit)
                                  std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                std::this_thread::sleep_for(std::chrono::seconds(2));
                                for (pid_t p : pids) ::kill(p, SIGUSR1);
                              });
  ASSERT_EQ(run.codes, (std::vector<int>{0, 0})) << run.errors[0] << run.errors[1];
  ASSERT_FALSE(run.report.is_null()) << run.errors[0];
  EXPECT_EQ(run.report["ranks"].size(), 2u);
  EXPECT_NE(run.errors[0].find("stall report"), std::string::npos);
}

}  // namespace
