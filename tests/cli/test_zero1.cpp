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
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got.steps[i]["loss"], expected.steps[i]["loss"]) << layout << " step " << i + 1;
    EXPECT_EQ(got.steps[i]["grad_norm"], expected.steps[i]["grad_norm"]) << layout << " step " << i + 1;
  }
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
  const CommandResult first =
      dualpipe_cmd(job + "--zero1 --checkpoint-dir " + path("a") + " --save-every 2 --metrics " + path("a.jsonl"), 180);
  ASSERT_EQ(first.status, 0) << first.out;
  const MetricsFile whole = read_metrics(path("a.jsonl"));
  ASSERT_EQ(whole.steps.size(), 4u);
  for (const std::string flag : {"--zero1", ""}) {
    const std::string dir = path(flag.empty() ? "unsharded" : "sharded");
    ASSERT_EQ(run_command("mkdir -p '" + dir + "' && cp -r '" + path("a") + "/step-2' '" + dir + "/'").status, 0);
    const CommandResult resumed =
        dualpipe_cmd(job + flag + " --checkpoint-dir " + dir + " --resume --metrics " + dir + ".jsonl", 180);
    ASSERT_EQ(resumed.status, 0) << resumed.out;
    EXPECT_TRUE(contains(resumed.out, "after step 2")) << resumed.out;
    const MetricsFile rest = read_metrics(dir + ".jsonl");
    ASSERT_EQ(rest.steps.size(), 2u);
    for (std::size_t i = 0; i < 2; ++i)
      for (const char* field : {"loss", "grad_norm"})
        EXPECT_EQ(rest.steps[i][field], whole.steps[i + 2][field]) << "resumed " << (flag.empty() ? "without" : "with")
                                                                   << " --zero1, step " << i + 3 << " " << field;
  }
}

TEST_F(Train, ZeroOneWithoutDataParallelReplicasIsRefused) {
  const CommandResult run = dualpipe_cmd(kZeroOneJob + "--zero1");
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_TRUE(contains(run.out, "--zero1 needs --dp above 1, got --dp 1")) << run.out;
  EXPECT_FALSE(contains(run.out, "dualpipe launch:")) << "started ranks\n" << run.out;
}

}  // namespace
