// `dualpipe train --max-restarts`: ranks killed twice, at different steps, by the launcher's restart policy and
// the trainer's resume from the newest complete checkpoint. The reference is the same run without kills: every
// step's loss, learning rate and gradient norm, and the bytes of every checkpoint, must be identical.
#include <gtest/gtest.h>

#include <string>

#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

// 1F1B on 4 ranks, 10 steps, a checkpoint every 3 (steps 3, 6, 9 and the last, 10).
const std::string kRun = kSmall + "--schedule 1f1b --steps 10 --eval-every 0 --sample-tokens 0 --save-every 3 ";

TEST_F(Train, RanksKilledTwiceRestartFromTheNewestCheckpointAndFinishLikeAnUninterruptedRun) {
  const CommandResult reference =
      dualpipe_cmd(kRun + "--checkpoint-dir " + path("ref") + " --metrics " + path("ref.jsonl"), 180);
  ASSERT_EQ(reference.status, 0) << reference.out;

  // Attempt 0: rank 2 dies after step 5 (checkpoint 3 is the newest). Attempt 1 resumes after step 3 and rank 1
  // dies after step 8 (checkpoint 6). Attempt 2 resumes after step 6 and finishes.
  const CommandResult restarted = run_command(
      "DUALPIPE_TEST_KILL_AT=0:2:5,1:1:8 timeout -k 5 300 " + std::string(DUALPIPE_BIN) + " " + kRun +
      "--max-restarts 2 --checkpoint-dir " + path("run") + " --metrics " + path("run.jsonl"));
  ASSERT_EQ(restarted.status, 0) << restarted.out;
  EXPECT_TRUE(contains(restarted.out, "dualpipe launch: restart 1 of 2: rank 2 was killed by signal 9 (SIGKILL); "
                                      "starting all 4 ranks again")) << restarted.out;
  EXPECT_TRUE(contains(restarted.out, "dualpipe launch: restart 2 of 2: rank 1 was killed by signal 9 (SIGKILL); "
                                      "starting all 4 ranks again")) << restarted.out;
  EXPECT_TRUE(contains(restarted.out, "resumed from " + path("run/step-3") + " after step 3")) << restarted.out;
  EXPECT_TRUE(contains(restarted.out, "resumed from " + path("run/step-6") + " after step 6")) << restarted.out;

  // The metrics file reads as one run: steps 1 to 10, once each, bit-identical to the reference.
  const MetricsFile expected = read_metrics(path("ref.jsonl")), got = read_metrics(path("run.jsonl"));
  ASSERT_EQ(expected.steps.size(), 10u);
  ASSERT_EQ(got.steps.size(), expected.steps.size());
  for (std::size_t i = 0; i < expected.steps.size(); ++i) {
    for (const char* field : {"step", "loss", "lr", "grad_norm"})
      EXPECT_EQ(got.steps[i][field], expected.steps[i][field]) << field << " of step " << i + 1;
  }
  EXPECT_EQ(got.evals.back()["val_loss"], expected.evals.back()["val_loss"]);

  // Every checkpoint, the final parameters and optimizer state included, is byte for byte the reference's.
  for (const char* step : {"step-3", "step-6", "step-9", "step-10"}) {
    for (int stage = 0; stage < 4; ++stage) {
      const std::string shard = std::string(step) + "/stage-" + std::to_string(stage) + ".pt";
      const std::string bytes = read_file(path("run/" + shard));
      ASSERT_FALSE(bytes.empty()) << shard;
      EXPECT_TRUE(bytes == read_file(path("ref/" + shard))) << shard << " differs from the uninterrupted run's";
    }
    EXPECT_TRUE(exists(path(std::string("run/") + step + "/manifest.json"))) << step;
  }
}

}  // namespace
