// dualpipe._runtime: our C++ executor driving Python nn.Modules over a torch.distributed process group, for
// dualpipe.DualPipe and dualpipe.DualPipeV (python/dualpipe/deepseek.py holds the reference's API around it).
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "dualpipe/comm/process_group_communicator.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/util/error.h"
#include "python_stage.h"

namespace dualpipe::python_runtime {
namespace {

using runtime::Tensors;

// One schedule on this rank's modules: built once per (kind, micro-batch count) and reused every step.
class Pipeline {
 public:
  // `shapes` (with `dtype`, `device`): what crosses every stage boundary, as the reference's set_p2p_tensor_shapes
  // declares it; receives are then posted ahead with no shapes travelling. Empty: every message carries its shapes.
  Pipeline(const std::string& kind, int num_microbatches, const std::map<int, py::object>& modules, py::object hook,
           c10::intrusive_ptr<c10d::ProcessGroup> group, std::vector<int> rank_mapping, double timeout_s,
           const std::vector<std::vector<int64_t>>& shapes, at::ScalarType dtype, at::Device device) {
    ScheduleOptions options;
    options.num_ranks = group->getSize();
    options.num_microbatches = num_microbatches;
    Schedule schedule = make_schedule(kind, options);
    auto shared = std::make_shared<StageModules>();
    for (const auto& [s, m] : modules) (*shared)[s] = share(m);
    SharedObject shared_hook = hook.is_none() ? nullptr : share(std::move(hook));
    std::map<int, std::shared_ptr<runtime::Stage>> stages;
    for (const auto& [s, m] : *shared) stages[s] = std::make_shared<PythonStage>(s, shared, shared_hook);
    comm::ProcessGroupCommunicatorOptions comm_options;
    comm_options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    runtime::ExecutorOptions executor_options;
    executor_options.rank_mapping = std::move(rank_mapping);
    // Python modules may compute parameter gradients as side effects of their own autograd Functions (the
    // reference's example does), which the generic split would run twice: the whole backward runs at I.
    executor_options.weight_split = runtime::WeightSplit::SplitAwareLayers;
    if (!shapes.empty()) {
      runtime::BoundarySpec spec;
      for (const auto& shape : shapes) spec.push_back({shape, dtype, device, /*requires_grad=*/true});
      executor_options.boundaries = runtime::ExecutorOptions::uniform(spec, schedule.num_stages);
    }
    auto communicator = std::make_shared<comm::ProcessGroupCommunicator>(std::move(group), comm_options);
    executor_ = std::make_unique<runtime::Executor>(schedule, std::move(stages), std::move(communicator),
                                                    executor_options);
  }

  // Returns (losses, outputs) of the micro-batches whose loss this rank computes, in order.
  py::tuple step(std::vector<Tensors> inputs, std::vector<Tensors> labels, py::object criterion, bool return_outputs) {
    runtime::StepArgs args;
    args.microbatch_inputs = std::move(inputs);
    args.microbatch_labels = std::move(labels);
    if (!criterion.is_none()) args.criterion = python_criterion(share(std::move(criterion)));
    args.num_microbatches = executor_->lowered_schedule().num_microbatches;
    args.return_outputs = return_outputs;
    runtime::StepResult result;
    {
      py::gil_scoped_release release;  // held again only inside the modules, the criterion and the hook
      result = executor_->step(args);
    }
    Tensors losses;
    std::vector<Tensors> outputs;
    for (int m : executor_->loss_microbatches()) {
      if (result.losses[m].defined()) losses.push_back(result.losses[m]);
      if (return_outputs) outputs.push_back(result.outputs[m]);
    }
    return py::make_tuple(losses, outputs);
  }

  const std::vector<int>& entering() const { return executor_->entering_microbatches(); }
  const std::vector<int>& loss_owned() const { return executor_->loss_microbatches(); }

 private:
  std::unique_ptr<runtime::Executor> executor_;
};

}  // namespace
}  // namespace dualpipe::python_runtime

PYBIND11_MODULE(_runtime, m) {
  using namespace dualpipe;
  using dualpipe::python_runtime::Pipeline;
  m.doc() = "dualpipe's executor on Python modules (internal to dualpipe.DualPipe and dualpipe.DualPipeV)";
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const comm::CommError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  py::class_<Pipeline>(m, "Pipeline")
      .def(py::init<const std::string&, int, const std::map<int, py::object>&, py::object,
                    c10::intrusive_ptr<c10d::ProcessGroup>, std::vector<int>, double,
                    const std::vector<std::vector<int64_t>>&, at::ScalarType, at::Device>(),
           py::arg("kind"), py::arg("num_microbatches"), py::arg("modules"), py::arg("hook"), py::arg("group"),
           py::arg("rank_mapping"), py::arg("timeout_s"), py::arg("shapes"), py::arg("dtype"), py::arg("device"))
      .def("step", &Pipeline::step, py::arg("inputs"), py::arg("labels"), py::arg("criterion"),
           py::arg("return_outputs"))
      .def_property_readonly("entering_microbatches", &Pipeline::entering)
      .def_property_readonly("loss_microbatches", &Pipeline::loss_owned);
}
