// A measured step as a timeline, and the cost model that puts the plan on the same scale.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "dualpipe/error.h"
#include "dualpipe/text_format.h"
#include "dualpipe/trace.h"

namespace dualpipe {
namespace {

std::vector<const TraceEvent*> compute_events(const Trace& trace, int step) {
  std::vector<const TraceEvent*> out;
  for (const TraceEvent& e : trace.events)
    if (e.step == step && e.action.is_compute()) out.push_back(&e);
  if (out.empty()) {
    std::string steps;
    for (int s : trace.steps()) steps += detail::concat(steps.empty() ? "" : ", ", s);
    throw InvalidArgument(detail::concat("the trace has no compute events for step ", step, " (steps recorded: ",
                                         steps.empty() ? "none" : steps, ")"));
  }
  return out;
}

struct Mean {
  double sum = 0;
  int count = 0;
  void add(double v) { sum += v, ++count; }
  std::optional<double> value() const { return count ? std::optional<double>(sum / count) : std::nullopt; }
};

}  // namespace

CostModel fit_costs(const Trace& trace, int step) {
  const std::vector<const TraceEvent*> events = compute_events(trace, step);
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

Timeline timeline_from_trace(const Trace& trace, int step) {
  const std::vector<const TraceEvent*> events = compute_events(trace, step);
  std::optional<Schedule> plan;
  if (!trace.schedule.empty()) {
    try {
      plan = parse_text(trace.schedule);
    } catch (const Error& e) {
      throw InvalidArgument(detail::concat("the trace's dualpipe.schedule is not a schedule: ", e.what()));
    }
  }
  int num_rows = trace.num_ranks;
  double begin = std::numeric_limits<double>::infinity();
  for (const TraceEvent* e : events) {
    num_rows = std::max(num_rows, e->rank + 1);
    begin = std::min(begin, e->start);
  }
  const CostModel costs = fit_costs(trace, step);

  Timeline t;
  t.time_unit = "us";
  t.title = detail::concat("measured: ", trace.kind.empty() ? "run" : trace.kind, ", ", num_rows, " ranks");
  if (trace.num_microbatches > 0) t.title += detail::concat(", ", trace.num_microbatches, " micro-batches");
  t.title += detail::concat(", step ", step);
  t.rows.resize(num_rows);
  for (int r = 0; r < num_rows; ++r) t.rows[r].label = detail::concat("rank ", r);
  std::vector<std::vector<const TraceEvent*>> by_rank(num_rows);
  for (const TraceEvent* e : events) by_rank[e->rank].push_back(e);
  for (int r = 0; r < num_rows; ++r) {
    // args.index is the order the rank ran its actions in; the clock only breaks ties.
    std::stable_sort(by_rank[r].begin(), by_rank[r].end(), [](const TraceEvent* a, const TraceEvent* b) {
      return a->index != b->index ? a->index < b->index : a->start < b->start;
    });
    for (const TraceEvent* e : by_rank[r]) {
      TimelineCell c;
      c.action = e->action;
      c.index = static_cast<int>(t.rows[r].cells.size());
      c.start = e->start - begin;
      c.end = c.start + e->duration;
      if (plan) {
        c.direction = cell_direction(plan->placement, e->action.stage, e->action.microbatch);
        if (e->action.type == ActionType::Overlapped)
          c.bwd_direction = cell_direction(plan->placement, e->action.bwd_stage, e->action.bwd_microbatch);
      }
      if (e->action.type == ActionType::Overlapped) {
        const double f = costs.duration(e->action.forward_half());
        const double b = costs.duration(e->action.backward_half());
        c.split = f + b > 0 ? f / (f + b) : 0.5;
      }
      t.rows[r].cells.push_back(c);
    }
  }
  for (const TraceSpan& span : trace.spans) {
    if (span.step != step || span.rank >= num_rows) continue;
    t.rows[span.rank].spans.push_back({span.name, span.track, span.start - begin, span.start - begin + span.duration});
  }
  for (TimelineRow& row : t.rows) {
    std::stable_sort(row.spans.begin(), row.spans.end(),
                     [](const TimelineSpan& a, const TimelineSpan& b) { return a.start < b.start; });
  }
  t.stats = compute_stats(t);
  if (trace.num_stages > 0) t.stats.num_stages = trace.num_stages;
  t.summary = describe_stats(t.stats, t.time_unit);
  return t;
}

}  // namespace dualpipe
