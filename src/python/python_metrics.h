// A simulation's results as Python types bound from the C++ structs (sim/simulate.h): dualpipe.Metrics and
// dualpipe.RankMetrics with attributes, and the timeline as numpy arrays. The JSON fields of dualpipe.Simulation
// (result_json.h) stay one output format beside them.
#pragma once

#include <pybind11/pybind11.h>

#include "dualpipe/sim/simulate.h"

namespace dualpipe::python {

void bind_metrics(pybind11::module_& module);

// Per rank, a float64 array of shape (actions on the rank, 2): each action's start and end, in the order of
// schedule.actions[rank].
pybind11::list timeline_arrays(const Simulation& simulation);

}  // namespace dualpipe::python
