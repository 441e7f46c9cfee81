// What `simulate` and `plan` print about a simulated schedule: one table or json object per schedule, and the
// comparison table. Columns are named by what they measure (docs/schedules.md, "Metrics").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dualpipe/cost_model.h"
#include "dualpipe/schedule.h"
#include "dualpipe/simulate.h"

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

// A number of stage activations for people: "4", "2.5", "3.732" (at most three decimals).
std::string format_units(double value);
// The same in json: an integer when whole (what the integer count always printed), else the double.
nlohmann::ordered_json json_units(double value);
std::string fixed(double value, int decimals = 2);

nlohmann::ordered_json simulated_json(const SimulatedSchedule& r);
// The whole-step figures, then one line per rank.
void print_simulated(const SimulatedSchedule& r);
// One row per schedule in the given order (callers sort by step time), then the skipped kinds and why.
void print_comparison_table(const std::vector<SimulatedSchedule>& results, const std::vector<SkippedKind>& skipped);

// Step time first; equal step times by peak activations, then by the paper's bubble rate.
bool faster(const SimulatedSchedule& a, const SimulatedSchedule& b);

}  // namespace dualpipe::cli
