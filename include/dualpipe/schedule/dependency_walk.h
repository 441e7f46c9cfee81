// Runs a schedule's per-rank orders against the data dependencies of spec section 2, each rank in order and
// as soon as its next action's inputs are ready: the engine behind deadlock detection and the simulator.
//
//   sFm needs (s-1)Fm; sBm / sIm need sFm and (s+1)Bm / (s+1)Im; sWm needs sIm;
//   an overlapped pair needs both halves' dependencies and finishes both at its end.
// Communication actions take no time and wait for nothing here (their latency is on the edges).
// Data-parallel actions (UNSHARD, RESHARD, REDUCE_GRAD) run on their rank's data-parallel link beside its compute:
// each starts when the rank reaches it and the link is free, takes its duration there, and does not hold up the
// rank's next action, except that a compute action on a stage waits for the stage's UNSHARD to finish.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dualpipe/schedule/schedule.h"

namespace dualpipe {

struct ActionTime {
  double start = 0;
  double end = 0;
};

struct BlockedRank {
  int rank = 0;
  int index = 0;                 // position of the blocked action in schedule.actions[rank]
  std::string waiting_for;       // the unmet dependency, "1F3" or "2B0"
};

struct DependencyWalk {
  std::vector<std::vector<ActionTime>> times;  // times[rank][index]; meaningful where the rank got that far
  std::vector<BlockedRank> blocked;            // empty when every action ran
};

// duration(rank, action) gives each compute action's length; latency is added to every dependency whose
// producer runs on another rank than its consumer; a rank's next action starts no earlier than gap after its
// previous compute action ends (the host's work between them).
DependencyWalk walk_dependencies(const Schedule& schedule,
                                 const std::function<double(int rank, const Action&)>& duration,
                                 double latency = 0.0, double gap = 0.0);

}  // namespace dualpipe
