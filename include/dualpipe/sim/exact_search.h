// Exact search for small cases: every per-rank order of forwards, input backwards (I) and deferred weight
// gradients (W) on a placement, with branch and bound on the objective, under a memory limit. I then W dominates a
// full B (the same time on the rank, input gradients earlier, never more memory), so full backwards and overlapped
// pairs are not enumerated; the heuristic (list_scheduler.h) covers pairs.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

#include "dualpipe/schedule/placement.h"
#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/planner.h"

namespace dualpipe {

struct ExactRequest {
  Placement placement;
  int num_microbatches = 1;
  CostModel costs;  // per stage
  double memory_limit = std::numeric_limits<double>::infinity();  // stage activations per rank
  PlanObjective objective = PlanObjective::Makespan;
  std::optional<double> upper_bound;  // only schedules strictly better than this are of interest
  std::int64_t node_limit = 3'000'000;
};

struct ExactResult {
  std::optional<Schedule> schedule;  // the best found strictly below the upper bound; none if nothing is better
  bool complete = false;             // the whole space was searched: nothing better exists
  std::int64_t nodes = 0;
};

ExactResult exact_search(const ExactRequest& request);

// The schedule exact_search finds, if any.
inline std::optional<Schedule> exact_schedule(const ExactRequest& request) { return exact_search(request).schedule; }

}  // namespace dualpipe
