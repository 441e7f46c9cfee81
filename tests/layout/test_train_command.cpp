// The `dualpipe train` command printed for a planned layout: the options the trainer takes for it (checked against
// the trainer's own rules in tests/cli), or why there is none.
#include <gtest/gtest.h>

#include "dualpipe/layout/model_spec.h"
#include "dualpipe/layout/train_command.h"

namespace {

using namespace dualpipe::layout;

ModelSpec trainers_model() {  // dualpipe train's transformer at --layers 8 --hidden 128 --heads 4 --seq-len 128
  return parse_model_spec(R"({"name": "small", "layers": 8, "hidden": 128, "heads": 4, "ffn_hidden": 512,
                              "vocab": 256, "seq_len": 128})",
                          "small.json");
}

ClusterSpec one_machine() {
  ClusterSpec c;
  c.gpus = 8;
  c.gpus_per_node = 8;
  return c;
}

LayoutResult row(int tp, int pp, int dp) {
  LayoutResult r;
  r.layout.tp = tp;
  r.layout.pp = pp;
  r.layout.dp = dp;
  r.layout.schedule = "dualpipe";
  r.layout.recompute = Recompute::None;
  r.layout.microbatches = 4;
  return r;
}

TEST(TrainCommand, TensorParallelLayoutsRunWithSequenceParallelism) {
  const TrainCommand c = train_command(trainers_model(), one_machine(), row(2, 2, 2));
  ASSERT_TRUE(c.command) << c.why_not;
  EXPECT_EQ(*c.command, "dualpipe train --pp 2 --dp 2 --tp 2 --sp --zero1 --schedule dualpipe --microbatches 4 "
                        "--batch 1 --layers 8 --hidden 128 --heads 4 --seq-len 128");
}

TEST(TrainCommand, ContextParallelAndZeroThreeLayoutsRun) {
  LayoutResult r = row(1, 2, 2);
  r.layout.cp = 2;
  r.layout.zero = 3;
  const TrainCommand c = train_command(trainers_model(), one_machine(), r);
  ASSERT_TRUE(c.command) << c.why_not;
  EXPECT_EQ(*c.command, "dualpipe train --pp 2 --dp 2 --cp 2 --zero 3 --schedule dualpipe --microbatches 4 "
                        "--batch 1 --layers 8 --hidden 128 --heads 4 --seq-len 128");
}

TEST(TrainCommand, TensorParallelismTheTrainerCannotRunIsNamed) {
  EXPECT_EQ(train_command(trainers_model(), one_machine(), row(8, 1, 1)).why_not,
            "the trainer splits attention by heads: tp 8 must divide 4 heads");
  ModelSpec moe = trainers_model();
  moe.experts = 4;
  moe.top_k = 2;
  moe.expert_ffn_hidden = 512;
  const TrainCommand moe_tp = train_command(moe, one_machine(), row(2, 2, 1));
  ASSERT_TRUE(moe_tp.command) << moe_tp.why_not;  // MoE layers route the sequence-parallel tokens as one process
  EXPECT_NE(moe_tp.command->find(" --tp 2 --sp "), std::string::npos) << *moe_tp.command;
  LayoutResult recomputed = row(2, 2, 2);
  recomputed.layout.ep = 2;
  recomputed.layout.recompute = Recompute::Full;
  EXPECT_EQ(train_command(moe, one_machine(), recomputed).why_not,
            "the trainer recomputes beside tensor and expert parallelism only without the forward-backward overlap");
  LayoutResult context = row(2, 2, 1);
  context.layout.cp = 2;
  EXPECT_EQ(train_command(trainers_model(), one_machine(), context).why_not,
            "the trainer's context parallelism runs beside tensor parallelism without sequence parallelism, which "
            "the planner assumes with tp");
  context.layout.tp = 1;
  const TrainCommand moe_split = train_command(moe, one_machine(), context);
  ASSERT_TRUE(moe_split.command) << moe_split.why_not;  // MoE routing under --cp is one process's
  EXPECT_NE(moe_split.command->find(" --cp 2 "), std::string::npos) << *moe_split.command;
  EXPECT_NE(moe_split.command->find(" --experts 4 "), std::string::npos) << *moe_split.command;
  context.layout.cp = 3;
  EXPECT_EQ(train_command(trainers_model(), one_machine(), context).why_not,
            "the trainer cuts each sequence into 2 x cp = 6 chunks, which 128 tokens do not divide into");
}

}  // namespace
