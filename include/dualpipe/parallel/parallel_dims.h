// The sizes of a hybrid-parallel job and the rules between them, in one place: the trainer's process mesh
// (parallel/mesh.h), its options (run/train_config.h) and the layout planner (layout/layout.h) all take their sizes
// and world size from here and check them with the same rules, so a layout the planner proposes is one the trainer
// can run. LibTorch-free.
//
// Expert parallelism runs across the data-parallel replicas of one stage, as in DeepSeek-V3 (its EP=64 groups
// inside DP=128 at PP=16): the E ranks of an EP group hold the same layers and different experts, so E divides D.
#pragma once

#include <cstdint>
#include <string>

namespace dualpipe::parallel {

// How an error names a size: as `dualpipe train` spells it ("--ep 4") or as `dualpipe layout --fix` does ("ep=4").
enum class DimsSpelling { Options, Fix };

struct ParallelDims {
  int pp = 1;  // pipeline ranks P (a rank may hold several stages: DualPipe holds two)
  int dp = 1;  // data-parallel replicas D of the pipeline
  int ep = 1;  // expert-parallel group size E, among the replicas of one stage: divides D
  int tp = 1;  // tensor-parallel ranks T of every stage
  int cp = 1;  // context-parallel ranks C of every stage

  // The ranks of one (stage rank, replica): C x T.
  int inner() const { return cp * tp; }
  // The processes of the job: P x D x C x T (64-bit: a mesh checks it against its limit before it counts in int).
  int64_t world_size() const { return int64_t{pp} * dp * cp * tp; }
  // The replicas holding the same experts: D / E. Their expert gradients are reduced together.
  int expert_replicas() const { return dp / ep; }
  std::string to_string() const;  // "PP=2 x DP=4 (EP=2)", "PP=2 x DP=2 x TP=2", "PP=2 x DP=1 x CP=2"
};

// "--pp 2 x --dp 2" or "pp=2 x dp=2", with the context and tensor sizes when above 1: the world size in words.
std::string world_product(const ParallelDims& dims, DimsSpelling spelling);

// The first rule `dims` breaks, naming the values and the rule in `spelling`, or "" when every rule holds: each
// size at least 1, E divides D.
std::string broken_rule(const ParallelDims& dims, DimsSpelling spelling);
// The same with a model of `experts` experts per MoE layer (0: dense): E is 1 for a dense model and divides the
// experts (every rank of an EP group holds as many).
std::string broken_rule(const ParallelDims& dims, int64_t experts, DimsSpelling spelling);

// Throws InvalidArgument when the world is above `limit` ranks (a process mesh's, not a plan's: the planner weighs
// clusters larger than one job's mesh may be).
void check_world_size(const ParallelDims& dims, int64_t limit, DimsSpelling spelling);

// Throw InvalidArgument with broken_rule's text when a rule is broken.
void check(const ParallelDims& dims, DimsSpelling spelling);
void check(const ParallelDims& dims, int64_t experts, DimsSpelling spelling);

}  // namespace dualpipe::parallel
