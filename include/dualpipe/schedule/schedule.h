// A pipeline schedule: for every rank, the ordered list of actions it runs, plus the placement that
// says which rank owns each (stage, micro-batch). Generators produce it, the validator checks it,
// the lowering adds communication, the simulator times it and the runtime executes it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dualpipe/schedule/action.h"
#include "dualpipe/schedule/placement.h"

namespace dualpipe {

struct Schedule {
  std::string kind;  // generator name ("dualpipe", ...), or "custom" for a schedule read from a file
  int num_ranks = 0;
  int num_stages = 0;
  int num_microbatches = 0;
  Placement placement;
  std::vector<std::vector<Action>> actions;  // actions[rank], in execution order

  std::size_t num_actions() const;
  // True once the communication lowering has run (the schedule holds SEND/RECV actions).
  bool has_communication() const;
};

// The ranks that `rank` exchanges stage tensors with under `schedule`'s placement: the holders of the stages next to
// each (stage, micro-batch) it holds, and the other holders of its stages (their copies' gradients are summed by an
// exchange). Sorted, without `rank`. NCCL's channels are connected to these, pair by pair, before the first step.
std::vector<int> pipeline_peers(const Schedule& schedule, int rank);

}  // namespace dualpipe
