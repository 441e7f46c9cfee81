// The planner's results as Python types bound from the C++ structs (docs/python.md): dualpipe.Action, Placement and
// Schedule (python_schedule.cpp), Simulation, PlanCandidate and Plan (python_results.cpp). Their attributes read the
// structs; the json of `dualpipe schedule|simulate|plan --format json` (sim/result_json.h) is one output format
// beside them, to_dict().
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/plan_request.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/simulate.h"

namespace dualpipe::python {

struct SimulationResult {
  Schedule schedule;
  CostModel costs;
  Simulation simulation;
};

struct PlanResult {
  Plan plan;
  PlanRequest request;
};

// The schedule a candidate names: its kind is the candidate's name ("auto V", "zbv").
Schedule named_schedule(const PlanCandidate& candidate);

// Checks the costs against the schedule's stages, then times it (without the GIL).
SimulationResult simulate_schedule(const Schedule& schedule, const CostModel& costs);

// The timeline picture, as `dualpipe draw` writes it: .svg, or .html with tooltips.
void draw(const Schedule& schedule, const Simulation& simulation, const CostModel& costs, const std::string& path);

void bind_schedule(pybind11::module_& module);  // Action, Placement, Schedule
void bind_results(pybind11::module_& module);   // Simulation, PlanCandidate, Plan

}  // namespace dualpipe::python
