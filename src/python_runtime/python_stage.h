// Python code inside the C++ executor (internal to dualpipe._runtime): a Stage whose forward is a Python
// nn.Module, the criterion as a Python callable, and DeepSeek's overlapped_forward_backward hook.
//
// The executor runs with the GIL released (runtime_module.cpp); everything here takes the GIL only for the
// Python call itself, so communication and waits never hold it.
#pragma once

#include <pybind11/pybind11.h>

#include <map>
#include <memory>

#include "dualpipe/runtime/executor.h"
#include "dualpipe/runtime/stage.h"

namespace dualpipe::python_runtime {

namespace py = pybind11;

// A Python object that C++ may copy and drop without the GIL: its reference count is touched only under the GIL.
using SharedObject = std::shared_ptr<py::object>;
SharedObject share(py::object object);

// This rank's modules by stage index, shared by its stages (the hook is handed the module of the backward's stage).
using StageModules = std::map<int, SharedObject>;

// What a step hands the hook besides the tensors: the criterion of step() (None outside a step or without one).
struct StepCallables {
  SharedObject criterion;
};

class PythonStage : public runtime::Stage {
 public:
  // `hook`: the module class's overlapped_forward_backward, or None.
  PythonStage(int stage, std::shared_ptr<const StageModules> modules, SharedObject hook,
              std::shared_ptr<const StepCallables> step);

  runtime::Tensors forward(const runtime::Tensors& inputs) override;
  std::shared_ptr<torch::nn::Module> module() const override { return parameters_; }
  runtime::Tensors overlapped_pair(const runtime::Tensors& inputs, const runtime::BackwardHalf& backward,
                                   runtime::ForwardLoss& loss) override;

 private:
  int stage_;
  std::shared_ptr<const StageModules> modules_;
  SharedObject hook_;
  std::shared_ptr<const StepCallables> step_;
  // The Python module's parameters, the very tensors, registered in a C++ module for the executor's bookkeeping.
  std::shared_ptr<torch::nn::Module> parameters_;
};

// criterion(*outputs, *labels), checked to return a one-element tensor.
runtime::Criterion python_criterion(SharedObject criterion);

// Whether an autograd node is a Python autograd Function's (a user's, or a compiled region's): its backward must run
// exactly once (runtime::ExecutorOptions::runs_once).
bool is_python_function(const torch::autograd::Node& node);

}  // namespace dualpipe::python_runtime
