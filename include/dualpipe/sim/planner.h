// The planner: the schedule with the smallest step time (or largest per-rank span) whose peak activations stay
// within a memory limit on every rank, searched across the hand-made families with their knobs and automatic
// schedules built action by action (list_scheduler.h) for one-direction, V-shaped and two-direction placements;
// small cases are solved exactly (exact_search.h). docs/planner.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/schedule/schedule_limits.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/layer_partition.h"
#include "dualpipe/sim/simulate.h"

namespace dualpipe {

enum class PlanObjective {
  Makespan,  // the step time: right when the optimizer step waits for every rank
  Span,      // the largest per-rank span (the Zero Bubble paper's objective; optimizer post-validation)
};

// A memory limit as `plan --memory-limit` takes it: a number without a unit counts 1/R slice activations ("8",
// "7.5"); with a byte unit (util/byte_size.h: "24GiB", "3e9B", "512MB") it is divided by costs.activation_bytes,
// which must then be given. Throws InvalidArgument naming `what` (the option) and the text.
double activation_limit(const std::string& text, const CostModel& costs, const std::string& what);

struct PlanRequest {
  int num_ranks = 4;
  int num_microbatches = 8;
  CostModel costs;  // of one rank's 1/R slice of the model (costs_per_stage() scales them for S > R stages)
  // Peak live activations per rank, in activations of a 1/R slice of the model for one micro-batch (the stage
  // activation of an R-stage cut); none: no limit.
  std::optional<double> memory_limit;
  PlanObjective objective = PlanObjective::Makespan;
  bool automatic = true;       // search automatic schedules too (false: the hand-made families only)
  // The placements allowed (placement_kind()): "linear" (stage s on rank s), "v" (2R stages in a V), "two" (two
  // directions, every stage on two ranks: twice the parameters), "looped" (interleaved). Empty: all.
  std::vector<std::string> placements;
  // Per-layer costs (layer_partition.h): each schedule is simulated with the balanced cut of the layers into its
  // stages, and the costs' F, B, W and per-stage lists are not used (comm, FB, the memory model are).
  std::vector<LayerCost> layers;
  int exact_max_actions = 36;     // solve exactly when a placement's schedule has at most this many actions
  // Nodes each exact search may visit (ExactRequest::node_limit); past it the best found so far is kept. About
  // 60 ns a node in a release build: 0.2 s per placement at most.
  std::int64_t exact_node_limit = 3'000'000;
  int refine_evaluations = 8;     // policies tried around the best one
  // The search's memory, estimated before it starts (kPlanMemoryPerSchedule schedules of 2R stages held at
  // once); a request above it is refused naming the estimate. The CLI's --max-memory.
  std::int64_t max_memory_bytes = kDefaultMaxScheduleMemory;
};

// The planner holds its candidates, their simulations and the search's trials at once: measured at about 2.7
// times one schedule of 2R stages (R=64, M=1024: 139 MB), so 4 is the estimate's factor.
constexpr double kPlanMemoryPerSchedule = 4;

struct PlanCandidate {
  std::string name;   // "zb-h1", "interleaved-1f1b v=3", "auto linear", "exact V", ...
  Schedule schedule;
  CostModel costs;    // as simulated (per stage)
  Metrics metrics;
  double peak = 0;    // worst rank, in 1/R slice activations
  double score = 0;   // the objective's value
  std::vector<int> layers_per_stage;  // the cut of the layers, when the request has layer costs
};

struct Plan {
  PlanCandidate best;
  // Every schedule within the limit that was considered, best first (one per name).
  std::vector<PlanCandidate> candidates;
  // The smallest memory limit any placement the planner knows can run under (a micro-batch at a time).
  double minimum_memory = 0;
  int evaluated = 0;  // schedules simulated
};

// Gives the request per-layer costs: F, B, W and activation sizes come from the layers, so the request's costs
// must leave F, B, W, scale and act_scale at their defaults (InvalidArgument naming the rule otherwise); its
// act_bytes becomes the layers' activation bytes over R, the unit of a 1/R slice. Set num_ranks first.
void set_layer_costs(PlanRequest& request, std::vector<LayerCost> layers);

// Throws InvalidArgument for bad sizes or costs, for a search estimated above max_memory_bytes, and when the
// memory limit is below the feasible minimum (the messages name them).
Plan plan_schedule(const PlanRequest& request);

// "linear", "v", "two" or "looped": how the schedule places its stages.
std::string placement_kind(const Schedule& schedule);

// The peak of a schedule in 1/R slice activations: the worst rank's stage activations x R/S.
double slice_peak(const Schedule& schedule, const Metrics& metrics);

// The objective's value of simulated metrics.
double objective_value(const Metrics& metrics, PlanObjective objective);

}  // namespace dualpipe
