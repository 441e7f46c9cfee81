// `dualpipe train` run for real (four local processes, as the README's first command does) and `dualpipe
// compare` on the trace it writes and on a synthetic trace with known numbers. Every run goes through
// `timeout`, which stops the launcher (and with it every rank) if a run ever hangs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/trace/trace.h"
#include "cli/run_command.h"
#include "cli/train_fixture.h"

namespace {

using namespace dualpipe;
using namespace dualpipe::test;

// Every rank recorded every action of its lowered list (compute and messages) in every step.
void expect_complete_trace(const Trace& trace, const std::string& kind, int ranks, int microbatches, int steps) {
  ScheduleOptions options;
  options.num_ranks = ranks;
  options.num_microbatches = microbatches;
  const Schedule lowered = lower_communication(make_schedule(kind, options));
  EXPECT_EQ(trace.kind, kind);
  EXPECT_EQ(trace.num_ranks, ranks);
  std::vector<int> expected_steps;
  for (int s = 1; s <= steps; ++s) expected_steps.push_back(s);  // numbered as train prints them
  EXPECT_EQ(trace.steps(), expected_steps);
  for (int step = 1; step <= steps; ++step)
    for (int r = 0; r < ranks; ++r) {
      std::set<int> indices;
      for (const TraceEvent& e : trace.events) {
        if (e.rank != r || e.step != step) continue;
        EXPECT_TRUE(indices.insert(e.index).second) << "rank " << r << " step " << step << " index " << e.index;
        ASSERT_LT(e.index, static_cast<int>(lowered.actions[r].size()));
        EXPECT_EQ(to_string(e.action), to_string(lowered.actions[r][e.index]));
      }
      EXPECT_EQ(indices.size(), lowered.actions[r].size()) << "rank " << r << " step " << step;
    }
}

TEST_F(Train, DualPipeLearnsTheCorpusMatchesTheReferenceAndWritesMetricsTraceAndSample) {
  const std::string trace = path("t.json"), metrics = path("m.jsonl");
  const CommandResult run = dualpipe_cmd(kSmall + "--steps 12 --lr 0.01 --trace " + trace + " --metrics " + metrics, 120);
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "schedule dualpipe on 4 ranks")) << run.out;
  EXPECT_TRUE(contains(run.out, "corpus: fortunes")) << run.out;
  EXPECT_TRUE(contains(run.out, "step matches the single-process reference: 8 losses bit-identical")) << run.out;
  EXPECT_TRUE(contains(run.out, "replicas identical: all")) << run.out;
  EXPECT_TRUE(contains(run.out, "sample (8 bytes after the prompt")) << run.out;
  expect_complete_trace(read_trace(trace), "dualpipe", 4, 8, 12);

  const MetricsFile m = read_metrics(metrics);
  ASSERT_EQ(m.steps.size(), 12u);
  ASSERT_EQ(m.evals.size(), 4u);  // before step 1, after steps 4 and 8, after the last
  EXPECT_EQ(m.evals.front()["step"], 0);
  EXPECT_EQ(m.evals.back()["step"], 12);
  const double baseline = m.config["unigram_baseline"];
  // English bytes: between 3 and 5 nats of unigram entropy; an untrained model predicts ~ln 256 = 5.55.
  EXPECT_GT(baseline, 3.0);
  EXPECT_LT(baseline, 5.0);
  EXPECT_NEAR(m.evals.front()["val_loss"].get<double>(), std::log(256.0), 0.1);
  // This small model learns the byte frequencies within 12 steps (the default run goes below the baseline).
  EXPECT_LT(m.evals.back()["val_loss"].get<double>(), baseline + 1.0);
  for (const auto& s : m.steps) {
    for (const char* field : {"loss", "tokens_per_s", "step_ms", "lr", "grad_norm"})
      EXPECT_TRUE(s[field].is_number()) << field;
    EXPECT_EQ(s["peak_activation_bytes"].size(), 4u);
  }

  const CommandResult compare = dualpipe_cmd("compare --trace " + trace + " --format json");
  ASSERT_EQ(compare.status, 0) << compare.out;
  EXPECT_EQ(nlohmann::json::parse(compare.out)["step"], 12);  // the last of 12 steps, as train numbers them
}

// Issue 9's acceptance: every schedule trains the transformer for one step with the reference check passing.
TEST_F(Train, EveryScheduleTrainsOneStepMatchingTheReference) {
  for (const char* kind : {"gpipe", "1f1b", "interleaved-1f1b", "combined-1f1b", "zb-h1", "zb-h2", "zbv", "chimera",
                           "dualpipe", "dualpipev"}) {
    const CommandResult run = dualpipe_cmd(kSmall + "--steps 1 --sample-tokens 0 --schedule " + std::string(kind), 120);
    ASSERT_EQ(run.status, 0) << kind << "\n" << run.out;
    EXPECT_TRUE(contains(run.out, "schedule " + std::string(kind) + " on 4 ranks")) << run.out;
    EXPECT_TRUE(contains(run.out, "step matches the single-process reference")) << kind << "\n" << run.out;
  }
}

