#include "python_stage.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>
#include <typeinfo>

#include "dualpipe/util/error.h"

namespace dualpipe::python_runtime {

using runtime::Tensors;

SharedObject share(py::object object) {
  return SharedObject(new py::object(std::move(object)), [](py::object* o) {
    py::gil_scoped_acquire gil;
    delete o;
  });
}

namespace {

py::tuple to_tuple(const Tensors& tensors) {
  py::tuple out(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) out[i] = py::cast(tensors[i]);
  return out;
}

// What the reference accepts from a module: one tensor, or a tuple or list of them.
Tensors to_tensors(const py::handle& result, int stage) {
  if (THPVariable_Check(result.ptr())) return {py::cast<at::Tensor>(result)};
  DUALPIPE_REQUIRE(py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result), "the module of stage ",
                   stage, " returned ", std::string(py::str(py::type::of(result))),
                   "; a stage returns a tensor or a tuple or list of tensors");
  Tensors out;
  for (const auto& item : result) {
    DUALPIPE_REQUIRE(THPVariable_Check(item.ptr()), "the module of stage ", stage, " returned a ",
                     std::string(py::str(py::type::of(item))), " among its outputs; every output is a tensor");
    out.push_back(py::cast<at::Tensor>(item));
  }
  return out;
}

// A loss as the reference stacks them: a one-element tensor. `what` names who returned it.
at::Tensor checked_loss(const py::handle& loss, const char* what) {
  DUALPIPE_REQUIRE(THPVariable_Check(loss.ptr()), what, " returned ", std::string(py::str(py::type::of(loss))),
                   "; it must return the loss as a one-element tensor");
  at::Tensor t = py::cast<at::Tensor>(loss);
  DUALPIPE_REQUIRE(t.numel() == 1, what, " returned a tensor of shape ", t.sizes(),
                   "; it must return the loss as a one-element tensor (a scalar), as the reference stacks them");
  return t;
}

}  // namespace

PythonStage::PythonStage(int stage, std::shared_ptr<const StageModules> modules, SharedObject hook,
                         std::shared_ptr<const StepCallables> step)
    : stage_(stage), modules_(std::move(modules)), hook_(std::move(hook)), step_(std::move(step)),
      parameters_(std::make_shared<torch::nn::Module>("PythonStage")) {
  py::gil_scoped_acquire gil;
  int i = 0;
  for (const auto& p : modules_->at(stage_)->attr("parameters")()) {
    at::Tensor t = py::cast<at::Tensor>(p);
    parameters_->register_parameter("p" + std::to_string(i++), t, t.requires_grad());
  }
}

Tensors PythonStage::forward(const Tensors& inputs) {
  py::gil_scoped_acquire gil;
  return to_tensors((*modules_->at(stage_))(*to_tuple(inputs)), stage_);
}

// As the reference calls it: hook(module0, inputs0, criterion0, labels0, module1, loss1, outputs1, output_grads1)
// returns (outputs0, loss0). criterion0 and labels0 are given where the forward's stage is the last one (else None
// and []), and loss0 is then the forward's loss; the hook's backward accumulates into .grad, from which `collect`
// takes the input gradients.
Tensors PythonStage::overlapped_pair(const Tensors& inputs, const runtime::BackwardHalf& backward,
                                     runtime::ForwardLoss& loss) {
  if (!hook_ || !backward.collect || backward.roots.empty()) return Stage::overlapped_forward_backward(inputs, backward);
  Tensors outputs;
  {
    py::gil_scoped_acquire gil;
    const bool from_loss = backward.roots.size() == 1 && !backward.root_grads[0].defined();
    const bool computes_loss = loss.labels != nullptr && step_->criterion;
    py::object none = py::none();
    py::object result = (*hook_)(*modules_->at(stage_), py::list(to_tuple(inputs)),
                                 computes_loss ? *step_->criterion : none,
                                 computes_loss ? py::list(to_tuple(*loss.labels)) : py::list(),
                                 *modules_->at(backward.stage), from_loss ? py::cast(backward.roots[0]) : none,
                                 from_loss ? py::tuple() : to_tuple(backward.roots),
                                 from_loss ? py::tuple() : to_tuple(backward.root_grads));
    DUALPIPE_REQUIRE(py::isinstance<py::tuple>(result) && py::len(result) == 2,
                     "overlapped_forward_backward returns (outputs0, loss0), got ",
                     std::string(py::str(py::type::of(result))));
    outputs = to_tensors(result[py::int_(0)], stage_);
    py::object loss0 = result[py::int_(1)];
    if (computes_loss && !loss0.is_none()) loss.loss = checked_loss(loss0, "overlapped_forward_backward's loss0");
  }
  backward.collect();
  return outputs;
}

runtime::Criterion python_criterion(SharedObject criterion) {
  return [criterion](const Tensors& outputs, const Tensors& labels) {
    py::gil_scoped_acquire gil;
    Tensors args = outputs;
    args.insert(args.end(), labels.begin(), labels.end());
    return checked_loss((*criterion)(*to_tuple(args)), "the criterion");
  };
}

bool is_python_function(const torch::autograd::Node& node) {
  // By its dynamic type's name: libtorch_python exports no typeinfo for PyNode, so neither dynamic_cast nor
  // typeid(PyNode) links against it. (A wrong answer double-counts the reference's example's gradients, which its
  // test checks.)
  return std::strcmp(typeid(node).name(), "N5torch8autograd6PyNodeE") == 0;
}

}  // namespace dualpipe::python_runtime
