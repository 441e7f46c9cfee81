// Checkpoints resume on another layout with no conversion step (checkpoint.h): a job saves at step 2, a job of
// another pipeline cut, data-parallel, tensor-parallel size or ZeRO stage resumes it, and its steps 3 and 4 must
// continue the uninterrupted job's within the reduction-order tolerance (expect_same_training: losses to a relative
// 1e-6; the layouts sum a step's micro-batch gradients in other orders and groupings), from the same data position.
#include <gtest/gtest.h>

#include <string>

#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

const std::string kResumeJob = kSmall + "--steps 4 --eval-every 0 --sample-tokens 0 --save-every 2 ";

class LayoutResume : public Train {
 protected:
  // Runs `layout` from scratch into checkpoint directory `name`: 4 steps, saved at steps 2 and 4.
  MetricsFile run_whole(const std::string& name, const std::string& layout) {
    const CommandResult run =
        dualpipe_cmd(kResumeJob + layout + " --checkpoint-dir " + path(name) + " --metrics " + path(name + ".jsonl"), 240);
    EXPECT_EQ(run.status, 0) << layout << "\n" << run.out;
    return read_metrics(path(name + ".jsonl"));
  }

  // Resumes the step-2 checkpoint of `source` under `layout` (in a directory of its own, `name`): steps 3 and 4.
  MetricsFile resume(const std::string& source, const std::string& name, const std::string& layout) {
    const std::string dir = path(name);
    EXPECT_EQ(run_command("mkdir -p '" + dir + "' && cp -r '" + path(source) + "/step-2' '" + dir + "/'").status, 0);
    const CommandResult run =
        dualpipe_cmd(kResumeJob + layout + " --checkpoint-dir " + dir + " --resume --metrics " + dir + ".jsonl", 240);
    EXPECT_EQ(run.status, 0) << layout << "\n" << run.out;
    EXPECT_TRUE(contains(run.out, "after step 2")) << run.out;
    return read_metrics(dir + ".jsonl");
  }

  // Steps 3 and 4 of `whole`, the uninterrupted job, against the resumed job `name`, and the data position both
  // reached after step 4.
  void expect_continued(const MetricsFile& whole, const std::string& source, const std::string& name,
                        const MetricsFile& resumed, const std::string& label) {
    MetricsFile tail = whole;
    ASSERT_EQ(tail.steps.size(), 4u) << source;
    tail.steps.erase(tail.steps.begin(), tail.steps.begin() + 2);
    ASSERT_EQ(resumed.steps.size(), 2u) << label;
    expect_same_training(resumed, tail, label);
    EXPECT_EQ(manifest(name, 4)["data_position"], manifest(source, 4)["data_position"]) << label;
  }

  nlohmann::json manifest(const std::string& name, int step) {
    return nlohmann::json::parse(read_file(path(name) + "/step-" + std::to_string(step) + "/manifest.json"));
  }
};

// PP 4 (DualPipe, 8 micro-batches) -> PP 2 x DP 2 (DualPipeV, 4 micro-batches each: the same 16 sequences a step),
// -> PP 2 x CP 2 (each sequence split over two ranks), and -> PP 4 with another stage cut under 1F1B: each new stage
// reads the tensors of the old stages it spans.
TEST_F(LayoutResume, APipelineCheckpointResumesOnAnotherCutAndWithDataParallelReplicas) {
  const MetricsFile pp4 = run_whole("pp4", "--schedule dualpipe --pp 4 -m 8");
  const nlohmann::json written = manifest("pp4", 2);
  ASSERT_EQ(written["shards"].size(), 4u);
  EXPECT_TRUE(written["shards"][1]["tensors"].contains("block2.qkv.weight")) << written["shards"][1].dump();
  EXPECT_EQ(written["shards"][1]["tensors"]["block2.qkv.weight"], nlohmann::json::parse("[96, 32]"));
  EXPECT_EQ(written["data_parallel"], 1);

  expect_continued(pp4, "pp4", "pp2-dp2", resume("pp4", "pp2-dp2", "--schedule dualpipev --pp 2 --dp 2 -m 4"),
                   "PP 4 -> PP 2 x DP 2");
  expect_continued(pp4, "pp4", "pp2-cp2", resume("pp4", "pp2-cp2", "--schedule 1f1b --pp 2 --cp 2 -m 8"),
                   "PP 4 -> PP 2 x CP 2");
  expect_continued(pp4, "pp4", "cut",
                   resume("pp4", "cut", "--schedule 1f1b --pp 4 -m 8 --layers-per-stage 1,3,2,2"),
                   "PP 4 -> PP 4 cut 1,3,2,2");
}

// PP 2 x DP 2 with ZeRO-1 -> PP 2 x TP 2 with sequence parallelism (one replica, twice the micro-batches): the
// sharded optimizer state is whole in the checkpoint, and the new tensor ranks keep their slices of it. (ZeRO-1 ->
// ZeRO-2 on the same layout: test_zero2.cpp.)
TEST_F(LayoutResume, ADataParallelZeroOneCheckpointResumesTensorParallel) {
  const MetricsFile dp2 = run_whole("dp2", "--schedule 1f1b --pp 2 --dp 2 -m 4 --zero 1");
  expect_continued(dp2, "dp2", "tp2", resume("dp2", "tp2", "--schedule 1f1b --pp 2 --tp 2 --sp -m 8"),
                   "DP 2 -> TP 2");
}

// PP 2 x DP 2 with ZeRO-1 -> the same layout under ZeRO-3: the replicas load the whole tensors and then keep only
// those they own, optimizer state and parameters alike. (ZeRO-1 reduces gradients with all-reduces, ZeRO-3 with
// reduces: the last bits may differ.)
TEST_F(LayoutResume, AZeroOneCheckpointResumesUnderZeroThree) {
  const MetricsFile zero1 = run_whole("zero1", "--schedule dualpipev --pp 2 --dp 2 -m 4 --zero 1");
  expect_continued(zero1, "zero1", "zero3", resume("zero1", "zero3", "--schedule dualpipev --pp 2 --dp 2 -m 4 --zero 3"),
                   "ZeRO-1 -> ZeRO-3");
}

TEST_F(LayoutResume, AnotherNumberOfSequencesPerStepIsRefusedBeforeAnyRankStarts) {
  run_whole("pp2", "--schedule 1f1b --pp 2 -m 4");
  expect_refused_before_any_rank_starts(
      kResumeJob + "--schedule 1f1b --pp 2 --dp 2 -m 4 --checkpoint-dir " + path("pp2") + " --resume",
      "was written with 8 sequences per step (--dp 1 x --microbatches 4 x --batch 2), this run has 16 sequences per "
      "step (--dp 2 x --microbatches 4 x --batch 2)");
}

}  // namespace
