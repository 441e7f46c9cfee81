// The discrete-event simulator and the metrics of spec section 2.
#pragma once

#include <vector>

#include "dualpipe/cost_model.h"
#include "dualpipe/dependency_walk.h"
#include "dualpipe/schedule.h"

namespace dualpipe {

struct RankMetrics {
  int rank = 0;
  double busy = 0;  // sum of compute durations
  double idle = 0;  // makespan - busy
  double span = 0;  // last end - first start on this rank
  int peak_activations = 0;              // in stage activations
  double peak_activation_fraction = 0;   // peak_activations / S: a fraction of the whole model's activations
  double peak_activation_bytes = 0;      // peak_activations x the cost model's act_bytes (0 when not given)
  int parameter_copies = 0;              // stage modules held (2 for DualPipe and Chimera)
};

struct Metrics {
  double makespan = 0;     // last end - first start over all ranks
  double bubble = 0;       // max over ranks of idle
  double bubble_rate = 0;  // (max span - max busy) / max span
  std::vector<RankMetrics> per_rank;

  int peak_activations() const;  // worst rank
};

struct Simulation {
  std::vector<std::vector<ActionTime>> timeline;  // timeline[rank][index] aligned with schedule.actions
  Metrics metrics;
};

// Times the schedule under the cost model. Throws InvalidSchedule when the schedule deadlocks.
Simulation simulate(const Schedule& schedule, const CostModel& costs);

// Peak live stage activations per rank, counted along each rank's order (independent of timing).
std::vector<int> peak_activations(const Schedule& schedule);

}  // namespace dualpipe