// Issue 12's loop: a schedule that `dualpipe plan` built for a memory limit trains through --schedule-file, the
// rank and micro-batch counts taken from the file.
TEST_F(Train, APlannedScheduleFileTrainsMatchingTheReference) {
  const std::string plan = path("plan.txt");
  const CommandResult planned = dualpipe_cmd("plan --ranks 4 --microbatches 8 --memory-limit 6 -f text -o " + plan);
  ASSERT_EQ(planned.status, 0) << planned.out;
  const CommandResult run = dualpipe_cmd(kSmall + "--steps 2 --sample-tokens 4 --ranks 2 --schedule-file " + plan, 120);
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "on 4 ranks")) << run.out;
  EXPECT_TRUE(contains(run.out, "step matches the single-process reference: 8 losses bit-identical")) << run.out;
}

std::vector<double> losses_of(const MetricsFile& m, int from_step) {
  std::vector<double> out;
  for (const auto& s : m.steps)
    if (s["step"].get<int>() >= from_step) out.push_back(s["loss"].get<double>());
  return out;
}

const std::string kCheckpointed = kSmall + "--schedule 1f1b --steps 8 --eval-every 0 --sample-tokens 0 ";

TEST_F(Train, ResumingFromACopyOfStep4GivesBitIdenticalSteps5To8) {
  const CommandResult first =
      dualpipe_cmd(kCheckpointed + "--checkpoint-dir " + path("a") + " --save-every 4 --metrics " + path("a.jsonl"), 120);
  ASSERT_EQ(first.status, 0) << first.out;
  ASSERT_TRUE(exists(path("a/step-4/manifest.json")));
  ASSERT_TRUE(exists(path("a/step-8/manifest.json")));
  test::run_command("mkdir -p '" + path("b") + "' && cp -r '" + path("a/step-4") + "' '" + path("b/") + "'");
  const CommandResult resumed =
      dualpipe_cmd(kCheckpointed + "--checkpoint-dir " + path("b") + " --resume --metrics " + path("b.jsonl"), 120);
  ASSERT_EQ(resumed.status, 0) << resumed.out;
  EXPECT_TRUE(contains(resumed.out, "resumed from " + path("b/step-4") + " after step 4")) << resumed.out;
  const std::vector<double> expected = losses_of(read_metrics(path("a.jsonl")), 5);
  ASSERT_EQ(expected.size(), 4u);
  EXPECT_EQ(losses_of(read_metrics(path("b.jsonl")), 1), expected);  // exact: full-precision JSON numbers
  EXPECT_EQ(read_metrics(path("b.jsonl")).evals.back()["val_loss"], read_metrics(path("a.jsonl")).evals.back()["val_loss"]);
}

TEST_F(Train, AKillWhileSavingLeavesThePreviousCheckpointResumable) {
  const std::string options = kCheckpointed + "--checkpoint-dir " + path("c") + " --save-every 2 ";
  const CommandResult killed = test::run_command("DUALPIPE_TEST_KILL_BEFORE_MANIFEST=6 timeout -k 5 120 " +
                                                 std::string(DUALPIPE_BIN) + " " + options + "--metrics " + path("k.jsonl"));
  ASSERT_NE(killed.status, 0) << killed.out;
  EXPECT_TRUE(exists(path("c/step-4/manifest.json")));
  EXPECT_TRUE(exists(path("c/step-6/stage-0.pt")));  // the shards were written ...
  EXPECT_FALSE(exists(path("c/step-6/manifest.json")));  // ... but not the manifest
  const CommandResult resumed = dualpipe_cmd(options + "--resume --metrics " + path("r.jsonl"), 120);
  ASSERT_EQ(resumed.status, 0) << resumed.out;
  EXPECT_TRUE(contains(resumed.out, "skipping incomplete checkpoint " + path("c/step-6"))) << resumed.out;
  EXPECT_TRUE(contains(resumed.out, "resumed from " + path("c/step-4"))) << resumed.out;
  // Steps 5 and 6 ran before the kill: the resumed run repeats them bit for bit.
  const auto before = losses_of(read_metrics(path("k.jsonl")), 5), after = losses_of(read_metrics(path("r.jsonl")), 1);
  ASSERT_GE(before.size(), 2u);
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(after[0], before[0]);
  EXPECT_EQ(after[1], before[1]);
}

