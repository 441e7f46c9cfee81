// The json forms of a schedule, a simulation and a plan: what `dualpipe schedule`, `simulate` and `plan` print with
// --format json, and the fields of the Python package's Schedule, Simulation and Plan objects (docs/python.md).
// One definition, so the command line and Python cannot drift apart.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/simulate.h"

namespace dualpipe {

// A number of stage activations: an integer when whole (what the integer count always printed), else the double.
nlohmann::ordered_json json_units(double value);

// The cost model: numbers, or one number per stage where the costs are per stage; null where unset.
nlohmann::ordered_json costs_json(const CostModel& costs);

// kind, ranks, stages, microbatches, placement (replicas, rank_of_stage, replica_of_microbatch for two
// directions) and the actions per rank in their text form. Without `with_actions` the actions are left out: the
// rest is small, the actions are most of a large schedule's json.
nlohmann::ordered_json schedule_json(const Schedule& schedule, bool with_actions = true);

// The actions per rank in their text form ("0F1", "(0F3;3B5)").
nlohmann::ordered_json actions_json(const Schedule& schedule);

// The schedule's sizes, the costs it was timed with, the step's figures and one object per rank.
nlohmann::ordered_json simulated_json(const Schedule& schedule, const CostModel& costs, const Metrics& metrics);

// The most parameter copies a rank of the candidate holds, in 1/R slices (2 for a two-direction placement).
double parameter_copies(const PlanCandidate& candidate);

// The chosen schedule as simulated_json (its kind the plan's name), then the objective, the memory limit and
// feasible minimum, the peak in 1/R slice activations, the layer cut when layer costs were given, the actions
// (left out without `with_actions`).
nlohmann::ordered_json plan_json(const Plan& plan, const PlanRequest& request, bool with_actions = true);

}  // namespace dualpipe
