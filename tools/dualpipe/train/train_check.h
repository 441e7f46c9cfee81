// The two correctness checks of `dualpipe train`, run on every rank:
// - step 1 against the single-process reference: the whole student built from the seed and run micro-batch by
//   micro-batch in this process; this rank's losses must be bit-identical and its stages' gradients (after the
//   replica reduction) within cosine distance 1e-13, as in the runtime's reference tests;
// - at the end, that the two replicas of every stage (DualPipe, Chimera) hold bit-identical parameters.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/runtime/executor.h"
#include "train_model.h"

namespace dualpipe::cli {

constexpr double kMaxGradientCosineDistance = 1e-13;

struct ReferenceCheck {
  int losses_compared = 0;
  int gradients_compared = 0;  // parameter tensors
  double worst_cosine_distance = 0;
  std::vector<std::string> problems;  // empty: the step matched
};

// `stages`: this rank's stage modules after the step and the replica reduction, before the optimizer step.
ReferenceCheck check_against_reference(const ModelSpec& spec, int num_stages, const Batch& batch,
                                       int num_microbatches, const runtime::Executor& executor,
                                       const runtime::StepResult& result,
                                       const std::map<int, StudentStage>& stages);

struct ReplicaCheck {
  int tensors_compared = 0;           // parameter tensors this rank compared with their other replica
  std::vector<std::string> problems;  // empty: identical
};

// Compares every stage this rank holds with its other replica's parameters (an exchange with that rank).
// Collective over the ranks holding replicas; nothing to do for single-replica placements.
ReplicaCheck compare_replicas(const Placement& placement, int rank,
                                          const std::map<int, StudentStage>& stages,
                                          comm::Communicator& communicator, std::chrono::milliseconds timeout);

}  // namespace dualpipe::cli
