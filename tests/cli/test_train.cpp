// `dualpipe train` run for real (four local processes, as the README's first command does) and `dualpipe
// compare` on the trace it writes and on a synthetic trace with known numbers. Every run goes through
// `timeout`, which stops the launcher (and with it every rank) if a run ever hangs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "dualpipe/generators.h"
#include "dualpipe/lower.h"
#include "dualpipe/simulate.h"
#include "dualpipe/trace.h"
#include "cli/run_command.h"

namespace {

using namespace dualpipe;

using test::CommandResult;

CommandResult dualpipe_cmd(const std::string& args, int limit_seconds = 60) {
  return test::run_command("timeout -k 5 " + std::to_string(limit_seconds) + " " + std::string(DUALPIPE_BIN) + " " +
                           args);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The losses of the per-step table ("[rank 0]     3    0.864001      48.36    87.4%"), in step order.
std::vector<double> step_losses(const std::string& out) {
  std::vector<double> losses;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    const std::string prefix = "[rank 0] ";
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream fields(line.substr(prefix.size()));
    int step = 0;
    double loss = 0, ms = 0;
    std::string bubble;
    if (fields >> step >> loss >> ms >> bubble && bubble.back() == '%' && step == static_cast<int>(losses.size()) + 1)
      losses.push_back(loss);
  }
  return losses;
}

class Train : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef DUALPIPE_HAS_RUNTIME
    GTEST_SKIP() << "dualpipe was built without the LibTorch runtime (DUALPIPE_WITH_TORCH=OFF)";
#endif
    dir_ = ::testing::TempDir() + "dualpipe_train_" + std::to_string(::getpid()) + "_";
  }
  void TearDown() override {
    for (const auto& f : files_) std::remove(f.c_str());
  }
  std::string file(const std::string& name) {
    files_.push_back(dir_ + name);
    return files_.back();
  }

  std::string dir_;
  std::vector<std::string> files_;
};

// Every rank recorded every action of its lowered list (compute and messages) in every step.
void expect_complete_trace(const Trace& trace, const std::string& kind, int ranks, int microbatches, int steps) {
  ScheduleOptions options;
  options.num_ranks = ranks;
  options.num_microbatches = microbatches;
  const Schedule lowered = lower_communication(make_schedule(kind, options));
  EXPECT_EQ(trace.kind, kind);
  EXPECT_EQ(trace.num_ranks, ranks);
  std::vector<int> expected_steps;
  for (int s = 0; s < steps; ++s) expected_steps.push_back(s);
  EXPECT_EQ(trace.steps(), expected_steps);
  for (int step = 0; step < steps; ++step)
    for (int r = 0; r < ranks; ++r) {
      std::set<int> indices;
      bool compute = false, comm = false;
      for (const TraceEvent& e : trace.events) {
        if (e.rank != r || e.step != step) continue;
        EXPECT_TRUE(indices.insert(e.index).second) << "rank " << r << " step " << step << " index " << e.index;
        ASSERT_LT(e.index, static_cast<int>(lowered.actions[r].size()));
        EXPECT_EQ(to_string(e.action), to_string(lowered.actions[r][e.index]));
        EXPECT_GE(e.duration, 0);
        (e.action.is_compute() ? compute : comm) = true;
      }
      EXPECT_EQ(indices.size(), lowered.actions[r].size()) << "rank " << r << " step " << step;
      EXPECT_TRUE(compute && comm) << "rank " << r << " step " << step;
    }
}

TEST_F(Train, DefaultScheduleMatchesTheReferenceLearnsKeepsReplicasAndWritesTheTrace) {
  const std::string trace_path = file("dualpipe.json");
  const CommandResult run = dualpipe_cmd("train --steps 8 --hidden 16 --trace " + trace_path);
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "dualpipe train: dualpipe schedule on 4 ranks")) << run.out;
  EXPECT_TRUE(contains(run.out, "step 1 matches the single-process reference: 8 losses bit-identical")) << run.out;
  EXPECT_TRUE(contains(run.out, "replicas identical: all 16 parameter tensors bit-identical")) << run.out;
  EXPECT_TRUE(contains(run.out, "trace: " + trace_path)) << run.out;
  // The data and the weights come from the seed, so the losses are the same every run: this is not luck.
  const std::vector<double> losses = step_losses(run.out);
  ASSERT_EQ(losses.size(), 8u) << run.out;
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << run.out;
  expect_complete_trace(read_trace(trace_path), "dualpipe", 4, 8, 8);

  // The comparison with the plan reads the same trace.
  const CommandResult compare = dualpipe_cmd("compare --trace " + trace_path + " --format json");
  ASSERT_EQ(compare.status, 0) << compare.out;
  const auto j = nlohmann::json::parse(compare.out);
  EXPECT_EQ(j["step"], 7);
  for (const char* side : {"measured", "plan"}) {
    ASSERT_EQ(j[side]["per_rank"].size(), 4u) << side;
    EXPECT_GT(j[side]["makespan"].get<double>(), 0) << side;
    for (const auto& r : j[side]["per_rank"]) EXPECT_GT(r["busy"].get<double>(), 0) << side;
  }
  const CommandResult table = dualpipe_cmd("compare --trace " + trace_path + " --step 0");
  ASSERT_EQ(table.status, 0) << table.out;
  EXPECT_TRUE(contains(table.out, "dualpipe: R=4 ranks, S=4 stages, M=8 micro-batches; step 0")) << table.out;
  EXPECT_TRUE(contains(table.out, "makespan us")) << table.out;
}

