// Costs from measured runs, and the run a simulation stands for: the bridge between traces and the cost model.
#include "dualpipe/sim/trace_costs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "schedule_waits.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/trace/trace_plan.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/median.h"

namespace dualpipe {
namespace {

struct Mean {
  double sum = 0;
  int count = 0;
  void add(double v) { sum += v, ++count; }
  std::optional<double> value() const { return count ? std::optional<double>(sum / count) : std::nullopt; }
};

// The mean duration of one action type on each stage; stages without one get the mean over all stages.
struct StageMeans {
  std::vector<Mean> by_stage;
  Mean all;
  void add(int stage, double v) {
    if (stage >= static_cast<int>(by_stage.size())) by_stage.resize(stage + 1);
    by_stage[stage].add(v);
    all.add(v);
  }
  bool empty() const { return all.count == 0; }
  std::vector<double> per_stage(int num_stages) const {
    std::vector<double> out(num_stages, all.value().value_or(0.0));
    for (int s = 0; s < num_stages && s < static_cast<int>(by_stage.size()); ++s)
      if (by_stage[s].value()) out[s] = *by_stage[s].value();
    return out;
  }
};

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

// The root mean square of (measured - modelled) / modelled over the compute events the model gives a duration.
double relative_residual(const std::vector<const TraceEvent*>& events, const CostModel& costs) {
  double sum = 0;
  int count = 0;
  for (const TraceEvent* e : events) {
    const double modelled = costs.duration(e->action);
    if (!(modelled > 0)) continue;
    const double r = (e->duration - modelled) / modelled;
    sum += r * r;
    ++count;
  }
  return count ? std::sqrt(sum / count) : 0.0;
}

// The data-parallel link's time per reduction, in the units of a mean stage: each REDUCE_GRAD's reduction from its
// start (or from the end of the rank's previous reduction, when that came later: the link runs them one after
// another, as the simulator does) to its completion, divided by its stage's scale. Empty when the step recorded
// no completed reduction.
std::optional<double> reduction_cost(const Trace& trace, int step, const CostModel& costs) {
  std::map<int, std::vector<const TraceEvent*>> by_rank;
  for (const TraceEvent& e : trace.events)
    if (e.step == step && e.action.type == ActionType::ReduceGrad && e.completed >= 0) by_rank[e.rank].push_back(&e);
  Mean reduce;
  for (auto& [rank, events] : by_rank) {
    std::sort(events.begin(), events.end(),
              [](const TraceEvent* a, const TraceEvent* b) { return a->start < b->start; });
    double link_free = -std::numeric_limits<double>::infinity();
    for (const TraceEvent* e : events) {
      const double end = e->start + e->completed;
      reduce.add((end - std::max(e->start, link_free)) / costs.scale(e->action.stage));
      link_free = std::max(link_free, end);
    }
  }
  return reduce.value();
}

}  // namespace

CostFit fit_costs(const Trace& trace, int step) {
  const std::vector<const TraceEvent*> events = step_compute_events(trace, step);
  StageMeans forward, backward, input, weight;
  int num_stages = 1;
  for (const TraceEvent* e : events) {
    num_stages = std::max({num_stages, e->action.stage + 1, e->action.bwd_stage + 1});
    switch (e->action.type) {
      case ActionType::Forward: forward.add(e->action.stage, e->duration); break;
      case ActionType::Backward: backward.add(e->action.stage, e->duration); break;
      case ActionType::BackwardInput: input.add(e->action.stage, e->duration); break;
      case ActionType::BackwardWeight: weight.add(e->action.stage, e->duration); break;
      default: break;
    }
  }
  CostFit fit;
  CostModel& costs = fit.costs;
  costs.comm = 0;  // messages overlap compute in the runtime; their cost shows up as waiting, not as an edge
  if (forward.empty() && backward.empty() && input.empty() && weight.empty()) return fit;
  // Each stage's own means: a stage's F, B and W need not scale alike (an embedding stage's W is small beside
  // its F), so no stage is measured in another's units.
  const std::vector<double> f = forward.per_stage(num_stages);
  std::vector<double> b = backward.per_stage(num_stages), w = weight.per_stage(num_stages);
  const std::vector<double> i = input.per_stage(num_stages);
  for (int s = 0; s < num_stages; ++s) {
    const bool full = s < static_cast<int>(backward.by_stage.size()) && backward.by_stage[s].count > 0;
    // B is the full backward; a stage that only split it has B = I + W.
    if (!full && !input.empty()) b[s] = i[s] + (weight.empty() ? 0.0 : w[s]);
    if (weight.empty()) {
      w[s] = b[s] / 2;
    } else if (w[s] > b[s]) {
      fit.warnings.push_back(detail::concat("stage ", s, ": measured W ", w[s], " us is above its full backward B ",
                                            b[s], " us; W was set to B"));
      w[s] = b[s];
    }
  }
  if (weight.empty() && !backward.empty())
    fit.warnings.push_back("the step split no backward into I and W: W is taken as half of B");
  costs.forward = mean_of(f);
  costs.backward = mean_of(b);
  costs.weight = mean_of(w);
  // Per-stage lists only where the stages differ: uniform stages read as plain F, B, W.
  const auto uneven = [](const std::vector<double>& v) {
    return std::any_of(v.begin(), v.end(), [&](double x) { return x != v.front(); });
  };
  if (uneven(f) || uneven(b) || uneven(w)) costs.stage_forward = f, costs.stage_backward = b, costs.stage_weight = w;
  // Pairs: FB is given for a pair of mean stages, and the model scales it like the separate halves.
  Mean pair;
  for (const TraceEvent* e : events) {
    if (e->action.type != ActionType::Overlapped) continue;
    const double separate = costs.forward_of(e->action.stage) + costs.backward_of(e->action.bwd_stage);
    if (separate > 0) pair.add(e->duration * (costs.forward + costs.backward) / separate);
  }
  if (pair.value() && *pair.value() > 0) costs.overlapped = *pair.value();
  if (const auto reduce = reduction_cost(trace, step, costs)) costs.reduce = std::max(0.0, *reduce);
  fit.residual = relative_residual(events, costs);
  return fit;
}

SliceCosts slice_costs_from_trace(const Trace& trace, const std::string& path) {
  const Schedule plan = plan_of_trace(trace, path, "it is not a dualpipe trace: plan needs the schedule that ran (a "
                                      "trace written by dualpipe train or by a runtime program that records its "
                                      "schedule)");
  CostFit fit = fit_costs(trace, pick_step(trace, path, -1, "fit costs from"));
  CostModel& per_stage = fit.costs;
  // A step whose events name fewer stages than the plan leaves no per-stage values to spread over the slices.
  if (static_cast<int>(per_stage.stage_forward.size()) != plan.num_stages)
    per_stage.stage_forward.clear(), per_stage.stage_backward.clear(), per_stage.stage_weight.clear();
  return {costs_per_slice(per_stage, plan.num_ranks, plan.num_stages), plan.num_ranks, plan.num_microbatches,
          std::move(fit.warnings)};
}

Trace trace_from_simulation(const Schedule& schedule, const Simulation& simulation, double us_per_unit, int step) {
  DUALPIPE_REQUIRE(us_per_unit > 0, "microseconds per cost unit must be positive, got ", us_per_unit);
  DUALPIPE_REQUIRE(!schedule.has_communication(), "trace_from_simulation takes the compute-only schedule");
  Trace trace = trace_header(schedule);
  const Schedule lowered = lower_communication(schedule);
  for (int r = 0; r < schedule.num_ranks; ++r) {
    std::size_t planned = 0;  // position in the schedule without messages, where the simulation's times are
    double clock = 0;         // messages take no time in the model: stamp them at the rank's current time
    for (std::size_t i = 0; i < lowered.actions[r].size(); ++i) {
      const Action& a = lowered.actions[r][i];
      TraceEvent e{a, r, static_cast<int>(i), step, clock * us_per_unit, 0.0};
      if (!a.is_communication()) {
        const ActionTime& t = simulation.timeline[r][planned++];
        e.start = t.start * us_per_unit;
        e.duration = (t.end - t.start) * us_per_unit;
        if (a.is_compute()) clock = t.end;
      }
      trace.events.push_back(e);
    }
  }
  return trace;
}

// Within this share of its duration from its start: the rank only returned from the phase that started it.
constexpr double kWaitedAtOnce = 0.05;

double exchange_us_from_trace(const Trace& trace, const std::string& path) {
  std::vector<double> whole;
  for (const TraceSpan& span : trace.spans)
    if (span.waited <= kWaitedAtOnce * span.duration) whole.push_back(span.duration);
  DUALPIPE_REQUIRE(!whole.empty(), "trace '", path, "' has no expert all-to-all that its ranks waited for from its "
                   "start: record one with dualpipe train --trace of an MoE run with --ep above 1");
  return median(whole);
}

void take_exchanges_from_trace(CostModel& costs, const Trace& trace, const std::string& path) {
  const double exchange = exchange_us_from_trace(trace, path) / 1000;
  if (costs.all_to_all > 0 && !costs.all_to_all_latency)
    costs.all_to_all_latency = std::max(0.0, exchange - costs.all_to_all / (2 * costs.layers));
  costs.all_to_all = 2 * costs.layers * exchange;
  costs.check();
}

void take_waits_from_trace(CostModel& costs, const Trace& trace) {
  const ScheduleWaits waits = schedule_waits(trace);
  if (costs.gap == 0 && waits.gap) costs.gap = waits.gap->value / 1000;
  if (costs.comm == 0 && waits.message) costs.comm = waits.message->value / 1000;
}

}  // namespace dualpipe
