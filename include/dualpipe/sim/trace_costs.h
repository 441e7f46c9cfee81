// Costs from measured runs, and the run a simulation stands for: the bridge between traces and the cost model.
#pragma once

#include <string>
#include <vector>

#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/trace/trace.h"

namespace dualpipe {

// A cost model in microseconds fitted to a measured step, and how well it fits.
struct CostFit {
  // Each stage's mean F, B and W (B = I + W where the step split its backwards) as per-stage lists, with their
  // means as F, B, W; FB from the overlapped pairs; reduce from the REDUCE_GRAD events' completed reductions (the
  // data-parallel link's time each, in a mean stage's units). comm is 0: messages show up as waiting.
  CostModel costs;
  // The root mean square of (measured - modelled) / modelled over the step's compute events: 0 when every
  // action of a type took the same time on a stage; the spread the plan, which uses means, cannot show.
  double residual = 0;
  // What the model's rules forced or had to assume (a stage's W above its B, no split backward to measure W).
  std::vector<std::string> warnings;
};
CostFit fit_costs(const Trace& trace, int step);

// One expert exchange's time in a dualpipe train trace, in microseconds: the median duration of the all-to-alls
// its ranks waited for from their start (TraceSpan::waited within 5% of the duration: the span is the exchange's
// own, not the time a rank computed before waiting for it). Throws, naming `path`, if it has none.
double exchange_us_from_trace(const Trace& trace, const std::string& path);
// `costs` (in milliseconds) with exchanges as long as the trace's (`simulate --from-trace`): a2a becomes 2 x layers
// x that time, each MoE layer exchanging twice in its forward (dispatch and combine). An a2a already given is the
// exchanges' bytes at the link's rate: what the measured exchange takes beyond its share becomes a2a_latency,
// unless that is given too.
void take_exchanges_from_trace(CostModel& costs, const Trace& trace, const std::string& path);
// `costs` (in milliseconds) with the host's time between a rank's actions and a message's time as the trace
// measured them (gap and comm, where not given): the mean time from a rank's action's end to its next one's start
// where that one's inputs were there, and the mean wait from an input's producer's end to its consumer's start on
// another rank where the consumer's rank was idle (docs/profile.md, "Costs for the planner").
void take_waits_from_trace(CostModel& costs, const Trace& trace);

// The costs of a 1/R slice of the model fitted to the last step of a dualpipe trace (`plan --from-trace`): the
// trace's per-stage costs times S/R when the run cut the model into S > R stages, and one multiplier per slice
// (the mean of its stages). `path` names the trace in errors.
struct SliceCosts {
  CostModel costs;
  int ranks = 0;
  int microbatches = 0;
  std::vector<std::string> warnings;  // the fit's (CostFit::warnings)
};
SliceCosts slice_costs_from_trace(const Trace& trace, const std::string& path);

// The trace a run would record if it went exactly as simulated, with one cost unit lasting `us_per_unit`
// microseconds; indices are positions in the lowered action list, as the runtime writes them.
Trace trace_from_simulation(const Schedule& schedule, const Simulation& simulation, double us_per_unit,
                            int step = 0);

}  // namespace dualpipe
