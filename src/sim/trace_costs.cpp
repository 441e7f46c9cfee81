// Costs from measured runs, and the run a simulation stands for: the bridge between traces and the cost model.
#include "dualpipe/sim/trace_costs.h"

#include <algorithm>
#include <map>
#include <optional>

#include "dualpipe/schedule/lower.h"
#include "dualpipe/trace/trace_plan.h"
#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

struct Mean {
  double sum = 0;
  int count = 0;
  void add(double v) { sum += v, ++count; }
  std::optional<double> value() const { return count ? std::optional<double>(sum / count) : std::nullopt; }
};

}  // namespace

CostModel fit_costs(const Trace& trace, int step) {
  const std::vector<const TraceEvent*> events = step_compute_events(trace, step);
  // Per-stage scales from the forwards first, so every other mean can be taken in "uniform stage" terms.
  std::map<int, Mean> forward_by_stage;
  Mean forward;
  int max_stage = 0;
  for (const TraceEvent* e : events) {
    max_stage = std::max({max_stage, e->action.stage, e->action.bwd_stage});
    if (e->action.type == ActionType::Forward) {
      forward_by_stage[e->action.stage].add(e->duration);
      forward.add(e->duration);
    }
  }
  CostModel costs;
  if (forward.value() && *forward.value() > 0) {
    costs.forward = *forward.value();
    costs.stage_scale.assign(max_stage + 1, 1.0);
    for (const auto& [stage, mean] : forward_by_stage)
      if (*mean.value() > 0) costs.stage_scale[stage] = *mean.value() / costs.forward;
  }
  Mean backward, input, weight, pair;
  for (const TraceEvent* e : events) {
    const double k = costs.scale(e->action.stage);
    switch (e->action.type) {
      case ActionType::Backward: backward.add(e->duration / k); break;
      case ActionType::BackwardInput: input.add(e->duration / k); break;
      case ActionType::BackwardWeight: weight.add(e->duration / k); break;
      default: break;
    }
  }
  // B is the full backward; when the run only split it, B = I + W.
  if (backward.value()) costs.backward = *backward.value();
  else if (input.value()) costs.backward = *input.value() + weight.value().value_or(0.0);
  costs.backward = std::max(costs.backward, 1e-9);
  costs.weight = std::min(weight.value().value_or(costs.backward / 2), costs.backward);
  for (const TraceEvent* e : events) {
    if (e->action.type != ActionType::Overlapped) continue;
    // Undo the per-stage scaling the cost model applies to a pair (see CostModel::duration).
    const double separate = costs.forward * costs.scale(e->action.stage) +
                            costs.backward * costs.scale(e->action.bwd_stage);
    pair.add(e->duration * (costs.forward + costs.backward) / separate);
  }
  if (pair.value() && *pair.value() > 0) costs.overlapped = *pair.value();
  costs.comm = 0;  // messages overlap compute in the runtime; their cost shows up as waiting, not as an edge
  return costs;
}

SliceCosts slice_costs_from_trace(const Trace& trace, const std::string& path) {
  const Schedule plan = plan_of_trace(trace, path, "it is not a dualpipe trace: plan needs the schedule that ran (a "
                                      "trace written by dualpipe train or by a runtime program that records its "
                                      "schedule)");
  CostModel per_stage = fit_costs(trace, pick_step(trace, path, -1, "fit costs from"));
  // Stages without a forward in the step leave no scale to spread over their slice.
  if (static_cast<int>(per_stage.stage_scale.size()) != plan.num_stages) per_stage.stage_scale.clear();
  return {costs_per_slice(per_stage, plan.num_ranks, plan.num_stages), plan.num_ranks, plan.num_microbatches};
}

Trace trace_from_simulation(const Schedule& schedule, const Simulation& simulation, double us_per_unit, int step) {
  DUALPIPE_REQUIRE(us_per_unit > 0, "microseconds per cost unit must be positive, got ", us_per_unit);
  DUALPIPE_REQUIRE(!schedule.has_communication(), "trace_from_simulation takes the compute-only schedule");
  Trace trace = trace_header(schedule);
  const Schedule lowered = lower_communication(schedule);
  for (int r = 0; r < schedule.num_ranks; ++r) {
    std::size_t compute = 0;  // position in the compute-only list, where the simulation's times are
    double clock = 0;         // messages take no time in the model: stamp them at the rank's current time
    for (std::size_t i = 0; i < lowered.actions[r].size(); ++i) {
      const Action& a = lowered.actions[r][i];
      TraceEvent e{a, r, static_cast<int>(i), step, clock * us_per_unit, 0.0};
      if (a.is_compute()) {
        const ActionTime& t = simulation.timeline[r][compute++];
        e.start = t.start * us_per_unit;
        e.duration = (t.end - t.start) * us_per_unit;
        clock = t.end;
      }
      trace.events.push_back(e);
    }
  }
  return trace;
}

}  // namespace dualpipe
