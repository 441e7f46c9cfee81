// `dualpipe train`'s straggler watch on the emulated device (docs/train.md, "Stragglers"): a rank slowed on purpose
// (--emulate-slow-rank) is named within --straggler-steps steps of its start, no rank is named in runs without one,
// and --on-straggler replan restarts the ranks with the new cut from the checkpoint, losing and repeating no step,
// with the losses of a run that used the new cut from the start, resumed from the same checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/run_command.h"
#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

// 16 MoE layers on 4 ranks; per stage of the balanced cut F 16 ms, B 32 ms, W 16 ms (well above what the host
// itself spends on a stage, so that the emulated device sets the pace).
const std::string kJob =
    "train --layers 16 --hidden 32 --heads 2 --seq-len 16 --batch 1 --experts 2 --top-k 1 --ranks 4 -m 8 "
    "--warmup 1 --eval-every 0 --sample-tokens 0 --trace '' --emulate-device F=16,B=32,W=16 ";

class Stragglers : public Train, public ::testing::WithParamInterface<const char*> {};

TEST_P(Stragglers, ASlowRankIsNamedWithinFiveStepsOfItsStart) {
  const std::string kind = GetParam();
  const CommandResult run = dualpipe_cmd(
      kJob + "--kind " + kind + " --steps 10 --emulate-slow-rank 2=1.5@3 --metrics " + path("run.jsonl"), 120);
  ASSERT_EQ(run.status, 0) << run.out;
  const MetricsFile m = read_metrics(path("run.jsonl"));
  ASSERT_EQ(m.stragglers.size(), 1u) << run.out;
  const nlohmann::json& s = m.stragglers[0];
  EXPECT_EQ(s["rank"], 2) << kind;
  EXPECT_GE(s["since_step"].get<int>(), 3) << kind;
  EXPECT_LE(s["step"].get<int>() - 3 + 1, 5) << kind << ": named at step " << s["step"];
  EXPECT_GT(s["slowdown"].get<double>(), 1.15) << kind;
  EXPECT_TRUE(contains(run.out, "straggler: pipeline rank 2 at")) << run.out;
  EXPECT_TRUE(contains(run.out, "to apply it: dualpipe train")) << run.out;  // --on-straggler report
}

std::string kind_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Schedules, Stragglers, ::testing::Values("1f1b", "dualpipe", "dualpipev"), kind_name);

// 20 steps of every schedule kind, nothing slowed: nobody is named.
class NoStraggler : public Train, public ::testing::WithParamInterface<const char*> {};

TEST_P(NoStraggler, IsNamedInTwentySteps) {
  const std::string kind = GetParam();
  const CommandResult run =
      dualpipe_cmd(kJob + "--kind " + kind + " --steps 20 --metrics " + path("run.jsonl"), 180);
  ASSERT_EQ(run.status, 0) << run.out;
  const MetricsFile m = read_metrics(path("run.jsonl"));
  EXPECT_EQ(m.steps.size(), 20u);
  EXPECT_TRUE(m.stragglers.empty()) << kind << ": " << m.stragglers[0].dump();
}

INSTANTIATE_TEST_SUITE_P(Schedules, NoStraggler,
                         ::testing::Values("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "dualpipe",
                                           "dualpipev", "chimera"),
                         kind_name);

// --on-straggler replan: named at step 3 (slowed from 2, two steps in a row), checkpointed, restarted re-planned.
TEST_F(Train, AReplanContinuesFromItsCheckpointLikeARunWithTheNewCut) {
  const std::string job = kJob + "--kind dualpipe --steps 8 --emulate-slow-rank 2=1.5@2 --straggler-steps 2 ";
  const CommandResult run = dualpipe_cmd(job + "--on-straggler replan --checkpoint-dir " + path("ckpt") +
                                             " --metrics " + path("replanned.jsonl"),
                                         180);
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "re-planned after step 3")) << run.out;
  const MetricsFile a = read_metrics(path("replanned.jsonl"));
  ASSERT_EQ(a.replans.size(), 1u) << run.out;
  // No step lost or repeated.
  ASSERT_EQ(a.steps.size(), 8u) << run.out;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a.steps[i]["step"], i + 1);
  const nlohmann::json& replan = a.replans[0];
  EXPECT_EQ(replan["step"], 3);
  // The other run: from the same checkpoint (step 3 alone), the new cut and schedule from its start.
  namespace fs = std::filesystem;
  fs::create_directories(path("same"));
  fs::copy(path("ckpt") + "/step-3", path("same") + "/step-3", fs::copy_options::recursive);
  std::string speeds;
  for (const auto& s : replan["rank_speed"]) speeds += (speeds.empty() ? "" : ",") + std::to_string(s.get<double>());
  const CommandResult fresh = dualpipe_cmd(
      kJob + "--kind " + replan["schedule"].get<std::string>() + " --layers-per-stage " +
          replan["layers_per_stage"].get<std::string>() + " --steps 8 --emulate-slow-rank 2=1.5@2 --rank-speed " +
          speeds + " --checkpoint-dir " + path("same") + " --resume --metrics " + path("fresh.jsonl"),
      180);
  ASSERT_EQ(fresh.status, 0) << fresh.out;
  const MetricsFile b = read_metrics(path("fresh.jsonl"));  // steps 4 to 8 (its file began at the resume)
  ASSERT_EQ(b.steps.size(), 5u) << fresh.out;
  for (int i = 0; i < 5; ++i) {  // bit for bit: a pipeline alone, the same sums in the same order
    ASSERT_EQ(b.steps[i]["step"], i + 4);
    EXPECT_EQ(a.steps[i + 3]["loss"], b.steps[i]["loss"]) << "step " << i + 4;
    EXPECT_EQ(a.steps[i + 3]["grad_norm"], b.steps[i]["grad_norm"]) << "step " << i + 4;
  }
}

