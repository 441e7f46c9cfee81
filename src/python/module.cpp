// dualpipe._core: the planner for Python (docs/python.md). Schedules, simulations and plans are the library's own
// objects; their fields are those of `dualpipe schedule|simulate|plan --format json` (sim/result_json.h), read as
// attributes or whole with to_dict(). The python/dualpipe package re-exports these and adds the PyTorch export.
// Conversion only: every rule and every figure comes from the library, as for the command line.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/phase_order.h"
#include "dualpipe/schedule/pytorch_csv.h"
#include "dualpipe/schedule/schedule_file.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/layer_partition.h"
#include "dualpipe/sim/plan_file.h"
#include "dualpipe/sim/plan_request.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/result_json.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "dualpipe/viz/html.h"
#include "dualpipe/viz/timeline.h"
#include "json_to_python.h"
#include "python_errors.h"
#include "python_costs.h"
#include "python_metrics.h"

namespace py = pybind11;

namespace dualpipe::python {
namespace {

struct SimulationResult {
  Schedule schedule;
  CostModel costs;
  Simulation simulation;
};

struct PlanResult {
  Plan plan;
  PlanRequest request;
  Schedule schedule() const {
    Schedule s = plan.best.schedule;
    s.kind = plan.best.name;
    return s;
  }
};

// A whole number of bytes above 0, or a size with its unit ('4GiB'); None: the default.
std::int64_t byte_limit(const py::object& value, const char* what) {
  if (value.is_none()) return kDefaultMaxScheduleMemory;
  if (py::isinstance<py::str>(value)) return parse_byte_size(value.cast<std::string>(), what);
  // Integers of any kind (numpy's too: __index__), and floats holding a whole number; not bool.
  const bool integer = PyIndex_Check(value.ptr()) && !py::isinstance<py::bool_>(value);
  const bool number = integer || py::isinstance<py::float_>(value);
  const double bytes = integer ? py::int_(value).cast<double>() : number ? value.cast<double>() : 0;
  DUALPIPE_REQUIRE(number && bytes >= 1 && bytes <= 9.0e18 && bytes == std::floor(bytes), what, "=",
                   std::string(py::repr(value)), " is not a memory size: give a whole number of bytes above 0, or a "
                   "size with its unit such as '4GiB' (", kByteUnitsHelp, ")");
  return static_cast<std::int64_t>(bytes);
}

// The timeline picture of a simulated schedule, as `dualpipe draw` writes it: .svg, or .html with tooltips.
void draw(const Schedule& schedule, const Simulation& simulation, const CostModel& costs, const std::string& path) {
  picture_format(path);  // refused before any work
  check_can_write_file(path);
  SvgOptions options;
  options.subtitle.push_back("costs " + costs.to_string() + " (time in cost units)");
  const Timeline timeline = timeline_from_simulation(schedule, simulation, costs);
  write_file_atomically(path, render_picture(path, {timeline}, options));
}

// PyTorch's compute actions per rank as (type, stage, micro-batch, backward stage, backward micro-batch); the
// package's dualpipe.pytorch turns them into torch.distributed.pipelining actions.
py::list pytorch_actions(const Schedule& schedule) {
  require_one_rank_per_stage(schedule);
  py::list rows;
  for (const auto& rank_actions : schedule.actions) {
    py::list row;
    for (const Action& a : rank_actions)
      if (a.is_compute())
        row.append(py::make_tuple(std::string(type_name(a.type)), a.stage, a.microbatch, a.bwd_stage,
                                  a.bwd_microbatch));
    rows.append(row);
  }
  return rows;
}

SimulationResult simulate_schedule(const Schedule& schedule, const CostModel& costs) {
  costs.check_stages(schedule.num_stages);
  py::gil_scoped_release unlocked;
  return {schedule, costs, simulate(schedule, costs)};
}

// Per-layer costs: a layer-cost file as `plan --layer-costs` reads it, or rows of (F, B, W, act_bytes), read by the
// same parser (its rules and messages; the line is the layer's position).
std::vector<LayerCost> layer_costs(const py::object& layers) {
  if (py::isinstance<py::str>(layers)) return read_layer_costs(layers.cast<std::string>());
  std::string table;
  for (const py::handle& row : layers.cast<py::sequence>()) {
    for (const py::handle& value : row.cast<py::sequence>()) table += exact_text(value.cast<double>()) + " ";
    table += "\n";
  }
  return parse_layer_costs(table, "layer_costs");
}

PlanResult plan(int ranks, int microbatches, const CostModel& costs, const py::object& memory_limit,
                const std::string& objective, const std::vector<std::string>& placements, bool families_only,
                const py::object& max_memory, const py::object& layers) {
  PlanInputs inputs;
  inputs.ranks = ranks;
  inputs.microbatches = microbatches;
  inputs.costs = costs;
  if (!layers.is_none()) inputs.layers = layer_costs(layers);
  inputs.objective = objective;
  if (!memory_limit.is_none()) inputs.memory_limit = py::str(memory_limit).cast<std::string>();  // 8, 7.5 or '2GiB'
  inputs.placements = placements;
  inputs.families_only = families_only;
  inputs.max_memory_bytes = byte_limit(max_memory, "max_memory");
  PlanRequest request = plan_request(inputs, {"objective", "memory_limit"});
  py::gil_scoped_release unlocked;
  Plan result = plan_schedule(request);
  validate(result.best.schedule);
  return {std::move(result), std::move(request)};
}

py::list candidates(const Plan& plan) {
  py::list out;
  for (const PlanCandidate& c : plan.candidates) {
    double span = 0;
    for (const RankMetrics& r : c.metrics.per_rank) span = std::max(span, r.span);
    py::dict row;
    row["name"] = c.name;
    row["stages"] = c.schedule.num_stages;
    row["makespan"] = c.metrics.makespan;
    row["max_span"] = span;
    row["bubble_rate"] = c.metrics.bubble_rate;
    row["step_bubble_rate"] = c.metrics.step_bubble_rate;
    row["peak_activations_per_slice"] = c.peak;
    row["parameter_copies"] = parameter_copies(c);
    out.append(row);
  }
  return out;
}

}  // namespace
}  // namespace dualpipe::python

