// dualpipe.Simulation, PlanCandidate and Plan, bound from the simulator's and the planner's structs
// (sim/simulate.h, sim/planner.h). The figures are theirs; to_dict() is the json the command line prints.
#include <pybind11/stl.h>

#include <algorithm>
#include <string>

#include "dualpipe/schedule/pytorch_csv.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/layer_partition.h"
#include "dualpipe/sim/plan_file.h"
#include "dualpipe/sim/result_json.h"
#include "dualpipe/util/atomic_file.h"
#include "dualpipe/viz/html.h"
#include "dualpipe/viz/timeline.h"
#include "json_to_python.h"
#include "python_metrics.h"
#include "python_results.h"

namespace py = pybind11;

namespace dualpipe::python {

Schedule named_schedule(const PlanCandidate& candidate) {
  Schedule s = candidate.schedule;
  s.kind = candidate.name;
  return s;
}

SimulationResult simulate_schedule(const Schedule& schedule, const CostModel& costs) {
  costs.check_stages(schedule.num_stages);
  py::gil_scoped_release unlocked;
  return {schedule, costs, simulate(schedule, costs)};
}

void draw(const Schedule& schedule, const Simulation& simulation, const CostModel& costs, const std::string& path) {
  picture_format(path);  // refused before any work
  check_can_write_file(path);
  SvgOptions options;
  options.subtitle.push_back("costs " + costs.to_string() + " (time in cost units)");
  const Timeline timeline = timeline_from_simulation(schedule, simulation, costs);
  write_file_atomically(path, render_picture(path, {timeline}, options));
}

namespace {

// What a simulated schedule is, for the fields a Simulation, a plan's candidate and a Plan share.
struct Simulated {
  const Schedule& schedule;
  const std::string& kind;
  const CostModel& costs;
  const Metrics& metrics;
};

Simulated simulated(const SimulationResult& r) {
  return {r.schedule, r.schedule.kind, r.costs, r.simulation.metrics};
}
Simulated simulated(const PlanCandidate& c) { return {c.schedule, c.name, c.costs, c.metrics}; }
Simulated simulated(const PlanResult& r) { return simulated(r.plan.best); }

// The fields of `dualpipe simulate --format json`, read from the structs.
template <typename T>
void add_simulated_fields(py::class_<T>& cls) {
  const auto of = [](const T& r) { return simulated(r); };
  cls.def_property_readonly("kind", [of](const T& r) { return of(r).kind; })
      .def_property_readonly("ranks", [of](const T& r) { return of(r).schedule.num_ranks; })
      .def_property_readonly("stages", [of](const T& r) { return of(r).schedule.num_stages; })
      .def_property_readonly("microbatches", [of](const T& r) { return of(r).schedule.num_microbatches; })
      .def_property_readonly("costs", [of](const T& r) { return of(r).costs; },
                             "the dualpipe.Costs it was timed with, per stage")
      .def_property_readonly("costs_text", [of](const T& r) { return of(r).costs.to_string(); })
      .def_property_readonly("metrics", [of](const T& r) { return of(r).metrics; },
                             "the step's figures as a dualpipe.Metrics")
      .def_property_readonly("makespan", [of](const T& r) { return of(r).metrics.makespan; })
      .def_property_readonly("bubble", [of](const T& r) { return of(r).metrics.bubble; })
      .def_property_readonly("bubble_rate", [of](const T& r) { return of(r).metrics.bubble_rate; })
      .def_property_readonly("step_bubble_rate", [of](const T& r) { return of(r).metrics.step_bubble_rate; })
      .def_property_readonly("peak_activations", [of](const T& r) { return of(r).metrics.peak_activations(); })
      .def_property_readonly("per_rank", [of](const T& r) { return of(r).metrics.per_rank; },
                             "a dualpipe.RankMetrics per rank");
}

void bind_simulation(py::module_& m) {
  py::class_<SimulationResult> simulation(m, "Simulation",
                                          "A schedule timed under a cost model. to_dict() is `dualpipe simulate "
                                          "--format json`.");
  add_json_output(simulation,
                  [](const SimulationResult& r) { return simulated_json(r.schedule, r.costs, r.simulation.metrics); },
                  "a simulation");
  add_simulated_fields(simulation);
  simulation.def_readonly("schedule", &SimulationResult::schedule)
      .def_property_readonly("timeline", [](const SimulationResult& r) { return timeline_arrays(r.simulation); },
                             "Per rank, a numpy float64 array of shape (actions, 2): each action's start and end, "
                             "in the order of the schedule's actions of the rank.")
      .def_property_readonly("times",
                             [](const SimulationResult& r) {
                               py::list rows;
                               for (std::size_t rank = 0; rank < r.schedule.actions.size(); ++rank) {
                                 py::list row;
                                 for (std::size_t i = 0; i < r.schedule.actions[rank].size(); ++i)
                                   row.append(py::make_tuple(to_string(r.schedule.actions[rank][i]),
                                                             r.simulation.timeline[rank][i].start,
                                                             r.simulation.timeline[rank][i].end));
                                 rows.append(row);
                               }
                               return rows;
                             },
                             "Per rank, (action, start, end) of every action in order.")
      .def("draw", [](const SimulationResult& r, const std::string& path) {
        draw(r.schedule, r.simulation, r.costs, path);
      }, py::arg("path"), "Writes the timeline to path: .svg, or .html with a tooltip per action.")
      .def("to_text", [](const SimulationResult& r) { return format_text(r.schedule); })
      .def("to_csv", [](const SimulationResult& r) { return format_pytorch_csv(r.schedule); });
}

// The layer cut into stages, None without layer costs.
py::object layers_per_stage(const PlanCandidate& c) {
  if (c.layers_per_stage.empty()) return py::none();
  return py::cast(c.layers_per_stage);
}

void bind_candidate(py::module_& m) {
  py::class_<PlanCandidate> candidate(m, "PlanCandidate",
                                      "The best schedule of one kind the planner weighed (a row of `dualpipe "
                                      "plan`'s table).");
  add_simulated_fields(candidate);
  candidate.def_readonly("name", &PlanCandidate::name)
      .def_property_readonly("schedule", &named_schedule)
      .def_property_readonly("max_span",
                             [](const PlanCandidate& c) {
                               double span = 0;
                               for (const RankMetrics& r : c.metrics.per_rank) span = std::max(span, r.span);
                               return span;
                             },
                             "the largest per-rank span")
      .def_readonly("peak_activations_per_slice", &PlanCandidate::peak, "worst rank, in 1/R slice activations")
      .def_property_readonly("parameter_copies", [](const PlanCandidate& c) { return parameter_copies(c); },
                             "the most a rank holds, in 1/R slices")
      .def_readonly("objective_value", &PlanCandidate::score)
      .def_property_readonly("layers_per_stage", &layers_per_stage)
      .def("__repr__", [](const PlanCandidate& c) {
        return "<dualpipe.PlanCandidate " + c.name + ": makespan " + short_text(c.metrics.makespan) + ">";
      });
}

void bind_plan(py::module_& m) {
  py::class_<PlanResult> plan(m, "Plan",
                              "The planner's choice: its chosen candidate's fields, the request's objective and "
                              "limit, and every candidate. to_dict() is `dualpipe plan --format json`.");
  add_json_output(plan, [](const PlanResult& r) { return plan_json(r.plan, r.request); }, "a plan");
  add_simulated_fields(plan);
  const auto best = [](const PlanResult& r) -> const PlanCandidate& { return r.plan.best; };
  plan.def_property_readonly("schedule", [best](const PlanResult& r) { return named_schedule(best(r)); })
      .def_property_readonly("actions", [best](const PlanResult& r) { return best(r).schedule.actions; },
                             "the chosen schedule's, per rank")
      .def_property_readonly("objective", [](const PlanResult& r) {
        return r.request.objective == PlanObjective::Span ? "span" : "makespan";
      })
      .def_property_readonly("objective_value", [best](const PlanResult& r) { return best(r).score; })
      .def_property_readonly("memory_limit", [](const PlanResult& r) { return r.request.memory_limit; },
                             "in 1/R slice activations; None without one")
      .def_property_readonly("peak_activations_per_slice", [best](const PlanResult& r) { return best(r).peak; })
      .def_property_readonly("parameter_copies", [best](const PlanResult& r) { return parameter_copies(best(r)); })
      .def_property_readonly("minimum_memory", [](const PlanResult& r) { return r.plan.minimum_memory; },
                             "the smallest limit any placement the planner knows runs under")
      .def_property_readonly("layers_per_stage", [best](const PlanResult& r) { return layers_per_stage(best(r)); },
                             "with layer_costs: the layers of each stage of the chosen schedule; None without")
      .def_property_readonly("candidates", [](const PlanResult& r) { return r.plan.candidates; },
                             "The best schedule of each kind within the limit, best first (the table of "
                             "`dualpipe plan`), as dualpipe.PlanCandidate.")
      .def_property_readonly("evaluated", [](const PlanResult& r) { return r.plan.evaluated; },
                             "How many schedules the search simulated.")
      .def("to_text", [best](const PlanResult& r) { return format_plan_file(best(r)); },
           "The plan file of `dualpipe plan --format text`: its name and costs in a header, then the schedule.")
      .def("to_csv", [best](const PlanResult& r) { return format_pytorch_csv(best(r).schedule); })
      .def("draw", [best](const PlanResult& r, const std::string& path) {
        const Schedule s = named_schedule(best(r));
        draw(s, simulate(s, best(r).costs), best(r).costs, path);
      }, py::arg("path"), "Writes the chosen schedule's timeline to path: .svg, or .html.")
      .def("__repr__", [best](const PlanResult& r) {
        return "<dualpipe.Plan " + best(r).name + ": makespan " + short_text(best(r).metrics.makespan) + ", " +
               std::to_string(r.plan.candidates.size()) + " candidates>";
      });
}

}  // namespace

void bind_results(py::module_& m) {
  bind_simulation(m);
  bind_candidate(m);
  bind_plan(m);
}

}  // namespace dualpipe::python
