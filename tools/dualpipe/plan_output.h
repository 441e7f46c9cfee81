// What `simulate` and `plan` print about a simulated schedule: one table or json object per schedule, and the
// comparison table. Columns are named by what they measure (docs/schedules.md, "Metrics").
#pragma once

#include <string>
#include <vector>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/number_format.h"

namespace dualpipe::cli {

struct SimulatedSchedule {
  Schedule schedule;
  CostModel costs;  // as simulated (scaled to the stage size in comparisons)
  Metrics metrics;
};

struct SkippedKind {
  std::string kind;
  std::string reason;
};

// The whole-step figures, then one line per rank.
std::string simulated_table(const SimulatedSchedule& r);
// One row per schedule in the given order (callers sort by step time), then the skipped kinds and why.
std::string comparison_table(const std::vector<SimulatedSchedule>& results, const std::vector<SkippedKind>& skipped);

// Step time first; equal step times by peak activations, then by the paper's bubble rate.
bool faster(const SimulatedSchedule& a, const SimulatedSchedule& b);

}  // namespace dualpipe::cli
