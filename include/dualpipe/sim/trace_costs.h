// Costs from measured runs, and the run a simulation stands for: the bridge between traces and the cost model.
#pragma once

#include <string>

#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/trace/trace.h"

namespace dualpipe {

// A cost model in microseconds fitted to the step's measured compute events (mean F, B, W, I and pair
// durations, and per-stage scales from the forwards), so the plan can be drawn on the measured scale.
CostModel fit_costs(const Trace& trace, int step);

// The costs of a 1/R slice of the model fitted to the last step of a dualpipe trace (`plan --from-trace`): the
// trace's per-stage costs times S/R when the run cut the model into S > R stages, and one multiplier per slice
// (the mean of its stages). `path` names the trace in errors.
struct SliceCosts {
  CostModel costs;
  int ranks = 0;
  int microbatches = 0;
};
SliceCosts slice_costs_from_trace(const Trace& trace, const std::string& path);

// The trace a run would record if it went exactly as simulated, with one cost unit lasting `us_per_unit`
// microseconds; indices are positions in the lowered action list, as the runtime writes them.
Trace trace_from_simulation(const Schedule& schedule, const Simulation& simulation, double us_per_unit,
                            int step = 0);

}  // namespace dualpipe
