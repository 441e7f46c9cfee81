#include "dualpipe/viz/timeline.h"

#include <algorithm>
#include <limits>

#include "dualpipe/util/error.h"
#include "dualpipe/util/number_format.h"
#include "viz/text_util.h"

namespace dualpipe {

std::size_t Timeline::num_cells() const {
  std::size_t n = 0;
  for (const TimelineRow& row : rows) n += row.cells.size();
  return n;
}

namespace {

// Whether the step waits for the span: a data-parallel collective, not an all-to-all inside a compute action.
bool waited_for(const TimelineSpan& span) { return span.track == TimelineSpan::kDataParallelTrack; }

// Calls visit(start, end) on every cell and every span the step waits for (begin() and end() run once per row of
// a picture: no copies).
template <typename Visit>
void for_each_interval(const Timeline& t, Visit&& visit) {
  for (const TimelineRow& row : t.rows) {
    for (const TimelineCell& c : row.cells) visit(c.start, c.end);
    for (const TimelineSpan& span : row.spans)
      if (waited_for(span)) visit(span.start, span.end);
  }
}

}  // namespace

double Timeline::begin() const {
  double b = std::numeric_limits<double>::infinity();
  for_each_interval(*this, [&](double start, double) { b = std::min(b, start); });
  return b == std::numeric_limits<double>::infinity() ? 0.0 : b;
}

double Timeline::end() const {
  double e = 0;
  for_each_interval(*this, [&](double, double end) { e = std::max(e, end); });
  return e;
}

int cell_direction(const Placement& placement, int stage, int microbatch) {
  if (placement.num_replicas() == 2) {
    return microbatch >= 0 && microbatch < placement.num_microbatches() ? placement.replica(microbatch) : 0;
  }
  // One replica but several stages per rank (V, interleaved): tell a rank's chunks apart the same way, so
  // the way down and the way back of a V are as distinct as DualPipe's two directions.
  const int R = placement.num_ranks();
  return R > 0 && placement.num_stages() > R ? (stage / R) % 2 : 0;
}

Timeline timeline_from_simulation(const Schedule& schedule, const Simulation& simulation, const CostModel& costs) {
  DUALPIPE_CHECK(simulation.timeline.size() == schedule.actions.size(), "simulation of another schedule");
  Timeline t;
  t.title = detail::concat(schedule.kind, ", ", schedule.num_ranks, " ranks, ", schedule.num_microbatches,
                           " micro-batches, ", schedule.num_stages, " stages");
  t.rows.resize(schedule.actions.size());
  for (std::size_t r = 0; r < schedule.actions.size(); ++r) {
    TimelineRow& row = t.rows[r];
    row.label = detail::concat("rank ", r);
    int index = 0;
    for (std::size_t i = 0; i < schedule.actions[r].size(); ++i) {
      const Action& a = schedule.actions[r][i];
      const ActionTime& time = simulation.timeline[r][i];
      if (a.is_data_parallel() && time.end > time.start)
        row.spans.push_back({to_string(a), TimelineSpan::kDataParallelTrack, time.start, time.end});
      if (!a.is_compute()) continue;  // communication takes no time in the model and is not drawn
      TimelineCell c;
      c.action = a;
      c.index = index++;
      c.start = simulation.timeline[r][i].start;
      c.end = simulation.timeline[r][i].end;
      c.direction = cell_direction(schedule.placement, a.stage, a.microbatch);
      if (a.type == ActionType::Overlapped) {
        c.bwd_direction = cell_direction(schedule.placement, a.bwd_stage, a.bwd_microbatch);
        // The pair costs FB as a whole; its halves are drawn in the ratio of their separate costs.
        const double f = costs.duration(a.forward_half());
        const double b = costs.duration(a.backward_half());
        c.split = f + b > 0 ? f / (f + b) : 0.5;
      }
      row.cells.push_back(c);
    }
  }
  t.stats = compute_stats(t);
  t.stats.num_stages = schedule.num_stages;
  t.summary = describe_stats(t.stats, t.time_unit);
  return t;
}

TimelineStats compute_stats(const Timeline& timeline) {
  TimelineStats s;
  Schedule order;  // the rows' actions in order, for the activation count of simulate.h
  int max_stage = -1;
  for (const TimelineRow& row : timeline.rows) {
    std::vector<Action>& actions = order.actions.emplace_back();
    for (const TimelineCell& c : row.cells) {
      actions.push_back(c.action);
      max_stage = std::max({max_stage, c.action.stage, c.action.bwd_stage});
    }
  }
  const StepFigures figures = step_figures(compute_intervals(timeline), data_parallel_intervals(timeline));
  s.makespan = figures.makespan;
  s.bubble = figures.bubble;
  s.bubble_rate = figures.bubble_rate;
  for (int p : peak_activations(order)) s.peak_activations = std::max(s.peak_activations, p);
  s.num_stages = max_stage + 1;
  return s;
}

std::vector<std::vector<ComputeInterval>> data_parallel_intervals(const Timeline& timeline) {
  std::vector<std::vector<ComputeInterval>> out;
  for (const TimelineRow& row : timeline.rows) {
    std::vector<ComputeInterval>& rank = out.emplace_back();
    for (const TimelineSpan& span : row.spans)
      if (waited_for(span)) rank.push_back({span.start, span.end});
  }
  return out;
}

std::vector<std::vector<ComputeInterval>> compute_intervals(const Timeline& timeline) {
  std::vector<std::vector<ComputeInterval>> out;
  for (const TimelineRow& row : timeline.rows) {
    std::vector<ComputeInterval>& rank = out.emplace_back();
    for (const TimelineCell& c : row.cells) rank.push_back({c.start, c.end});
  }
  return out;
}

std::string format_time(double value, const std::string& time_unit) {
  if (time_unit != "us") return shortest_fixed(value, 3);
  const double a = value < 0 ? -value : value;
  if (a >= 1e6) return shortest_fixed(value / 1e6, 3) + " s";
  if (a >= 1e3) return shortest_fixed(value / 1e3, 3) + " ms";
  return shortest_fixed(value, 1) + " us";
}

std::string describe_stats(const TimelineStats& s, const std::string& time_unit) {
  // The tables' names: step time (makespan), largest idle (the DualPipe paper's bubble), span rate (the Zero
  // Bubble paper's bubble rate).
  std::string out = detail::concat("step time ", format_time(s.makespan, time_unit), ", largest idle ",
                                   format_time(s.bubble, time_unit), ", span rate ",
                                   shortest_fixed(100 * s.bubble_rate, 1), "%, peak activations ",
                                   s.peak_activations);
  if (s.num_stages > 0) {
    out += detail::concat(" (", shortest_fixed(static_cast<double>(s.peak_activations) / s.num_stages, 2),
                          "x model)");
  }
  return out;
}

}  // namespace dualpipe
