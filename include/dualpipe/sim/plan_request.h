// A planner request from what the front-ends take (`dualpipe plan`'s flags, dualpipe.plan()'s keywords): one
// reading of the objective's name, the memory limit's text and the options, so that both refuse the same inputs
// with the same rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dualpipe/sim/layer_partition.h"
#include "dualpipe/sim/planner.h"

namespace dualpipe {

struct PlanInputs {
  int ranks = 4;
  int microbatches = 8;
  CostModel costs;
  std::vector<LayerCost> layers;       // per-layer costs instead of the costs' F, B, W (set_layer_costs)
  std::string objective = "makespan";  // or "span"
  std::optional<std::string> memory_limit;  // as activation_limit() reads it; none: no limit
  std::vector<std::string> placements;      // empty: all
  bool families_only = false;
  std::int64_t max_memory_bytes = kDefaultMaxScheduleMemory;
};

// How the front-end calls the inputs in its errors: "--objective" and "--memory-limit", or "objective" and
// "memory_limit".
struct PlanInputNames {
  std::string objective, memory_limit;
};

// Throws InvalidArgument naming the input: costs that break their rules (checked first, so that a bad cost is the
// error named), an objective neither "makespan" nor "span", layer costs beside per-stage ones, a memory limit it
// cannot read.
PlanRequest plan_request(const PlanInputs& inputs, const PlanInputNames& names);

}  // namespace dualpipe
