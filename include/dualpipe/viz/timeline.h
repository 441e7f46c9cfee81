// A timeline: what ran where and when, one row per rank, independent of where the times came from (a
// simulated plan or a measured trace) and of how it is drawn (SVG, HTML). The pictures are drawn from it.
#pragma once

#include <string>
#include <vector>

#include "dualpipe/schedule/action.h"
#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/sim/step_figures.h"

namespace dualpipe {

struct TimelineCell {
  Action action;        // a compute action: F, B, I, W or an overlapped pair
  int index = 0;        // position among its rank's compute actions (schedule order)
  double start = 0;
  double end = 0;
  // 0 or 1: the replica a two-direction schedule (DualPipe, Chimera) runs the micro-batch on, or for one-replica
  // schedules with several stages per rank (V shapes, interleaved) the parity of the stage's chunk (stage / R).
  int direction = 0;
  int bwd_direction = 0;  // overlapped pair only: the direction of its backward half
  double split = 0.5;     // overlapped pair only: the share of the cell drawn as its forward half

  double duration() const { return end - start; }
};

// Communication in flight beside the compute cells: a measured MoE step's expert all-to-alls, and a plan's
// data-parallel collectives (UNSHARD, REDUCE_GRAD), which the step waits for.
struct TimelineSpan {
  static constexpr int kDataParallelTrack = 2;
  std::string name;  // "dispatch", "combine backward", "2UNSHARD"
  int track = 0;     // 0: the thread running the schedule; 1: the backward half of an overlapped pair;
                     // kDataParallelTrack: the rank's data-parallel link
  double start = 0;
  double end = 0;
};

struct TimelineRow {
  std::string label;  // "rank 3"
  std::vector<TimelineCell> cells;  // in schedule order
  std::vector<TimelineSpan> spans;  // in start order; measured runs only
};

// The metrics of spec section 2, computed from the cells alone so measured runs get them too.
struct TimelineStats {
  double makespan = 0;
  double bubble = 0;       // max over rows of (makespan - busy)
  double bubble_rate = 0;  // (max span - max busy) / max span
  int peak_activations = 0;  // worst rank, in stage activations
  int num_stages = 0;
};

struct Timeline {
  std::string title;      // "dualpipe, 8 ranks, 20 micro-batches"
  std::string summary;    // "bubble 9, bubble rate 7.1%, peak activations 9 (1.12x model)"
  std::string time_unit;  // "" for cost-model units, "us" for measured microseconds
  std::vector<TimelineRow> rows;
  TimelineStats stats;

  std::size_t num_cells() const;
  double begin() const;  // earliest start (0 for an empty timeline)
  double end() const;    // latest end
};

// The direction rule of TimelineCell::direction for one (stage, micro-batch).
int cell_direction(const Placement& placement, int stage, int microbatch);

// The simulated plan: one row per rank with the compute actions of the schedule timed by the simulation.
// The costs give each pair's split into halves. Title and summary name the schedule and its metrics.
Timeline timeline_from_simulation(const Schedule& schedule, const Simulation& simulation,
                                  const CostModel& costs);

// Computes the stats from the cells (step_figures; peak activations by the rule of simulate.h over each row's
// order).
TimelineStats compute_stats(const Timeline& timeline);

// Each row's cells as compute intervals, for step_figures (sim/step_figures.h).
std::vector<std::vector<ComputeInterval>> compute_intervals(const Timeline& timeline);
// Per row, the data-parallel collectives the step waits for (the spans on TimelineSpan::kDataParallelTrack).
std::vector<std::vector<ComputeInterval>> data_parallel_intervals(const Timeline& timeline);

// "bubble 9, bubble rate 7.1%, makespan 69, peak activations 9 (1.12x model)"; times in the timeline's unit.
std::string describe_stats(const TimelineStats& stats, const std::string& time_unit);

// A duration for people: "9", "2.5" for cost units; "850 us", "1.23 ms", "2.1 s" for microseconds.
std::string format_time(double value, const std::string& time_unit);

}  // namespace dualpipe
