// The data-parallel reductions of a step (REDUCE_GRAD), measured from a trace or planned by a simulation, so that
// `dualpipe compare` sets them side by side: when each rank's last reduction completed, and the step until the last
// one did (a run's step is not over while its gradients are still on their way).
#pragma once

#include <vector>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/trace/trace.h"

namespace dualpipe {

struct ReductionFigures {
  int reductions = 0;             // REDUCE_GRAD actions with a known end
  std::vector<double> last_end;   // per rank, from the step's start; 0 for a rank without one
  double step = 0;                // from the first compute action's start to the last end of compute or reduction
};

// From the trace's step `step`: REDUCE_GRAD events with their completion (TraceEvent::completed); `ranks` rows.
ReductionFigures measured_reductions(const Trace& trace, int step, int ranks);
// From a simulation of `schedule` (which holds the REDUCE_GRAD actions).
ReductionFigures planned_reductions(const Schedule& schedule, const Simulation& simulation);

}  // namespace dualpipe
