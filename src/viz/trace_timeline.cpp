// A measured step as a timeline, on the scale of the costs fitted to it.
#include "dualpipe/viz/trace_timeline.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/util/error.h"

namespace dualpipe {

Timeline timeline_from_trace(const Trace& trace, int step) {
  const std::vector<const TraceEvent*> events = step_compute_events(trace, step);
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
  const CostModel costs = fit_costs(trace, step).costs;

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
