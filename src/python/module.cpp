// dualpipe._core: the planner for Python (docs/python.md): its functions here, its results' types bound from the
// library's structs in python_schedule.cpp and python_results.cpp. The python/dualpipe package re-exports these and
// adds the PyTorch export. Conversion only: every rule and every figure comes from the library, as for the command
// line.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/phase_order.h"
#include "dualpipe/schedule/schedule_file.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/layer_partition.h"
#include "dualpipe/sim/plan_request.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "json_to_python.h"
#include "python_errors.h"
#include "python_costs.h"
#include "python_metrics.h"
#include "python_results.h"

namespace py = pybind11;

namespace dualpipe::python {
namespace {

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
  bind_schedule(m);
  bind_results(m);

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
