#include "python_costs.h"

#include <string>

#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/kineto_plan.h"
#include "dualpipe/sim/kineto_report.h"
#include "dualpipe/sim/result_json.h"
#include "json_to_python.h"

namespace py = pybind11;

namespace dualpipe::python {
namespace {

// One --cost item: a number, a bool (recompute), a list of numbers (per stage: F, B, W, scale, act_scale), or pair's
// word.
std::string item(const std::string& key, const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return key + "=" + (value.cast<bool>() ? "1" : "0");
  if (py::isinstance<py::str>(value)) {
    if (key == "pair") return key + "=" + value.cast<std::string>();
    throw py::type_error("Costs(" + key + "=...): a number or a list of numbers, not a string");
  }
  if (py::isinstance<py::sequence>(value)) {
    std::string list;
    for (const py::handle& v : value.cast<py::sequence>())
      list += (list.empty() ? "" : ":") + exact_text(v.cast<double>());
    return key + "=" + list;
  }
  return key + "=" + exact_text(value.cast<double>());
}

// The keywords become the --cost text, read by the same CostModel::parse as the command line: one set of names,
// rules and error messages ("unknown key", "W must be <= B") for both.
CostModel from_keywords(const py::kwargs& keywords) {
  std::string spec;
  for (const auto& [key, value] : keywords) {
    if (value.is_none()) continue;
    spec += (spec.empty() ? "" : ",") + item(key.cast<std::string>(), value);
  }
  CostModel costs = CostModel::parse(spec);
  costs.check();
  return costs;
}

// `dualpipe plan --from-kineto`'s costs of torch.profiler traces (a file, several, or a directory of one per rank);
// what had to be assumed comes as Python warnings.
py::object from_kineto(const std::vector<std::string>& paths, const KinetoCostNames& names, int ranks,
                       bool with_sources) {
  KinetoRun run;
  {
    py::gil_scoped_release unlocked;
    names.check();
    run = read_kineto_run(read_kineto_ranks(paths), names, ranks);
  }
  const std::string source = paths.size() == 1 ? paths[0] : paths[0] + ", ...";
  for (const std::string& warning : run.costs.warnings)
    PyErr_WarnEx(PyExc_UserWarning, ("Costs.from_kineto('" + source + "'): " + warning).c_str(), 1);
  py::object costs = py::cast(run.costs.costs);
  if (!with_sources) return costs;
  return py::make_tuple(costs, to_python(kineto_costs_json(&run.costs)["cost_sources"]));
}

// A path (str or os.PathLike), or a sequence of them, as strings.
std::vector<std::string> kineto_paths(const py::object& path) {
  if (py::isinstance<py::str>(path) || py::hasattr(path, "__fspath__"))
    return {py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>()};
  if (!py::isinstance<py::sequence>(path))
    throw py::type_error("Costs.from_kineto: a path (a trace or a directory of them) or a list of paths");
  std::vector<std::string> paths;
  for (const py::handle& p : path.cast<py::sequence>())
    paths.push_back(kineto_paths(py::reinterpret_borrow<py::object>(p))[0]);
  if (paths.empty()) throw py::value_error("Costs.from_kineto: no trace given");
  return paths;
}

}  // namespace

void bind_costs(py::module_& m) {
  py::class_<CostModel> costs(
      m, "Costs",
      "Per-action costs and the memory model, as the command line's --cost: F forward [1], B full backward [2], W its "
      "weight part [1], I the input-gradient half of a split backward [B-W], FB an overlapped F&B pair [F+B], "
      "comm cross-rank latency [0], gap a rank's host time between "
      "its compute actions [0], a2a expert all-to-all of a stage's forward [0], a2a_latency the part of each exchange "
      "that exchanges under way at once do not share [0], "
      "layers MoE layers of a slice, over whose exchanges a2a spreads [1], pair 'phases' or "
      "'threads', how an overlapped pair runs its halves ['phases'], unshard and reduce a "
      "stage's data-parallel gather and gradient reduction [0], scale per-stage multipliers, act_bytes bytes of one "
      "stage activation, act_scale per-stage activation sizes, w_mem [1], recompute [False], input_mem [0.05]. F, B, "
      "W and I take one number per stage for uneven stages. Fields as the json's costs.");
  add_json_fields(costs, [](const CostModel& c) { return costs_json(c); }, "Costs");
  costs.def(py::init(&from_keywords))
      .def_static("parse", [](const std::string& text) {
        CostModel parsed = CostModel::parse(text);
        parsed.check();
        return parsed;
      }, py::arg("text"), "From the --cost text: Costs.parse('F=1,B=2,W=1,FB=2.5').")
      .def_static(
          "from_kineto",
          [](const py::object& path, const std::string& forward, const std::string& backward,
             const std::string& backward_input, const std::string& weight, const std::string& overlapped,
             const std::string& comm, const std::string& update, int ranks, bool with_sources) {
            return from_kineto(kineto_paths(path),
                               {forward, backward, backward_input, weight, overlapped, comm, update}, ranks,
                               with_sources);
          },
          py::arg("path"), py::kw_only(), py::arg("forward") = KinetoCostNames{}.forward,
          py::arg("backward") = KinetoCostNames{}.backward,
          py::arg("backward_input") = KinetoCostNames{}.backward_input,
          py::arg("weight") = KinetoCostNames{}.weight, py::arg("overlapped") = KinetoCostNames{}.overlapped,
          py::arg("comm") = KinetoCostNames{}.comm, py::arg("update") = KinetoCostNames{}.update,
          py::arg("ranks") = 0, py::arg("with_sources") = false,
          "The costs (microseconds, of a 1/R slice where the traces name the schedule that ran) of torch.profiler "
          "traces, as `dualpipe plan --from-kineto` reads them: a trace, a list of them or a directory of one per "
          "rank; the keywords are the regular expressions of the regions each cost is read from (docs/profile.md); "
          "ranks: where the traces name stages but no schedule, the costs per slice of that many ranks. "
          "with_sources=True returns (costs, sources): which regions made each cost, and how.")
      .def("__str__", &CostModel::to_string)
      .def("__repr__", [](const CostModel& c) { return "dualpipe.Costs.parse('" + c.to_string() + "')"; });
}

}  // namespace dualpipe::python
