// `dualpipe train --cp C`: context parallelism, each sequence split over C ranks in zig-zag chunks, attention a
// ring. The reference is the same run without --cp (whole sequences), itself checked against a single process at
// step 1. Losses and gradient norms must agree to the reduction-order tolerance of expect_same_training (losses to
// a relative 1e-6), not bit for bit: the ring merges attention's blocks with a running maximum, and each rank's share
// of the loss and of the gradients is summed over the group. Each run also passes its own step-1 check against a
// single process (losses to 1e-6, gradients to cosine distance 1e-10), and the ring's traffic must be what the
// model's shape predicts.
#include <gtest/gtest.h>

#include <string>

#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

// 32-byte sequences, so that each of 2C = 4 chunks holds 8 tokens and the ring has work.
const std::string kLong = kSmall + "--seq-len 32 --steps 3 --eval-every 3 --sample-tokens 0 ";

void expect_ring_traffic_as_predicted(const std::string& out, const std::string& label) {
  expect_traffic_as_predicted(out, label, "context-parallel");
}

// The validation losses of a run: before the first step and after the last.
void expect_validation_falls(const MetricsFile& m, const std::string& label) {
  ASSERT_GE(m.evals.size(), 2u) << label;
  EXPECT_LT(m.evals.back()["val_loss"].get<double>(), m.evals.front()["val_loss"].get<double>()) << label;
}

// CP 2 x PP 2 under the four schedule kinds of the hybrid tests, against PP 2 with whole sequences.
TEST_F(Train, ContextParallelStagesTrainLikeWholeSequencesUnderEverySchedule) {
  for (const std::string schedule : {"1f1b", "zb-h1", "dualpipe", "dualpipev"}) {
    const std::string layout = kLong + "--schedule " + schedule + " --pp 2 -m 4 --metrics ";
    const CommandResult whole = dualpipe_cmd(layout + path("whole.jsonl"), 180);
    ASSERT_EQ(whole.status, 0) << schedule << "\n" << whole.out;
    const CommandResult split = dualpipe_cmd(layout + path("cp.jsonl") + " --cp 2", 180);
    ASSERT_EQ(split.status, 0) << schedule << "\n" << split.out;
    EXPECT_TRUE(contains(split.out, "step matches the single-process reference: 4 losses within a relative 1e-06"))
        << split.out;
    expect_ring_traffic_as_predicted(split.out, schedule);
    const MetricsFile got = read_metrics(path("cp.jsonl"));
    expect_same_training(got, read_metrics(path("whole.jsonl")), schedule + " --cp 2");
    expect_validation_falls(got, schedule + " --cp 2");
  }
}

// PP 2 x DP 2 x CP 2 (8 processes) with recomputation against one pipeline of whole sequences on the whole batch;
// CP 4 (8 chunks of 4 tokens) and CP 2 x TP 2 against whole sequences.
TEST_F(Train, ContextParallelComposesWithDataAndTensorParallelism) {
  const MetricsPair runs =
      run_beside_one_pipeline(kLong + "--schedule dualpipe --pp 2 --dp 2 --cp 2 --recompute -m 4",
                              kLong + "--schedule dualpipe --pp 2 -m 8", 2, 3, dir_, 300);
  expect_same_training(runs.got, runs.expected, "PP 2 x DP 2 x CP 2");
  expect_ring_traffic_as_predicted(runs.output, "PP 2 x DP 2 x CP 2, recomputed");

  const std::string layout = kLong + "--schedule 1f1b --pp 2 -m 4 --metrics ";
  const CommandResult whole = dualpipe_cmd(layout + path("whole.jsonl"), 180);
  ASSERT_EQ(whole.status, 0) << whole.out;
  for (const std::string split_options : {"--cp 4", "--cp 2 --tp 2"}) {
    const CommandResult split = dualpipe_cmd(layout + path("split.jsonl") + " " + split_options, 240);
    ASSERT_EQ(split.status, 0) << split_options << "\n" << split.out;
    EXPECT_TRUE(contains(split.out, "step matches the single-process reference")) << split.out;
    expect_ring_traffic_as_predicted(split.out, split_options);
    expect_same_training(read_metrics(path("split.jsonl")), read_metrics(path("whole.jsonl")), split_options);
  }
}

// PP 2 x DP 2 x EP 2 x CP 2 (8 processes) of an MoE model under DualPipe with recomputation, the overlapped halves
// running the ring and the expert all-to-all at once, against one pipeline of whole sequences on the whole batch.
// Each context rank routes its tokens in the places they take in the whole micro-batch, so step 1 drops the same
// choices. As in test_expert_parallel.cpp: step 1 to a relative 1e-6, later steps to 1e-4 (top-k routing is
// discontinuous, and the order of the sums moves the weights by rounding).
TEST_F(Train, ContextParallelComposesWithExpertParallelism) {
  const std::string moe = kLong + "--experts 4 --top-k 2 --schedule dualpipe --pp 2 ";
  const MetricsPair runs =
      run_beside_one_pipeline(moe + "--dp 2 --ep 2 --cp 2 --recompute -m 4", moe + "-m 8", 2, 3, dir_, 300);
  if (runs.got.steps.empty() || runs.expected.steps.empty()) return;  // the failure is reported
  EXPECT_GT(runs.got.steps[0]["moe_dropped"].get<double>(), 0);
  EXPECT_EQ(runs.got.steps[0]["moe_dropped"], runs.expected.steps[0]["moe_dropped"]);
  expect_ring_traffic_as_predicted(runs.output, "PP 2 x DP 2 x EP 2 x CP 2");
  MetricsFile got_first = runs.got, expected_first = runs.expected;
  got_first.steps.resize(1);
  expected_first.steps.resize(1);
  expect_steps_close(got_first, expected_first, {"loss", "grad_norm", "moe_aux_loss"}, 1e-6, "CP 2 x EP 2, step 1");
  expect_steps_close(runs.got, runs.expected, {"loss", "grad_norm", "moe_aux_loss"}, 1e-4, "CP 2 x EP 2");
}

// The growing context of the sample (8 bytes of prompt, then 9, ...) is padded to 2C chunks and split as in
// training: greedy sampling draws the same text as whole sequences.
TEST_F(Train, ContextParallelRanksSampleTheSameTextAsWholeSequences) {
  const std::string job = "train --layers 2 --hidden 32 --heads 2 --seq-len 32 --batch 2 --steps 2 --eval-every 0 "
                          "--sample-tokens 12 --temperature 0 --prompt 'Pipeline' --trace '' --schedule 1f1b --pp 2 -m 2";
  const CommandResult whole = dualpipe_cmd(job, 180);
  ASSERT_EQ(whole.status, 0) << whole.out;
  const CommandResult split = dualpipe_cmd(job + " --cp 2", 180);
  ASSERT_EQ(split.status, 0) << split.out;
  auto sample = [](const std::string& out) { return out.substr(out.find("sample (")); };
  EXPECT_EQ(sample(split.out), sample(whole.out));
}

TEST_F(Train, ContextParallelBadInputIsRefusedBeforeAnyRankStarts) {
  expect_each_refused_before_any_rank_starts(kSmall + "--steps 1 --schedule 1f1b --pp 2 ", {
      {"--cp 3", "--seq-len 16 does not divide into 2 x --cp 3 = 6 chunks"},
      {"--cp 0", "--cp must be between 1 and 64, got 0"},
      {"--cp 2 --tp 2 --sp", "--cp with --sp is not supported yet"},
  });
}

}  // namespace