TEST_F(Train, MismatchedOrCorruptedCheckpointsAreRefused) {
  const std::string dir = path("d");
  ASSERT_EQ(dualpipe_cmd(kCheckpointed + "--steps 2 --checkpoint-dir " + dir, 120).status, 0);
  const CommandResult other_width = dualpipe_cmd(kCheckpointed + "--hidden 64 --checkpoint-dir " + dir + " --resume");
  EXPECT_EQ(other_width.status, 2) << other_width.out;
  EXPECT_TRUE(contains(other_width.out, "was written with --hidden 32, this run has 64")) << other_width.out;
  const CommandResult other_heads = dualpipe_cmd(kCheckpointed + "--heads 4 --checkpoint-dir " + dir + " --resume");
  EXPECT_EQ(other_heads.status, 2) << other_heads.out;
  EXPECT_TRUE(contains(other_heads.out, "was written with --heads 2, this run has 4")) << other_heads.out;

  const std::string shard = dir + "/step-2/stage-1.pt";
  std::string bytes = read_file(shard);
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(shard, std::ios::binary | std::ios::trunc) << bytes;
  const CommandResult flipped = dualpipe_cmd(kCheckpointed + "--checkpoint-dir " + dir + " --resume");
  EXPECT_EQ(flipped.status, 2) << flipped.out;
  EXPECT_TRUE(contains(flipped.out, "stage-1.pt is corrupted: checksum")) << flipped.out;
  bytes.resize(bytes.size() - 100);
  std::ofstream(shard, std::ios::binary | std::ios::trunc) << bytes;
  const CommandResult truncated = dualpipe_cmd(kCheckpointed + "--checkpoint-dir " + dir + " --resume");
  EXPECT_EQ(truncated.status, 2) << truncated.out;
  EXPECT_TRUE(contains(truncated.out, "(truncated or replaced)")) << truncated.out;
}

TEST_F(Train, RecomputationGivesTheSameLossesWithFewerActivationBytes) {
  const std::string options = kSmall + "--schedule gpipe --steps 2 --eval-every 0 --sample-tokens 0 --metrics ";
  ASSERT_EQ(dualpipe_cmd(options + path("plain.jsonl"), 120).status, 0);
  const CommandResult recomputed = dualpipe_cmd(options + path("re.jsonl") + " --recompute", 120);
  ASSERT_EQ(recomputed.status, 0) << recomputed.out;
  const MetricsFile plain = read_metrics(path("plain.jsonl")), re = read_metrics(path("re.jsonl"));
  EXPECT_EQ(losses_of(re, 1), losses_of(plain, 1));
  EXPECT_EQ(re.evals.back()["val_loss"], plain.evals.back()["val_loss"]);
  for (int r = 0; r < 4; ++r)
    EXPECT_LT(re.steps[0]["peak_activation_bytes"][r].get<double>(),
              plain.steps[0]["peak_activation_bytes"][r].get<double>())
        << "rank " << r;
}

TEST_F(Train, BadInputIsRefusedBeforeAnyProcessStartsAndNothingIsOverwritten) {
  const std::string empty = path("empty.txt"), binary = path("binary.bin"), tiny = path("tiny.txt"),
                    not_dir = path("file"), metrics = path("keep.jsonl");
  std::ofstream(empty).flush();
  std::ofstream(binary, std::ios::binary) << std::string("text\0\1\2\3 more", 14);
  std::ofstream(tiny) << "A short text of a few dozen bytes, nothing more.\n";
  std::ofstream(not_dir) << "a file";
  std::ofstream(metrics) << "precious\n";
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--data /nonexistent/corpus.txt", "/nonexistent/corpus.txt"},
      {"--data " + empty, empty},
      {"--data " + binary, binary},
      {"--data " + tiny + " --seq-len 200", "--seq-len"},
      {"--layers-per-stage 1,1,1,1", "adds up to 4 layers, but --layers is 12"},
      {"--layers 3", "--layers 3 is fewer than the 4 stages of dualpipe on 4 ranks"},
      {"--checkpoint-dir " + not_dir, "is a file, not a directory"},
      {"--heads 5", "--heads 5 must divide --hidden 32"},
      {"--microbatches 6", "DualPipe needs"},
      {"--steps 0", "--steps must be between 1"},
      {"--schedule nope", "nope"},
      {"--trace /nonexistent/dir/t.json", "--trace '/nonexistent/dir/t.json': the folder /nonexistent/dir does not exist"},
  };
  for (const Case& c : cases) {
    std::string args = kSmall + c.args + " --metrics " + metrics;
    if (contains(c.args, "--layers-per-stage")) args += " --layers 12";
    const CommandResult run = dualpipe_cmd(args);
    EXPECT_EQ(run.status, 2) << c.args << "\n" << run.out;
    EXPECT_TRUE(contains(run.out, c.message)) << c.args << "\n" << run.out;
    EXPECT_FALSE(contains(run.out, "[rank")) << c.args << "\n" << run.out;
    EXPECT_EQ(read_file(metrics), "precious\n") << c.args;
  }
  EXPECT_EQ(read_file(not_dir), "a file");
}

// Issue 10, item 5: a rendezvous that cannot complete names the ranks that never arrived, or the rank started with
// another WORLD_SIZE, within the timeout.
TEST_F(Train, WorkerWithoutTheLaunchEnvironmentSaysWhatIsMissing) {
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}) unsetenv(name);
  const CommandResult run = dualpipe_cmd(kSmall + "--worker --steps 1", 30);
  EXPECT_EQ(run.status, 2) << run.out;
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
  EXPECT_TRUE(contains(missing.out, "trace file '/nonexistent/trace.json' does not exist")) << missing.out;
}

}  // namespace
