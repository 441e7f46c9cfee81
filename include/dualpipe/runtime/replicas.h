// Gradient reduction between the two replicas of a stage (DualPipe, Chimera keep stage s on rank s for one
// direction and on rank R-1-s for the other). After the call both replicas hold the sum of their gradients,
// bit-identical on both ranks (a + b is computed from the same two operands on each side), so an optimizer
// step keeps them identical.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/runtime/stage.h"
#include "dualpipe/schedule/placement.h"

namespace dualpipe::runtime {

// `pipeline_rank` is this rank's index in the placement; `rank_mapping` maps pipeline ranks to communicator
// ranks when the pipeline is a sub-group of a larger job (empty: identity). Stages whose two replicas live on
// the same rank, and single-replica placements, need no exchange.
void reduce_replica_gradients(const Placement& placement, int pipeline_rank,
                              const std::map<int, std::shared_ptr<Stage>>& stages, comm::Communicator& communicator,
                              const std::vector<int>& rank_mapping = {},
                              std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

}  // namespace dualpipe::runtime
