// `dualpipe train --tp T`: Megatron-style tensor parallelism inside every stage. The reference is the same run
// without --tp (whole stages, one process per pipeline rank), itself checked against a single process at step 1.
// Losses and gradient norms must agree to a relative 1e-6, not bit for bit: a row-parallel layer sums T partial
// products where a whole layer sums one, and the vocabulary-parallel cross entropy sums T partial softmax sums, so
// float rounding differs in the last bits. Each run also passes its own step-1 check against a single process
// (losses to 1e-6, every rank's gradient slices against the slices of the reference's).
//
// Gradient norms after the first step get a relative 1e-5: AdamW's first update moves every weight by about lr
// whatever the size of its gradient (m / sqrt(v) is its sign), so a gradient element that cancels to nearly zero
// steps one way or the other on its last bits. Measured at this test's lr 6e-3: 1.7e-6 at step 2 (1e-8 at step 1);
// at lr 6e-4 it falls to 4e-8, as it should if the rounding, not the split, is the cause (expect_same_training).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

const std::string kTensorParallelJob = kSmall + "--steps 3 --eval-every 0 --sample-tokens 0 ";

// The four schedule kinds of the hybrid tests, PP 2 x TP 2 (with and without sequence parallelism) against PP 2
// with whole stages.
TEST_F(Train, TensorParallelStagesTrainLikeWholeStagesUnderEverySchedule) {
  for (const std::string schedule : {"1f1b", "zb-h1", "dualpipe", "dualpipev"}) {
    const std::string layout = kTensorParallelJob + "--schedule " + schedule + " --pp 2 -m 4 --metrics ";
    const CommandResult whole = dualpipe_cmd(layout + path("whole.jsonl"), 180);
    ASSERT_EQ(whole.status, 0) << schedule << "\n" << whole.out;
    const MetricsFile expected = read_metrics(path("whole.jsonl"));
    for (const std::string split_options : {"--tp 2", "--tp 2 --sp"}) {
      const std::string label = schedule + " " + split_options;
      const CommandResult split = dualpipe_cmd(layout + path("tp.jsonl") + " " + split_options, 180);
      ASSERT_EQ(split.status, 0) << label << "\n" << split.out;
      EXPECT_TRUE(contains(split.out, "each split over 2 tensor-parallel ranks")) << split.out;
      EXPECT_TRUE(contains(split.out, "step matches the single-process reference: 4 losses within a relative 1e-06"))
          << split.out;
      expect_traffic_as_predicted(split.out, label);
      const MetricsFile got = read_metrics(path("tp.jsonl"));
      ASSERT_EQ(got.steps.size(), 3u) << label;
      expect_same_training(got, expected, label);
      // It learns: the validation loss after the last step is below the one before the first.
      ASSERT_EQ(got.evals.size(), 2u) << label;
      EXPECT_LT(got.evals.back()["val_loss"].get<double>(), got.evals.front()["val_loss"].get<double>()) << label;
    }
  }
}

// `dualpipe train --pp 2 --tp 2 --dp 2 --sp`, smaller: 8 processes against one whole-stage pipeline of 2 ranks on
// the whole batch.
TEST_F(Train, TensorAndSequenceParallelComposeWithDataParallelReplicas) {
  const MetricsPair runs = run_beside_one_pipeline(kTensorParallelJob + "--schedule dualpipe --pp 2 --dp 2 --tp 2 --sp -m 4",
                                                   kTensorParallelJob + "--schedule dualpipe --pp 2 -m 8", 2, 3, dir_, 300);
  EXPECT_TRUE(contains(runs.output, "data-parallel replicas identical: all ")) << runs.output;
  expect_same_training(runs.got, runs.expected, "PP 2 x DP 2 x TP 2");
}

