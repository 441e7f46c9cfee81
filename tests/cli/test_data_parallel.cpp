// `dualpipe train --pp P --dp D`: D replicas of a P-rank pipeline, each on its own slice of the global batch,
// gradients averaged over the replicas. The reference is one pipeline of P ranks running the whole global batch
// as D x M micro-batches: the same sequences and the same mean loss. The losses must agree to a relative 1e-6,
// not bit for bit: the replicas average D means of M micro-batches, one pipeline takes one mean of D x M, and
// float sums in another order differ in their last bits. The replicas themselves must stay bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

const std::string kDataParallelJob = kSmall + "--steps 3 --eval-every 0 --sample-tokens 0 ";

void expect_same_training(const std::string& schedule, int pp, int dp, int m, const std::string& dir) {
  const std::string job = kDataParallelJob + "--schedule " + schedule + " --pp " + std::to_string(pp) + " --dp " +
                          std::to_string(dp) + " -m " + std::to_string(m);
  const std::string reference = kDataParallelJob + "--schedule " + schedule + " --ranks " + std::to_string(pp) + " -m " +
                                std::to_string(m * dp);
  const MetricsPair runs = run_beside_one_pipeline(job, reference, dp, 3, dir, 180);
  EXPECT_TRUE(contains(runs.output, "data-parallel replicas identical: all ")) << runs.output;
  expect_steps_close(runs.got, runs.expected, {"loss", "grad_norm"}, 1e-6, schedule);
}

// DualPipe and Chimera sum a stage's two copies in the replicas' all-reduce (from step 2; step 1 is checked
// against a single-process run first, so its copies are summed before the replicas' mean).
TEST_F(Train, DataParallelReplicasOfTwoRanksTrainLikeOnePipelineOnTheWholeBatch) {
  for (const char* schedule : {"1f1b", "zb-h1", "dualpipe", "dualpipev", "chimera"})
    expect_same_training(schedule, 2, 2, 4, dir_);
}

TEST_F(Train, DataParallelReplicasOfFourRanksTrainLikeOnePipelineOnTheWholeBatch) {
  for (const char* schedule : {"1f1b", "zb-h1", "dualpipe", "dualpipev"})
    expect_same_training(schedule, 4, 2, 8, dir_);
}

// The reduction started per stage from the executor's last W (the default) against the same reduction after the
// step (--no-dp-overlap): the same all-reduce of the same flat buffers, so the same bits. Under DualPipe and
// Chimera it is the joined reduction in both modes: one all-reduce over both copies of a stage in every replica.
TEST_F(Train, GradientReductionOverlappedWithTheStepGivesTheSameTraining) {
  for (const char* schedule : {"1f1b", "zb-h1", "dualpipev", "dualpipe", "chimera"}) {
    const std::string job = kDataParallelJob + "--schedule " + schedule + " --pp 2 --dp 2 -m 4 --steps 4 --metrics ";
    const CommandResult overlapped = dualpipe_cmd(job + path("on.jsonl"), 120);
    ASSERT_EQ(overlapped.status, 0) << overlapped.out;
    const CommandResult after = dualpipe_cmd(job + path("off.jsonl") + " --no-dp-overlap", 120);
    ASSERT_EQ(after.status, 0) << after.out;
    const MetricsFile on = read_metrics(path("on.jsonl")), off = read_metrics(path("off.jsonl"));
    ASSERT_EQ(on.steps.size(), 4u);
    ASSERT_EQ(off.steps.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(on.steps[i]["grad_norm"], off.steps[i]["grad_norm"]) << schedule << " step " << i + 1;
      EXPECT_EQ(on.steps[i]["loss"], off.steps[i]["loss"]) << schedule << " step " << i + 1;
    }
  }
}

#ifdef DUALPIPE_OWN_GROUPS_EXAMPLE
// A library user's own groups, in another rank layout (examples/train_with_own_groups.cpp: stage-major, rank =
// p x 2 + d, where dualpipe's is d x 2 + p), train as `dualpipe train` does with its own: the same losses and
// gradient norms, bit for bit, since each group sums the same replicas' values in the same order.
TEST_F(Train, GroupsHandedInByALibraryUserTrainLikeTheDefaultLayout) {
  const CommandResult own = run_command("timeout -k 5 180 " + std::string(DUALPIPE_BIN) + " launch --nproc 4 -- " +
                                        DUALPIPE_OWN_GROUPS_EXAMPLE + " " + path("own.jsonl"));
  ASSERT_EQ(own.status, 0) << own.out;
  EXPECT_TRUE(contains(own.out, "step matches the single-process reference")) << own.out;
  EXPECT_TRUE(contains(own.out, "bit-identical in all 2 replicas")) << own.out;
  const CommandResult standard =
      dualpipe_cmd(kDataParallelJob + "--schedule dualpipe --pp 2 --dp 2 -m 4 --metrics " + path("default.jsonl"), 180);
  ASSERT_EQ(standard.status, 0) << standard.out;
  const MetricsFile got = read_metrics(path("own.jsonl")), expected = read_metrics(path("default.jsonl"));
  ASSERT_EQ(got.steps.size(), 3u);
  ASSERT_EQ(expected.steps.size(), 3u);
  expect_steps_identical(got, expected, 0, "own groups:");
}
#endif

TEST_F(Train, DataParallelBadInputIsNamed) {
  EXPECT_REFUSED(dualpipe_cmd(kDataParallelJob + "--dp 0"), "--dp must be between 1 and 1024, got 0");
  EXPECT_REFUSED(run_alone_as_rank_zero_of(4, kDataParallelJob + "--worker --pp 2 --dp 3"),
                 "WORLD_SIZE is 4 but --pp 2 x --dp 3 is 6");
}

}  // namespace
