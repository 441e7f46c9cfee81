// `dualpipe train --zero1`: ZeRO-1, the AdamW state sharded over the data-parallel replicas. The reference is the
// same run without --zero1: each tensor's update is the same arithmetic on the same operands, run on one replica
// instead of on all, so every loss and gradient norm must be equal bit for bit, while each rank holds about 1/D of
// the optimizer state. Checkpoints hold the whole state either way: a sharded run resumes from its own checkpoint
// and an unsharded run from it, bit for bit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

const std::string kZeroOneJob = kSmall + "--eval-every 0 --sample-tokens 0 --steps 4 ";

// Runs `layout` with and without --zero1 and compares them; `replicas` is the number the state is sharded over.
void expect_zero1_like_unsharded(const std::string& layout, int replicas, const std::string& dir) {
  const CommandResult sharded = dualpipe_cmd(kZeroOneJob + layout + " --zero1 --metrics " + dir + "/zero1.jsonl", 240);
  ASSERT_EQ(sharded.status, 0) << layout << "\n" << sharded.out;
  EXPECT_TRUE(contains(sharded.out, "(ZeRO-1: sharded over the ")) << sharded.out;
  EXPECT_TRUE(contains(sharded.out, "bit-identical in all ")) << sharded.out;  // the replicas' parameters
  const CommandResult whole = dualpipe_cmd(kZeroOneJob + layout + " --metrics " + dir + "/whole.jsonl", 240);
  ASSERT_EQ(whole.status, 0) << layout << "\n" << whole.out;
  const MetricsFile got = read_metrics(dir + "/zero1.jsonl"), expected = read_metrics(dir + "/whole.jsonl");
  ASSERT_EQ(got.steps.size(), 4u);
  ASSERT_EQ(expected.steps.size(), 4u);
  expect_steps_identical(got, expected, 0, layout);
  // Each pipeline rank of replica 0 holds its share: about 1/D of the whole (whole tensors are dealt, so not
  // exactly), and never nothing.
  const std::vector<double> share = got.steps.back()["optimizer_state_bytes"],
                            all = expected.steps.back()["optimizer_state_bytes"];
  ASSERT_EQ(share.size(), all.size());
  for (std::size_t r = 0; r < share.size(); ++r) {
    EXPECT_GT(share[r], 0) << layout << " rank " << r;
    EXPECT_LE(share[r] * replicas, 1.25 * all[r]) << layout << " rank " << r << ": " << share[r] << " of " << all[r];
  }
}

TEST_F(Train, ZeroOneShardsTheOptimizerStateAndTrainsBitForBitLikeTheWholeState) {
  expect_zero1_like_unsharded("--schedule dualpipe --pp 2 --dp 2 -m 4", 2, dir_);
  expect_zero1_like_unsharded("--schedule 1f1b --pp 2 --dp 4 -m 4", 4, dir_);
  // Dense tensors over the 4 replicas, experts over the 2 that hold the same ones.
  expect_zero1_like_unsharded("--schedule dualpipev --pp 2 --dp 4 --ep 2 --experts 4 -m 4", 2, dir_);
}

TEST_F(Train, ZeroOneCheckpointsHoldTheWholeStateAndResumeBitForBitShardedOrNot) {
  const std::string job = kZeroOneJob + "--schedule dualpipe --pp 2 --dp 2 -m 4 ";
  const MetricsFile whole = train_saving_every_two_steps(job + "--zero1", "a", 180);
  ASSERT_EQ(whole.steps.size(), 4u);
  for (const std::string flag : {"--zero1", ""}) {
    const MetricsFile rest = resume_from_step_two(job + flag, path("a"), flag.empty() ? "unsharded" : "sharded", 180);
    ASSERT_EQ(rest.steps.size(), 2u);
    expect_steps_identical(rest, whole, 2, std::string("resumed ") + (flag.empty() ? "without" : "with") + " --zero1,");
  }
}

TEST_F(Train, ZeroOneWithoutDataParallelReplicasIsRefused) {
  const CommandResult run = dualpipe_cmd(kZeroOneJob + "--zero1");
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_TRUE(contains(run.out, "--zero 1 needs --dp above 1, got --dp 1")) << run.out;  // --zero1 is --zero 1
  EXPECT_FALSE(contains(run.out, "dualpipe launch:")) << "started ranks\n" << run.out;
}

}  // namespace
