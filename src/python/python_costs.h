// dualpipe.Costs: the cost model from keyword arguments named as the command line's --cost keys
// (Costs(F=1, B=2, W=1, FB=2.5, a2a=0.5, scale=[1, 1, 2], ...)), with the same rules and defaults.
#pragma once

#include <pybind11/pybind11.h>

namespace dualpipe::python {

void bind_costs(pybind11::module_& module);

}  // namespace dualpipe::python
