// The two correctness checks of a training run, on every rank:
// - step 1 against the single-process reference: the whole model built from the seed and run micro-batch by
//   micro-batch in this process. This rank's losses must be bit-identical, and its stages' gradients (after the
//   step's reductions, before clipping) within cosine distance 1e-13, as in the runtime's reference tests. With data
//   parallelism the schedule's REDUCE_GRAD actions have averaged them over the replicas already, so the reference's
//   gradients are averaged over the replicas too (each replica's reference ran its own micro-batches): the whole
//   global batch's gradients. Under ZeRO-2 and 3 a replica compares the gradients it owns.
//   Experts sharded over an EP group are left out of the gradient comparison: theirs also hold the tokens of
//   the group's other replicas, which this process does not see (tests/train compare whole runs instead).
//   With tensor parallelism each rank compares its slices of the gradients, and the losses to a relative
//   kMaxTensorParallelLossError, their gradients to kMaxTensorParallelGradientCosineDistance: a row-parallel layer
//   sums T partial products where one process sums one, and the vocabulary-parallel cross entropy sums T partial
//   softmax sums, so the last bits differ (float32 rounding of 1e-7 in each element is a cosine distance of about
//   1e-14; TP 4 measured 1.2e-13 on the test model's qkv gradients, where one process's own rounding is 3e-15).
//   Context parallelism gets the same tolerances: its ring merges attention's blocks with a running maximum, its
//   ranks' losses and gradients are summed over the group, so its last bits differ too;
// - at the end, the two replicas of every stage (DualPipe, Chimera) hold bit-identical parameters.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/parallel/data_parallel.h"
#include "dualpipe/parallel/optimizer_sharding.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/train/run_plan.h"
#include "stage_state.h"

namespace dualpipe::train {

constexpr double kMaxGradientCosineDistance = 1e-13;
constexpr double kMaxTensorParallelLossError = 1e-6;
constexpr double kMaxTensorParallelGradientCosineDistance = 1e-10;

struct ReferenceCheck {
  int losses_compared = 0;
  int gradients_compared = 0;  // parameter tensors
  double worst_cosine_distance = 0;
  std::vector<std::string> problems;  // empty: the step matched
};

// `inputs`/`targets`: the step's micro-batches, indexed by micro-batch.
ReferenceCheck check_against_reference(const RunPlan& plan, const std::vector<torch::Tensor>& inputs,
                                       const std::vector<torch::Tensor>& targets, const runtime::Executor& executor,
                                       const runtime::StepResult& result, const std::map<int, StageState>& stages,
                                       const parallel::DataParallel& dp,
                                       const parallel::OptimizerSharding* gradient_owners = nullptr,
                                       bool experts_sharded = false, const models::TensorGroup& tp = nullptr,
                                       bool context_parallel = false);

struct ReplicaCheck {
  int tensors_compared = 0;
  std::vector<std::string> problems;  // empty: identical
};

// Collective over the ranks holding replicas; nothing to do for single-replica placements.
ReplicaCheck compare_replicas(const Placement& placement, int rank, const std::map<int, StageState>& stages,
                              comm::Communicator& communicator, std::chrono::milliseconds timeout);

// A check's problems, one per line, for its error.
std::string problems_text(const std::vector<std::string>& problems);

}  // namespace dualpipe::train
