#include "python_metrics.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "json_to_python.h"

namespace py = pybind11;

namespace dualpipe::python {

void bind_metrics(py::module_& m) {
  py::class_<RankMetrics>(m, "RankMetrics", "One rank's figures of a simulated step (times in cost units).")
      .def_readonly("rank", &RankMetrics::rank)
      .def_readonly("busy", &RankMetrics::busy, "sum of its compute actions' durations")
      .def_readonly("idle", &RankMetrics::idle, "makespan - busy")
      .def_readonly("span", &RankMetrics::span, "its last end - its first start")
      .def_readonly("peak_activations", &RankMetrics::peak_activations, "peak live stage activations")
      .def_readonly("peak_activation_fraction", &RankMetrics::peak_activation_fraction)
      .def_readonly("peak_activation_bytes", &RankMetrics::peak_activation_bytes)
      .def_readonly("stages_held", &RankMetrics::stages_held)
      .def_readonly("parameter_copies", &RankMetrics::parameter_copies)
      .def("__repr__", [](const RankMetrics& r) {
        return "<dualpipe.RankMetrics rank " + std::to_string(r.rank) + ": busy " + short_text(r.busy) + ", span " +
               short_text(r.span) + ">";
      });
  py::class_<Metrics>(m, "Metrics", "A simulated step's figures (times in cost units).")
      .def_readonly("makespan", &Metrics::makespan, "last end - first start over all ranks")
      .def_readonly("bubble", &Metrics::bubble, "max over ranks of idle time (the DualPipe paper's bubble)")
      .def_readonly("bubble_rate", &Metrics::bubble_rate, "(max span - max busy) / max span (Zero Bubble's)")
      .def_readonly("step_bubble_rate", &Metrics::step_bubble_rate, "1 - sum of busy / (R x makespan)")
      .def_readonly("per_rank", &Metrics::per_rank)
      .def_property_readonly("peak_activations", &Metrics::peak_activations, "the worst rank's")
      .def("__repr__", [](const Metrics& r) {
        return "<dualpipe.Metrics makespan " + short_text(r.makespan) + ", bubble " + short_text(r.bubble) + ">";
      });
}

py::list timeline_arrays(const Simulation& simulation) {
  py::list ranks;
  for (const std::vector<ActionTime>& rank : simulation.timeline) {
    py::array_t<double> times({static_cast<py::ssize_t>(rank.size()), py::ssize_t{2}});
    auto view = times.mutable_unchecked<2>();
    for (std::size_t i = 0; i < rank.size(); ++i) {
      view(i, 0) = rank[i].start;
      view(i, 1) = rank[i].end;
    }
    ranks.append(std::move(times));
  }
  return ranks;
}

}  // namespace dualpipe::python
