// The two correctness checks of a training run, on every rank:
// - step 1 against the single-process reference: the whole model built from the seed and run micro-batch by
//   micro-batch in this process. This rank's losses must be bit-identical, and its stages' gradients (after the
//   replica reduction, before clipping) within cosine distance 1e-13, as in the runtime's reference tests.
//   Experts sharded over an EP group are left out of the gradient comparison: theirs also hold the tokens of
//   the group's other replicas, which this process does not see (tests/train compare whole runs instead);
// - at the end, the two replicas of every stage (DualPipe, Chimera) hold bit-identical parameters.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/train/run_plan.h"
#include "stage_state.h"

namespace dualpipe::train {

constexpr double kMaxGradientCosineDistance = 1e-13;

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
                                       bool experts_sharded = false);

struct ReplicaCheck {
  int tensors_compared = 0;
  std::vector<std::string> problems;  // empty: identical
};

// Collective over the ranks holding replicas; nothing to do for single-replica placements.
ReplicaCheck compare_replicas(const Placement& placement, int rank, const std::map<int, StageState>& stages,
                              comm::Communicator& communicator, std::chrono::milliseconds timeout);

}  // namespace dualpipe::train
