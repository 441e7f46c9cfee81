// A pipeline whose ranks share a few host cores (CPU processes on one machine): an action runs slower while more
// ranks compute at once than there are cores, and a rank that waits lends its core to the others. The layout
// planner's time model on such a host, and `plan --from-kineto`'s prediction of a run traced on one.
#pragma once

#include <map>
#include <vector>

#include "dualpipe/schedule/dependency_walk.h"
#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"

namespace dualpipe {

// The number of ranks computing, as a step function of time: (time, count from then on). Each rank's intervals
// must not overlap one another.
std::map<double, int> concurrency(const std::vector<std::vector<ActionTime>>& compute);

// How much slower than alone work ran over [start, end): its length over the work done in it, each moment at the
// rate min(1, cores / (replicas x running)).
double mean_slowdown(const std::map<double, int>& level, double start, double end, int replicas, int cores);

// How much of [start, end) a core was free: fewer than `cores` ranks running (`level`, as `concurrency` gives it).
double time_with_a_free_core(const std::map<double, int>& level, double start, double end, int cores);

struct SharedCoresStep {
  double makespan = 0;       // the pipeline's
  double step = 0;           // with each rank's update after its last action
  double busiest = 0;        // the busiest rank's compute time, slowdowns included
  double mean_slowdown = 1;  // every rank's compute time with slowdowns over the same without
};

// The schedule simulated under processor sharing: `replicas` copies of the pipeline run in step (data-parallel
// replicas), so at any moment replicas x (the pipeline's ranks computing) processes want `cores` cores, and each
// runs at min(1, cores / wanting) of its speed. `updates[r]` is rank r's work after its last action (the
// optimizer; none where not given), which shares the cores as well. Solved as a fixed point: each action's
// duration is its cost (duration_on, with the costs' comm and gap as in `simulate`) times its slowdown over its
// interval in the previous timeline, damped, until the step settles. `scales[r][k]`, where given, multiplies the
// cost of rank r's k-th compute action (one occurrence's time against the mean: action_spread.h).
SharedCoresStep simulate_on_shared_cores(const Schedule& schedule, const CostModel& costs, int replicas, int cores,
                                         const std::vector<double>& updates = {},
                                         const std::vector<std::vector<double>>& scales = {});

}  // namespace dualpipe