// MoE layers keep expert parallelism, the rest of each block is split: PP 2 x DP 2 x EP 2 x TP 2 (8 processes)
// against the same job with whole stages. DualPipe's overlapped pairs run their halves on two threads, each with
// its own tensor-parallel group, as each has its own expert group. Without --sp every tensor rank computes the MoE
// layers whole; with it each routes its part of the sequence, in the places its tokens take in the whole
// micro-batch's expert queues, so step 1 drops the same choices as whole stages.
TEST_F(Train, TensorParallelAttentionBesideExpertParallelMoeLayers) {
  const std::string layout = kTensorParallelJob + "--schedule dualpipe --pp 2 --dp 2 --ep 2 --experts 4 -m 4 --metrics ";
  const CommandResult whole = dualpipe_cmd(layout + path("whole.jsonl"), 300);
  ASSERT_EQ(whole.status, 0) << whole.out;
  const MetricsFile expected = read_metrics(path("whole.jsonl"));
  for (const std::string options : {"--tp 2", "--tp 2 --sp"}) {
    const CommandResult split = dualpipe_cmd(layout + path("tp.jsonl") + " " + options, 300);
    ASSERT_EQ(split.status, 0) << options << "\n" << split.out;
    EXPECT_TRUE(contains(split.out, "step matches the single-process reference")) << split.out;
    EXPECT_TRUE(contains(split.out, "bit-identical in all 2 replicas")) << split.out;
    expect_traffic_as_predicted(split.out, "MoE " + options);
    const MetricsFile got = read_metrics(path("tp.jsonl"));
    ASSERT_FALSE(got.steps.empty() || expected.steps.empty()) << options;
    EXPECT_GT(got.steps[0]["moe_dropped"].get<double>(), 0) << options;
    EXPECT_EQ(got.steps[0]["moe_dropped"], expected.steps[0]["moe_dropped"]) << options;
    expect_same_training(got, expected, "MoE, EP 2, " + options);
  }
}

// Four ranks per stage (heads 4) and a sample drawn from the gathered logits: the same text as whole stages. With
// sequence parallelism the growing context (4 bytes of prompt, then 5, ...) is padded to a multiple of 4 tokens.
TEST_F(Train, FourTensorParallelRanksSampleTheSameTextAsWholeStages) {
  const std::string job = "train --layers 2 --hidden 32 --heads 4 --seq-len 16 --batch 2 --steps 2 --eval-every 0 "
                          "--sample-tokens 14 --temperature 0 --trace '' --schedule 1f1b --pp 2 -m 2";
  const CommandResult whole = dualpipe_cmd(job, 180);
  ASSERT_EQ(whole.status, 0) << whole.out;
  auto sample = [](const std::string& out) { return out.substr(out.find("sample (")); };
  for (const char* split_options : {" --tp 4", " --tp 4 --sp"}) {
    const CommandResult split = dualpipe_cmd(job + split_options, 180);
    ASSERT_EQ(split.status, 0) << split.out;
    EXPECT_EQ(sample(split.out), sample(whole.out)) << split_options;
  }
}

// Checkpoints hold whole tensors whatever --tp: a TP 2 run resumes bit for bit under TP 2 and within the
// reduction-order tolerance with whole stages; a whole-stage PP 2 x DP 2 run's checkpoint resumes under PP 2 x DP 2
// x TP 2 with sequence parallelism, continuing its losses.
TEST_F(Train, TensorParallelCheckpointsResumeOnAnyTensorParallelLayout) {
  const std::string job = kSmall + "--steps 4 --eval-every 0 --sample-tokens 0 --schedule dualpipe --pp 2 -m 4 ";
  const MetricsFile tp_run = train_saving_every_two_steps(job + "--tp 2", "tp", 240);
  ASSERT_EQ(tp_run.steps.size(), 4u);
  const MetricsFile same = resume_from_step_two(job + "--tp 2", path("tp"), "tp-again", 240);
  ASSERT_EQ(same.steps.size(), 2u);
  expect_steps_identical(same, tp_run, 2, "TP 2 again,");
  expect_same_training(resume_from_step_two(job, path("tp"), "whole", 240), without_first_steps(tp_run, 2),
                       "TP 2 -> whole stages");

  const MetricsFile dp_run = train_saving_every_two_steps(job + "--dp 2", "dp", 240);
  expect_same_training(resume_from_step_two(job + "--dp 2 --tp 2 --sp", path("dp"), "dp-tp", 240),
                       without_first_steps(dp_run, 2), "DP 2 -> DP 2 x TP 2 with SP");
}

