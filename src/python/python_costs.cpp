#include "python_costs.h"

#include <string>

#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/kineto_costs.h"
#include "dualpipe/sim/result_json.h"
#include "json_to_python.h"

namespace py = pybind11;

namespace dualpipe::python {
namespace {

// One --cost item: a number, a bool (recompute), or a list of numbers (per stage: F, B, W, scale, act_scale).
std::string item(const std::string& key, const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return key + "=" + (value.cast<bool>() ? "1" : "0");
  if (py::isinstance<py::str>(value))
    throw py::type_error("Costs(" + key + "=...): a number or a list of numbers, not a string");
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

// `dualpipe profile --kineto`'s costs of a torch.profiler trace; what had to be assumed comes as Python warnings.
CostModel from_kineto(const std::string& path, const KinetoCostNames& names) {
  KinetoCosts fitted;
  {
    py::gil_scoped_release unlocked;
    fitted = costs_from_kineto(summarize_kineto(read_kineto_trace(path)), names);
  }
  for (const std::string& warning : fitted.warnings)
    PyErr_WarnEx(PyExc_UserWarning, ("Costs.from_kineto('" + path + "'): " + warning).c_str(), 1);
  return fitted.costs;
}

}  // namespace

void bind_costs(py::module_& m) {
  py::class_<CostModel> costs(
      m, "Costs",
      "Per-action costs and the memory model, as the command line's --cost: F forward [1], B full backward [2], W its "
      "weight part [1], FB an overlapped F&B pair [F+B], comm cross-rank latency [0], a2a expert all-to-all of a "
      "stage's forward [0], scale per-stage multipliers, act_bytes bytes of one stage activation, act_scale "
      "per-stage activation sizes, w_mem [1], recompute [False], input_mem [0.05]. F, B and W take one number per "
      "stage for uneven stages. Fields as the json's costs.");
  add_json_fields(costs, [](const CostModel& c, bool) { return costs_json(c); }, "Costs");
  costs.def(py::init(&from_keywords))
      .def_static("parse", [](const std::string& text) {
        CostModel parsed = CostModel::parse(text);
        parsed.check();
        return parsed;
      }, py::arg("text"), "From the --cost text: Costs.parse('F=1,B=2,W=1,FB=2.5').")
      .def_static(
          "from_kineto",
          [](const std::string& path, const std::string& forward, const std::string& backward,
             const std::string& weight, const std::string& overlapped, const std::string& comm) {
            return from_kineto(path, {forward, backward, weight, overlapped, comm});
          },
          py::arg("path"), py::kw_only(), py::arg("forward") = "forward", py::arg("backward") = "backward",
          py::arg("weight") = "weight", py::arg("overlapped") = "forward_backward", py::arg("comm") = "p2p",
          "The costs (microseconds) of a torch.profiler trace whose program marked its regions with "
          "record_function, as `dualpipe profile --kineto` reads them: median durations of the forward, backward, "
          "weight, overlapped-pair and message regions named here (an empty name is not read).")
      .def("__str__", &CostModel::to_string)
      .def("__repr__", [](const CostModel& c) { return "dualpipe.Costs.parse('" + c.to_string() + "')"; });
}

}  // namespace dualpipe::python