PYBIND11_MODULE(_core, m) {
  using namespace dualpipe;
  using namespace dualpipe::python;
  m.doc() = "dualpipe's planner: schedules, simulation, the memory-limited search (docs/python.md)";
  m.attr("__version__") = DUALPIPE_VERSION;  // the project's (CMakeLists.txt), as `dualpipe --version` says it
  translate_errors();

  bind_costs(m);
  bind_metrics(m);

  py::class_<Schedule> schedule(m, "Schedule",
                                "A pipeline schedule: the ordered actions of every rank and the placement of the "
                                "stages. Fields as `dualpipe schedule --format json`: kind, ranks, stages, "
                                "microbatches, placement, actions.");
  add_json_fields(
      schedule, [](const Schedule& s, bool actions) { return schedule_json(s, actions); }, "a schedule");
  schedule
      .def_static("from_text",
                  [](const std::string& text) {
                    Schedule s = parse_text(text);
                    validate(s);
                    return s;
                  },
                  py::arg("text"), "Reads and validates the text form to_text() writes (`rank 0: 0F0 ...`).")
      .def("to_text", &format_text, "The text form, one line per rank (`dualpipe schedule`).")
      .def("to_csv", &format_pytorch_csv,
           "PyTorch's compute-only CSV form (`dualpipe schedule --format csv`), which dualpipe reads back; "
           "to_pytorch_csv() also refuses what PyTorch's runtime cannot run.")
      .def("to_pytorch_csv",
           [](const Schedule& s) {
             require_one_rank_per_stage(s);
             return format_pytorch_csv(s);
           },
           "The CSV torch.distributed.pipelining's _PipelineScheduleRuntime._load_csv and torchtitan's "
           "pipeline_parallel_schedule_csv load. Raises ValueError for a stage on two ranks (DualPipe, Chimera).")
      .def("to_pytorch",
           [](const Schedule& s) { return py::module_::import("dualpipe.pytorch").attr("actions")(s); },
           "torch.distributed.pipelining's actions, {rank: [_Action, ...]}: F FORWARD, B FULL_BACKWARD, "
           "I BACKWARD_INPUT, W BACKWARD_WEIGHT, a pair OVERLAP_F_B with its two halves. Raises ValueError for a "
           "stage on two ranks (DualPipe, Chimera).")
      .def("_pytorch_actions", &pytorch_actions)
      .def("lower", &lower_communication, "The schedule with the SEND/RECV actions the runtime executes.")
      .def("draw",
           [](const Schedule& s, const std::string& path, const CostModel& costs) {
             const SimulationResult r = simulate_schedule(s, costs);
             draw(r.schedule, r.simulation, r.costs, path);
           },
           py::arg("path"), py::arg("costs") = CostModel{},
           "Writes the simulated timeline to path: .svg, or .html with a tooltip per action (`dualpipe draw`).")
      .def("__len__", &Schedule::num_actions)
      .def("__repr__", [](const Schedule& s) {
        return "<dualpipe.Schedule " + s.kind + ": " + std::to_string(s.num_ranks) + " ranks, " +
               std::to_string(s.num_stages) + " stages, " + std::to_string(s.num_microbatches) + " micro-batches>";
      });

  py::class_<SimulationResult> simulation(
      m, "Simulation",
      "A schedule timed under a cost model. Fields as `dualpipe simulate --format json`: kind, ranks, stages, "
      "microbatches, costs, costs_text, makespan, bubble, bubble_rate, step_bubble_rate, peak_activations, "
      "per_rank.");
  add_json_fields(simulation,
                  [](const SimulationResult& r, bool) {
                    return simulated_json(r.schedule, r.costs, r.simulation.metrics);
                  },
                  "a simulation");
  simulation.def_property_readonly("schedule", [](const SimulationResult& r) { return r.schedule; })
      .def_property_readonly("cost_model", [](const SimulationResult& r) { return r.costs; })
      .def_property_readonly("metrics", [](const SimulationResult& r) { return r.simulation.metrics; },
                             "The step's figures as a dualpipe.Metrics (attributes, per_rank a list of RankMetrics).")
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

  py::class_<PlanResult> plan_class(
      m, "Plan",
      "The planner's choice. Fields as `dualpipe plan --format json`: those of a Simulation, then objective, "
      "objective_value, memory_limit, peak_activations_per_slice, parameter_copies, minimum_memory, actions.");
  add_json_fields(plan_class, [](const PlanResult& r, bool actions) { return plan_json(r.plan, r.request, actions); },
                  "a plan");
  plan_class.def_property_readonly("schedule", &PlanResult::schedule)
      .def_property_readonly("cost_model", [](const PlanResult& r) { return r.plan.best.costs; })
      .def_property_readonly("candidates", [](const PlanResult& r) { return candidates(r.plan); },
                             "The best schedule of each kind within the limit, best first (the table of "
                             "`dualpipe plan`).")
      .def_property_readonly("evaluated", [](const PlanResult& r) { return r.plan.evaluated; },
                             "How many schedules the search simulated.")
      .def("to_text", [](const PlanResult& r) { return format_plan_file(r.plan.best); },
           "The plan file of `dualpipe plan --format text`: its name and costs in a header, then the schedule.")
      .def("to_csv", [](const PlanResult& r) { return format_pytorch_csv(r.plan.best.schedule); })
      .def("draw", [](const PlanResult& r, const std::string& path) {
        const Schedule s = r.schedule();
        draw(s, simulate(s, r.plan.best.costs), r.plan.best.costs, path);
      }, py::arg("path"), "Writes the chosen schedule's timeline to path: .svg, or .html.");

  m.def("schedule",
        [](const std::string& kind, int ranks, int microbatches, int stages_per_rank, const py::object& max_memory) {
          ScheduleOptions options{ranks, microbatches, stages_per_rank, byte_limit(max_memory, "max_memory")};
          Schedule s = make_schedule(kind, options);
          validate(s);
          return s;
        },
        py::arg("kind"), py::arg("ranks"), py::arg("microbatches"), py::kw_only(), py::arg("stages_per_rank") = 0,
        py::arg("max_memory") = py::none(),
        "The schedule of a kind (kinds()) for R ranks and M micro-batches, validated. stages_per_rank: for "
        "interleaved-1f1b (0: its default). max_memory: bytes or '4GiB' that generating may take (default 1GiB).");
  m.def("read_schedule",
        [](const std::string& path) {
          Schedule s = read_schedule_file(path);
          validate(s);
          return s;
        },
        py::arg("path"), "Reads and validates a schedule file: the text form, or PyTorch's CSV for a .csv name.");
  m.def("simulate", &simulate_schedule, py::arg("schedule"), py::arg("costs") = CostModel{},
        "Times a schedule under the costs (per stage of the schedule): `dualpipe simulate`.");
  m.def("plan", &plan, py::arg("ranks"), py::arg("microbatches"), py::arg("costs") = CostModel{}, py::kw_only(),
        py::arg("memory_limit") = py::none(), py::arg("objective") = "makespan",
        py::arg("placements") = std::vector<std::string>{}, py::arg("families_only") = false,
        py::arg("max_memory") = py::none(), py::arg("layer_costs") = py::none(),
        "The schedule with the smallest step time (objective='span': largest per-rank span) whose peak "
        "activations stay within memory_limit (1/R slice activations, or bytes such as '24GiB' given act_bytes): "
        "`dualpipe plan`. costs: of one rank's 1/R slice of the model. placements: any of linear, v, two, looped. "
        "layer_costs: a file as `plan --layer-costs` reads it, or rows of (F, B, W, act_bytes) per layer in model "
        "order; each schedule gets the balanced cut of the layers into its stages (the plan's layers_per_stage).");
  m.def("kinds",
        [] {
          py::list out;
          for (const GeneratorInfo& g : generators())
            out.append(py::make_tuple(std::string(g.name), std::string(g.placement), std::string(g.summary)));
          return out;
        },
        "Every schedule kind as (name, placement, summary), in the order `dualpipe schedule --help` lists them.");
  m.def("interleaved_phase_order",
        [](const std::vector<std::pair<bool, bool>>& backward, const std::vector<std::pair<bool, bool>>& forward) {
          const auto steps = [](const std::vector<std::pair<bool, bool>>& chain) {
            std::vector<PhaseStep> out;
            for (const auto& [starts_exchange, weight] : chain) out.push_back({starts_exchange, weight});
            return out;
          };
          std::vector<std::pair<std::string, size_t>> order;
          for (const PhaseTurn& turn : interleaved_phase_order(steps(backward), steps(forward)))
            order.emplace_back(std::string(1, turn.chain), turn.index);
          return order;
        },
        py::arg("backward"), py::arg("forward"),
        "The order an overlapped pair runs its halves' phases (schedule/phase_order.h, as the runtime and the "
        "simulator run it): each chain a list of (starts_exchange, weight) per phase; returns ('B' or 'F', index) "
        "turns. DeepSeek's interleave: the backward first, a chain keeping the turn until it has started an exchange "
        "(and run the weight phases after it).");
}