// Another schedule on the same model: one direction, one copy of every stage (1F1B: S = R; ZBV: S = 2R).
void check_other_schedule(const std::string& kind, const std::string& trace_path) {
  const CommandResult run = dualpipe_cmd("train --schedule " + kind + " --steps 2 --hidden 16 --trace " + trace_path);
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "dualpipe train: " + kind + " schedule on 4 ranks")) << run.out;
  EXPECT_TRUE(contains(run.out, "step 1 matches the single-process reference")) << run.out;
  EXPECT_TRUE(contains(run.out, "replicas: one copy of every stage under " + kind)) << run.out;
  expect_complete_trace(read_trace(trace_path), kind, 4, 8, 2);
}

TEST_F(Train, ZbvTrainsTheSameModel) { check_other_schedule("zbv", file("zbv.json")); }
TEST_F(Train, OneFOneBTrainsTheSameModel) { check_other_schedule("1f1b", file("1f1b.json")); }

TEST_F(Train, BadOptionsAreRefusedBeforeAnyProcessStarts) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"train --layers 6", "--layers 6 does not split into the 4 stages of dualpipe with 4 ranks"},
      {"train --microbatches 6", "DualPipe needs"},
      {"train --steps 0", "--steps must be at least 1, got 0"},
      {"train --schedule nope", "nope"},
      {"train --optimizer lbfgs", "lbfgs"},
  };
  for (const Case& c : cases) {
    const CommandResult run = dualpipe_cmd(c.args);
    EXPECT_EQ(run.status, 2) << c.args << "\n" << run.out;
    EXPECT_TRUE(contains(run.out, c.message)) << c.args << "\n" << run.out;
    EXPECT_FALSE(contains(run.out, "[rank")) << c.args << "\n" << run.out;
  }
}

TEST_F(Train, WorkerWithoutTheLaunchEnvironmentSaysWhatIsMissing) {
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}) unsetenv(name);
  const CommandResult run = dualpipe_cmd("train --worker --steps 1", 30);
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_TRUE(contains(run.out, "dualpipe train: rank ?: ")) << run.out;
  EXPECT_TRUE(contains(run.out, "MASTER_ADDR")) << run.out;
}

// A trace that went exactly as planned (trace_from_simulation): the fitted costs reproduce the plan, so both
// columns carry the same, known numbers (1F1B, F=1, B=2 at 100 us per unit: makespan (M+S-1)(F+B) = 3300 us,
// busy M(F+B) = 2400 us on every rank, bubble 900 us).
TEST(Compare, TraceThatWentAsPlannedMatchesThePlanExactly) {
  const std::string path = ::testing::TempDir() + "dualpipe_compare_" + std::to_string(::getpid()) + ".json";
  const Schedule schedule = make_schedule("1f1b", {4, 8, 0});
  CostModel costs;
  costs.forward = 1;
  costs.backward = 2;
  write_trace_file(path, trace_from_simulation(schedule, simulate(schedule, costs), 100.0, 3));
  const CommandResult run = dualpipe_cmd("compare --trace " + path + " --format json");
  std::remove(path.c_str());
  ASSERT_EQ(run.status, 0) << run.out;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["step"], 3);
  for (const char* side : {"measured", "plan"}) {
    EXPECT_NEAR(j[side]["makespan"].get<double>(), 3300.0, 1e-6) << side;
    EXPECT_NEAR(j[side]["bubble"].get<double>(), 900.0, 1e-6) << side;
    for (const auto& r : j[side]["per_rank"]) {
      EXPECT_NEAR(r["busy"].get<double>(), 2400.0, 1e-6) << side;
      EXPECT_NEAR(r["idle"].get<double>(), 900.0, 1e-6) << side;
    }
  }
  for (int r = 0; r < 4; ++r)
    EXPECT_NEAR(j["measured"]["per_rank"][r]["span"].get<double>(), j["plan"]["per_rank"][r]["span"].get<double>(),
                1e-6);
}

TEST(Compare, MissingStepAndMissingFileAreNamed) {
  const std::string path = ::testing::TempDir() + "dualpipe_compare_steps_" + std::to_string(::getpid()) + ".json";
  const Schedule schedule = make_schedule("gpipe", {2, 2, 0});
  write_trace_file(path, trace_from_simulation(schedule, simulate(schedule, CostModel{}), 10.0, 0));
  const CommandResult run = dualpipe_cmd("compare --trace " + path + " --step 5");
  std::remove(path.c_str());
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_TRUE(contains(run.out, "has no step 5 (steps recorded: 0)")) << run.out;
  const CommandResult missing = dualpipe_cmd("compare --trace /nonexistent/trace.json");
  EXPECT_EQ(missing.status, 2) << missing.out;
  EXPECT_TRUE(contains(missing.out, "cannot open trace file '/nonexistent/trace.json'")) << missing.out;
}

}  // namespace
