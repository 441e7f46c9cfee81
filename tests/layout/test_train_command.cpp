// The `dualpipe train` command printed for a planned layout: the options the trainer takes for it (the trainer runs
// them in tests/python/test_layout_train.py), or why there is none: the trainer's own rule, word for word.
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
  EXPECT_EQ(*c.command, "dualpipe train --kind dualpipe --ranks 2 --dp 2 --zero 1 --tp 2 --sp --microbatches 4 "
                        "--layers 8 --hidden 128 --heads 4 --seq-len 128 --batch 1");
}

TEST(TrainCommand, ContextParallelAndZeroThreeLayoutsRun) {
  LayoutResult r = row(1, 2, 2);
  r.layout.cp = 2;
  r.layout.zero = 3;
  const TrainCommand c = train_command(trainers_model(), one_machine(), r);
  ASSERT_TRUE(c.command) << c.why_not;
  EXPECT_EQ(*c.command, "dualpipe train --kind dualpipe --ranks 2 --dp 2 --zero 3 --cp 2 --microbatches 4 "
                        "--layers 8 --hidden 128 --heads 4 --seq-len 128 --batch 1");
}

TEST(TrainCommand, TensorParallelismTheTrainerCannotRunIsNamed) {
  EXPECT_EQ(train_command(trainers_model(), one_machine(), row(8, 1, 1)).why_not,
            "--tp 8 must divide --heads 4: attention is split by heads, the same number on every tensor-parallel rank");
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
  // The overlapped pair runs its phases on one thread (--fb-overlap-mode phases, the default): recomputation beside
  // tensor parallelism needs no other flag.
  const TrainCommand recomputing = train_command(moe, one_machine(), recomputed);
  ASSERT_TRUE(recomputing.command) << recomputing.why_not;
  EXPECT_NE(recomputing.command->find(" --recompute"), std::string::npos) << *recomputing.command;
  LayoutResult context = row(2, 2, 1);
  context.layout.cp = 2;
  EXPECT_EQ(train_command(trainers_model(), one_machine(), context).why_not,
            "--cp with --sp is not supported yet: use --cp with --tp alone");
  context.layout.tp = 1;
  const TrainCommand moe_split = train_command(moe, one_machine(), context);
  ASSERT_TRUE(moe_split.command) << moe_split.why_not;  // MoE routing under --cp is one process's
  EXPECT_NE(moe_split.command->find(" --cp 2 "), std::string::npos) << *moe_split.command;
  EXPECT_NE(moe_split.command->find(" --experts 4 "), std::string::npos) << *moe_split.command;
  context.layout.cp = 3;
  EXPECT_EQ(train_command(trainers_model(), one_machine(), context).why_not,
            "--seq-len 128 does not divide into 2 x --cp 3 = 6 chunks: each context-parallel rank holds two equal "
            "chunks of every sequence");
}

}  // namespace