// One block's activations for one micro-batch, measured by the executor's meter on rank 0 (the difference between
// 8 and 4 layers: 2 more layers, 2 micro-batches alive under 1F1B), against what autograd keeps of this float32
// model's block, counted by hand in docs/parallelism.md ("Memory, measured against the formulas"): with
// s b h = 32768 and a s^2 b = 131072 elements, 4 s b h + 12 s b h / T + a s^2 b / T under TP, and
// 2 s b h + 14 s b h / T + a s^2 b / T with SP. And the meter must read the same peak at every step: a collective
// buffer freed on a thread the meter does not hear (Gloo's reduce-scatter lets go of its messages on its own
// threads) grew the figures from step to step, by 6% a layer for TP 2 + SP.
TEST_F(Train, TensorParallelActivationsPerLayerAreTheCountedOnes) {
  const double sbh = 32768 * 4.0, as2b = 131072 * 4.0;  // bytes
  const struct {
    std::string options;
    double layer_bytes;
  } cases[] = {{"--tp 2", 4 * sbh + 12 * sbh / 2 + as2b / 2}, {"--tp 2 --sp", 2 * sbh + 14 * sbh / 2 + as2b / 2}};
  for (const auto& c : cases) {
    double peak[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const std::string layers = i == 0 ? "4" : "8";
      const CommandResult run = dualpipe_cmd(
          "train --layers " + layers + " --hidden 128 --heads 8 --seq-len 64 --batch 4 --pp 2 -m 4 --steps 3 "
          "--schedule 1f1b --eval-every 0 --sample-tokens 0 --trace '' --metrics " + path("m.jsonl") + " " + c.options,
          180);
      ASSERT_EQ(run.status, 0) << c.options << "\n" << run.out;
      const MetricsFile m = read_metrics(path("m.jsonl"));
      ASSERT_EQ(m.steps.size(), 3u);
      for (const auto& step : m.steps)
        EXPECT_EQ(step["peak_activation_bytes"], m.steps[0]["peak_activation_bytes"]) << c.options << " " << layers;
      peak[i] = m.steps[0]["peak_activation_bytes"][0].get<double>();
    }
    const double layer = (peak[1] - peak[0]) / 4;
    EXPECT_NEAR(layer / c.layer_bytes, 1.0, 0.02) << c.options << ": " << layer << " bytes a layer";
  }
}

TEST_F(Train, TensorParallelBadInputIsRefusedBeforeAnyRankStarts) {
  expect_each_refused_before_any_rank_starts(kTensorParallelJob + "--pp 2 ", {
      {"--tp 3", "--tp 3 must divide --heads 2: attention is split by heads"},
      {"--tp 3 --heads 3 --hidden 48", "--tp 3 must divide the vocabulary of 256 tokens"},
      {"--tp 0", "--tp must be between 1 and 64, got 0"},
      {"--sp", "--sp needs --tp above 1, got --tp 1"},
      {"--tp 2 --sp --seq-len 15", "--seq-len 15 must be divisible by --tp 2 with --sp"},
      {"--tp 2 --dp 2 --ep 2 --experts 4 --recompute --fb-overlap-mode threads",
       "--recompute with --tp 2 and --ep 2 needs --no-fb-overlap or --fb-overlap-mode phases"},
      {"--tp 2 --dp 2 --ep 2 --experts 4 --fb-overlap-mode interleaved",
       "--fb-overlap-mode must be phases, threads or turns, got 'interleaved'"},
  });
  EXPECT_REFUSED(run_alone_as_rank_zero_of(2, kTensorParallelJob + "--worker --pp 2 --tp 2"),
                 "WORLD_SIZE is 2 but --pp 2 x --dp 1 x --tp 2 is 4");
}

}  // namespace
