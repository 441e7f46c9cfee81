// A pipeline whose ranks share a few host cores (CPU processes on one machine): an action runs slower while more
// ranks compute at once than there are cores, and a rank that waits lends its core to the others.
#pragma once

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"

namespace dualpipe::layout {

struct SharedCoresStep {
  double makespan = 0;
  double busiest = 0;  // the busiest rank's compute time, slowdowns included
  double mean_slowdown = 1;  // every rank's compute time with slowdowns over the same without
};

// The schedule simulated under processor sharing: `replicas` copies of the pipeline run in step (data-parallel
// replicas), so at any moment replicas x (the pipeline's ranks computing) processes want `cores` cores, and each
// runs at min(1, cores / wanting) of its speed. Solved as a fixed point: each action's duration is its cost times
// the mean slowdown over its interval in the previous timeline, damped, until the makespan settles.
SharedCoresStep simulate_on_shared_cores(const Schedule& schedule, const CostModel& costs, int replicas, int cores);

}  // namespace dualpipe::layout