// Named at the last step (slowed from 2, two steps in a row, 3 steps): nothing is left to re-plan, so the run says
// so, ends normally and the printed command, for a next run, reads back in a shell (`--trace ''`, not `--trace`).
TEST_F(Train, AStragglerFoundAtTheLastStepIsNotAppliedAndItsCommandIsShellQuoted) {
  const CommandResult run = dualpipe_cmd(kJob + "--kind dualpipe --steps 3 --emulate-slow-rank 2=1.5@2 "
                                                "--straggler-steps 2 --on-straggler replan --checkpoint-dir " +
                                             path("ckpt") + " --metrics " + path("run.jsonl"),
                                         180);
  ASSERT_EQ(run.status, 0) << run.out;
  const MetricsFile m = read_metrics(path("run.jsonl"));
  ASSERT_EQ(m.stragglers.size(), 1u) << run.out;
  EXPECT_EQ(m.stragglers[0]["step"], 3);
  EXPECT_EQ(m.stragglers[0]["replan"]["applied"], false);
  EXPECT_TRUE(m.replans.empty()) << run.out;
  EXPECT_EQ(m.steps.size(), 3u);
  EXPECT_TRUE(contains(run.out, "not applied: found at the last step (3)")) << run.out;
  EXPECT_FALSE(contains(run.out, "applying it after this step")) << run.out;
  EXPECT_TRUE(contains(m.stragglers[0]["replan"]["command"].get<std::string>(), "--trace ''")) << run.out;
}

// A re-plan request that fits the model, put into the checkpoint directory while the ranks run (no straggler): the
// launcher read it at the normal end and restarted the ranks re-planned. Only the ranks' own request is taken.
TEST_F(Train, AReplanRequestPutThereDuringTheRunIsNotTakenForTheRanks) {
  const std::string log = path("run.log"), request = path("ckpt") + "/replan.json";
  const CommandResult run = run_command(
      "timeout -k 5 180 " + std::string(DUALPIPE_BIN) + " " + kJob +
      "--kind dualpipe --steps 4 --on-straggler replan --checkpoint-dir " + path("ckpt") + " > " + log +
      " 2>&1 & P=$!; for i in $(seq 600); do grep -q '^\\[rank 0\\]' " + log + " && break; sleep 0.1; done; " +
      "echo '{\"step\": 1, \"schedule\": \"1f1b\", \"stages_per_rank\": 1, \"layers_per_stage\": [4, 4, 4, 4], "
      "\"rank_speed\": [1, 1, 1, 1], \"current_ms\": 10, \"predicted_ms\": 5}' > " + request +
      "; wait $P; echo \"exit $?\"; cat " + log);
  EXPECT_TRUE(contains(run.out, "exit 0")) << run.out;
  EXPECT_TRUE(contains(run.out, "dualpipe train: ignored " + request + ": not written by this job's ranks")) << run.out;
  EXPECT_FALSE(contains(run.out, "re-planned after step")) << run.out;
}

TEST_F(Train, StragglerOptionsAreRefusedBeforeAnyRankStarts) {
  expect_each_refused_before_any_rank_starts(
      kJob + "--steps 2 ",
      {{"--on-straggler replan", "--on-straggler replan needs --checkpoint-dir DIR"},
       {"--on-straggler retry", "--on-straggler must be report or replan, got 'retry'"},
       {"--straggler-threshold 0.9", "--straggler-threshold must be above 1"},
       {"--straggler-steps 0", "--straggler-steps must be between 1 and 100000"},
       {"--rank-speed 1,1,1", "--rank-speed '1,1,1' has 3 values for --ranks 4"},
       {"--emulate-slow-rank 4=1.5", "--emulate-slow-rank '4=1.5': RANK must be a pipeline rank, 0 to 3"},
       {"--emulate-slow-rank 1=0.5@2", "FACTOR must be between 1 and 100"}});
}

}  // namespace
