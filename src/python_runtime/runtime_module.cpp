// dualpipe._runtime: our C++ executor driving Python nn.Modules over a torch.distributed process group, for
// dualpipe.DualPipe and dualpipe.DualPipeV (python/dualpipe/deepseek.py holds the reference's API around it).
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/utils/pybind.h>

#include <optional>

#include "dualpipe/comm/backend.h"
#include "dualpipe/comm/directional_communicator.h"
#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/comm/peer_monitor.h"
#include "dualpipe/runtime/stall_watch.h"
#include "dualpipe/comm/process_group_communicator.h"
#include "dualpipe/comm/socket_mesh.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/split_pairs.h"
#include "dualpipe/util/error.h"
#include "python/python_errors.h"
#include "interrupt_watch.h"
#include "python_stage.h"

namespace dualpipe::python_runtime {
namespace {

using dualpipe::detail::concat;
using runtime::Tensors;

// Where the pipeline's messages go: the user's group itself, or (NCCL, or Gloo under NCCL's rules) two directional
// channels that the group's ranks make through `store` under `prefix` (comm/directional_communicator.h). On the
// user's group, `direct_links` (a Gloo group) sends CPU tensors on sockets of their own, met where the peer monitors
// meet, as GlooCommunicator does (docs/runtime.md, "Transport"), unless DUALPIPE_DIRECT_LINKS=0.
struct ChannelSpec {
  std::optional<c10::intrusive_ptr<c10d::Store>> store;
  std::string prefix;
  bool nccl = false;
  bool direct_links = false;
};

// Where the ranks' peer monitors (comm/peer_monitor.h) meet: `store` under `prefix`, each publishing the address
// it reaches `master_addr` from. Without a store, each rank notices failures by itself (its waits' errors and
// timeouts), and its own failures reach its peers only when its process exits.
struct MonitorSpec {
  std::optional<c10::intrusive_ptr<c10d::Store>> store;
  std::string prefix;
  std::string master_addr;
};

// The user's WeightGradStore protocol (python/dualpipe/utils.py): `_begin()` before an I action's backward,
// `_end()` after it returns the batch it flushed, `_run(batch)` at the W action.
runtime::UserWeightDeferral python_deferral(SharedObject store) {
  runtime::UserWeightDeferral deferral;
  deferral.begin = [store] {
    py::gil_scoped_acquire gil;
    store->attr("_begin")();
  };
  deferral.end = [store]() -> runtime::WeightGradStore::Task {
    py::gil_scoped_acquire gil;
    SharedObject batch = share(store->attr("_end")());
    return [store, batch] {
      py::gil_scoped_acquire gil;
      store->attr("_run")(*batch);
    };
  };
  return deferral;
}

// One schedule on this rank's modules: built once per (kind, micro-batch count) and reused every step.
class Pipeline {
 public:
  // `shapes` (with `dtype`, `device`): what crosses every stage boundary, as the reference's set_p2p_tensor_shapes
  // declares it; receives are then posted ahead with no shapes travelling. Empty: every message carries its shapes.
  // `weight_store`: the WeightGradStore whose protocol defers weight gradients to W, with the generic split of
  // every other weight gradient; None: the whole backward runs at I.
  // `split_pairs`: each overlapped pair run as its forward, then its backward, messages around each (split_pairs.h).
  Pipeline(const std::string& kind, int num_microbatches, const std::map<int, py::object>& modules, py::object hook,
           bool split_pairs, c10::intrusive_ptr<c10d::ProcessGroup> group, std::vector<int> rank_mapping,
           double timeout_s, const std::vector<std::vector<int64_t>>& shapes, at::ScalarType dtype,
           at::Device device, const ChannelSpec& channels, const MonitorSpec& monitor, py::object weight_store,
           bool record_actions, double stall_report_after_s, const std::string& stall_report_dir)
      : rank_(group->getRank()), step_callables_(std::make_shared<StepCallables>()) {
    ScheduleOptions options;
    options.num_ranks = group->getSize();
    options.num_microbatches = num_microbatches;
    Schedule schedule = make_schedule(kind, options);
    if (split_pairs) schedule = split_overlapped_pairs(schedule);
    auto shared = std::make_shared<StageModules>();
    for (const auto& [s, m] : modules) (*shared)[s] = share(m);
    SharedObject shared_hook = hook.is_none() ? nullptr : share(std::move(hook));
    std::map<int, std::shared_ptr<runtime::Stage>> stages;
    for (const auto& [s, m] : *shared)
      stages[s] = std::make_shared<PythonStage>(s, shared, shared_hook, step_callables_);
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    runtime::ExecutorOptions executor_options;
    executor_options.rank_mapping = rank_mapping;
    executor_options.record_trace = record_actions;
    if (weight_store.is_none()) {
      // No split-aware layers in Python: the whole backward runs at I, and W has nothing to do.
      executor_options.weight_split = runtime::WeightSplit::SplitAwareLayers;
    } else {
      executor_options.weight_split = runtime::WeightSplit::Generic;
      executor_options.runs_once = is_python_function;
      executor_options.user_deferral = python_deferral(share(std::move(weight_store)));
    }
    if (!shapes.empty()) {
      runtime::BoundarySpec spec;
      for (const auto& shape : shapes) spec.push_back({shape, dtype, device, /*requires_grad=*/true});
      executor_options.boundaries = runtime::ExecutorOptions::uniform(spec, schedule.num_stages);
      executor_options.boundaries_include_ends = false;  // as the reference's: what travels between stages
    }
    std::shared_ptr<comm::Communicator> communicator;
    {
      py::gil_scoped_release release;  // the monitor's and the channels' rendezvous wait for the other ranks
      monitor_ = make_monitor(*group, monitor, timeout);
      communicator = make_communicator(std::move(group), channels, monitor, schedule, rank_mapping, device, timeout,
                                       monitor_, transport_);
    }
    const int group_size = static_cast<int>(rank_mapping.size());
    executor_ = std::make_unique<runtime::Executor>(schedule, std::move(stages), std::move(communicator),
                                                    executor_options);
    runtime::install_stall_signal();
    runtime::StallWatchOptions watch;
    watch.after = std::chrono::milliseconds(static_cast<int64_t>(stall_report_after_s * 1000));
    watch.world_rank = rank_;
    watch.world_size = group_size;
    watch.directory = stall_report_dir;
    stall_watch_ = std::make_unique<runtime::StallWatch>(executor_->flight_recorder(), monitor_.get(), watch);
  }

  // A thread of the process group's backend needs the interpreter's lock to drop a tensor of Python's (the last
  // collective's); once the interpreter has begun to end, such a thread exits instead, and the process ends with
  // std::terminate. So a pipeline closes before that (deepseek.py's exit handler), and whenever it is collected,
  // without the lock: its own threads end, it lets go of the group, and the backend's threads get the lock to finish.
  ~Pipeline() { close(); }
  void close() {
    if (!executor_ && !stall_watch_ && !monitor_) return;
    py::gil_scoped_release release;
    stall_watch_.reset();
    executor_.reset();
    monitor_.reset();
  }

  // Returns (losses, outputs) of the micro-batches whose loss this rank computes, in order. `interruptible`: Python's
  // default SIGINT handler is installed, and Ctrl-C ends the step's waits (interrupt_watch.h).
  py::tuple step(std::vector<Tensors> inputs, std::vector<Tensors> labels, py::object criterion, bool return_outputs,
                 bool interruptible) {
    runtime::StepArgs args;
    args.microbatch_inputs = std::move(inputs);
    args.microbatch_labels = std::move(labels);
    step_callables_->criterion = criterion.is_none() ? nullptr : share(std::move(criterion));
    if (step_callables_->criterion) args.criterion = python_criterion(step_callables_->criterion);
    args.num_microbatches = executor().lowered_schedule().num_microbatches;
    args.return_outputs = return_outputs;
    runtime::StepResult result;
    try {
      py::gil_scoped_release release;  // held again only inside the modules, the criterion and the hook
      std::optional<InterruptWatch> interrupts;
      if (interruptible)
        interrupts.emplace([monitor = monitor_, rank = rank_] {
          monitor->announce({rank, concat("rank ", rank, " was interrupted (KeyboardInterrupt)")});
        });
      result = executor().step(args);
    } catch (const comm::CommError&) {
      step_callables_->criterion = nullptr;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C ended the waits: KeyboardInterrupt
      throw;
    } catch (const InvalidArgument& e) {
      fail(e.what(), /*invalid_input=*/true);
      throw;
    } catch (const std::exception& e) {  // a module's exception among them
      fail(described(e), /*invalid_input=*/false);
      throw;
    } catch (...) {
      fail("an exception that is not a std::exception", /*invalid_input=*/false);
      throw;
    }
    step_callables_->criterion = nullptr;
    Tensors losses;
    std::vector<Tensors> outputs;
    for (int m : executor().loss_microbatches()) {
      if (result.losses[m].defined()) losses.push_back(result.losses[m]);
      if (return_outputs) outputs.push_back(result.outputs[m]);
    }
    return py::make_tuple(losses, outputs);
  }

  const std::string& transport() const { return transport_; }

  // The last step's actions as (action, start, end), times in seconds of the monotonic clock (time.monotonic()),
  // in the order they ran; empty unless built with record_actions.
  std::vector<std::tuple<std::string, double, double>> last_step_actions() const {
    std::vector<std::tuple<std::string, double, double>> out;
    const auto seconds = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double>(t.time_since_epoch()).count();
    };
    const auto& actions = executor().lowered_schedule().actions[executor().pipeline_rank()];
    for (const runtime::ActionRecord& r : executor().recorded_actions())
      if (r.step == executor().steps_run() - 1)
        out.emplace_back(to_string(actions[r.index]), seconds(r.start), seconds(r.end));
    return out;
  }

  // A step refused on this rank before it began (its arguments): the peers, waiting for this rank's messages, learn
  // it now rather than at their timeout, the program living on or not.
  void refuse(const std::string& why) { fail(why, /*invalid_input=*/true); }

  // DualPipe.record_actions changed after this pipeline was built: from the next step.
  void set_recording(bool on) { executor().set_recording(on); }

  const std::vector<int>& entering() const { return executor().entering_microbatches(); }
  const std::vector<int>& loss_owned() const { return executor().loss_microbatches(); }

 private:
  runtime::Executor& executor() const {
    DUALPIPE_REQUIRE(executor_, "this pipeline was closed (its process group let go) and cannot run again");
    return *executor_;
  }

  // An exception as the peers read it. A Python exception raised in a backward comes through autograd as torch's
  // python_error, whose text is the exception's alone (pybind11's, from a forward, starts with the type already):
  // its type's name goes in front, as Python prints it.
  static std::string described(const std::exception& e) {
    const auto* raised = dynamic_cast<const python_error*>(&e);
    if (!raised || !raised->type) return e.what();
    py::gil_scoped_acquire gil;
    return concat(reinterpret_cast<PyTypeObject*>(raised->type)->tp_name, ": ", e.what());
  }

  // This rank failed and lives on (the program may catch the error): its peers learn it now, with the kind of error,
  // instead of waiting for it until their timeout.
  void fail(const std::string& what, bool invalid_input) {
    step_callables_->criterion = nullptr;
    const std::string prefix = concat("rank ", rank_, ":");
    const bool named = what.rfind(prefix, 0) == 0 || what.rfind(concat("rank ", rank_, " "), 0) == 0;
    if (monitor_) monitor_->announce({rank_, named ? what : concat(prefix, " ", what), invalid_input});
  }

  static std::shared_ptr<comm::PeerMonitor> make_monitor(const c10d::ProcessGroup& group, const MonitorSpec& spec,
                                                         std::chrono::milliseconds timeout) {
    if (!spec.store || group.getSize() <= 1) return std::make_shared<comm::PeerMonitor>(group.getRank());
    c10d::PrefixStore store(spec.prefix, *spec.store);
    return std::make_shared<comm::PeerMonitor>(store, spec.master_addr, group.getRank(), group.getSize(), timeout);
  }

  static std::shared_ptr<comm::Communicator> make_communicator(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                                               const ChannelSpec& channels, const MonitorSpec& meeting,
                                                               const Schedule& schedule,
                                                               const std::vector<int>& rank_mapping,
                                                               at::Device device, std::chrono::milliseconds timeout,
                                                               std::shared_ptr<comm::PeerMonitor> monitor,
                                                               std::string& transport) {
    if (!channels.store) {
      comm::ProcessGroupCommunicatorOptions options;
      options.timeout = timeout;
      const int rank = group->getRank();
      const int size = group->getSize();
      auto communicator =
          std::make_shared<comm::ProcessGroupCommunicator>(std::move(group), options, std::move(monitor));
      transport = "process group";
      if (channels.direct_links && meeting.store && size > 1 && comm::direct_links_from_environment()) {
        communicator->use_direct_links(comm::connect_socket_mesh(**meeting.store, meeting.prefix + "/direct_links",
                                                                 meeting.master_addr, rank, size, timeout,
                                                                 "direct links"));
        transport = "direct links";
      }
      return communicator;
    }
    transport = "directional channels";
    comm::ProcessGroupSpec spec;
    spec.backend = channels.nccl ? comm::BackendKind::nccl : comm::BackendKind::gloo;
    spec.timeout = timeout;
    spec.cuda_device = device.is_cuda() ? device.index() : 0;
    const comm::DirectionalGroups groups = comm::make_directional_groups(
        *channels.store, channels.prefix, group->getRank(), group->getSize(), spec);
    // The peers in the group's ranks: rank_mapping[p] is pipeline rank p's.
    int pipeline_rank = 0;
    while (rank_mapping[pipeline_rank] != group->getRank()) ++pipeline_rank;
    std::vector<int> peers;
    for (int p : pipeline_peers(schedule, pipeline_rank)) peers.push_back(rank_mapping[p]);
    return comm::connect_directional_channels(groups.upward, groups.downward, peers, device, timeout,
                                              std::move(monitor));
  }

  int rank_;  // in the group
  std::string transport_;  // what carries the messages: "direct links", "process group" or "directional channels"
  std::shared_ptr<comm::PeerMonitor> monitor_;
  std::shared_ptr<StepCallables> step_callables_;
  std::unique_ptr<runtime::Executor> executor_;
  std::unique_ptr<runtime::StallWatch> stall_watch_;  // docs/runtime.md, "Stalls"
};

// The placement's rule, so that dualpipe.DualPipe does not restate it (R-1-r, 2R-1-r): the rank's stages replica by
// replica (DualPipe's module 0 is its stage of the direction entering at rank 0), each replica's in stage order (a V
// visits the rank going down, then coming back), and for each the other ranks that hold a copy of it.
std::pair<std::vector<int>, std::vector<std::vector<int>>> stages_of_rank(const std::string& kind, int num_ranks,
                                                                          int rank) {
  ScheduleOptions options;
  options.num_ranks = num_ranks;
  options.num_microbatches = 2 * num_ranks;  // any count the kind takes: the stages' ranks do not depend on it
  const Placement placement = make_schedule(kind, options).placement;
  DUALPIPE_REQUIRE(rank >= 0 && rank < num_ranks, "rank ", rank, " is not a rank of ", num_ranks);
  std::vector<int> stages;
  std::vector<std::vector<int>> copies;
  for (int replica = 0; replica < placement.num_replicas(); ++replica) {
    for (int s = 0; s < placement.num_stages(); ++s) {
      if (placement.rank_of(replica, s) != rank) continue;
      stages.push_back(s);
      copies.emplace_back();
      for (int other = 0; other < placement.num_replicas(); ++other) {
        const int holder = placement.rank_of(other, s);
        if (other != replica && holder != rank) copies.back().push_back(holder);
      }
    }
  }
  return {stages, copies};
}

}  // namespace
}  // namespace dualpipe::python_runtime

namespace {

// A peer that refused its input fails every rank with ValueError, as it fails itself; other peer failures are
// RuntimeError.
PyObject* peer_error_type(const std::exception& e) {
  if (const auto* peer = dynamic_cast<const dualpipe::comm::CommError*>(&e))
    return peer->invalid_input() ? PyExc_ValueError : PyExc_RuntimeError;
  return nullptr;
}

}  // namespace

PYBIND11_MODULE(_runtime, m) {
  using namespace dualpipe;
  using dualpipe::python_runtime::ChannelSpec;
  using dualpipe::python_runtime::MonitorSpec;
  using dualpipe::python_runtime::Pipeline;
  using dualpipe::python_runtime::stages_of_rank;
  m.doc() = "dualpipe's executor on Python modules (internal to dualpipe.DualPipe and dualpipe.DualPipeV)";
  python::translate_errors<peer_error_type>();
  m.def("nccl_compiled_in", &comm::nccl_compiled_in, "whether this LibTorch has NCCL");
  m.def("stages_of_rank", &stages_of_rank, py::arg("kind"), py::arg("num_ranks"), py::arg("rank"),
        "The stages `rank` holds under the kind's placement, in the order of its modules, and the ranks holding "
        "another copy of each: (stages, copies).");
  py::class_<ChannelSpec>(m, "ChannelSpec")
      .def(py::init([](std::optional<c10::intrusive_ptr<c10d::Store>> store, std::string prefix, bool nccl,
                       bool direct_links) {
             return ChannelSpec{std::move(store), std::move(prefix), nccl, direct_links};
           }),
           py::arg("store") = py::none(), py::arg("prefix") = "", py::arg("nccl") = false,
           py::arg("direct_links") = false);
  py::class_<MonitorSpec>(m, "MonitorSpec")
      .def(py::init([](std::optional<c10::intrusive_ptr<c10d::Store>> store, std::string prefix,
                       std::string master_addr) {
             return MonitorSpec{std::move(store), std::move(prefix), std::move(master_addr)};
           }),
           py::arg("store") = py::none(), py::arg("prefix") = "", py::arg("master_addr") = "");
  py::class_<Pipeline>(m, "Pipeline")
      .def(py::init<const std::string&, int, const std::map<int, py::object>&, py::object, bool,
                    c10::intrusive_ptr<c10d::ProcessGroup>, std::vector<int>, double,
                    const std::vector<std::vector<int64_t>>&, at::ScalarType, at::Device, const ChannelSpec&,
                    const MonitorSpec&, py::object, bool, double, const std::string&>(),
           py::arg("kind"), py::arg("num_microbatches"), py::arg("modules"), py::arg("hook"),
           py::arg("split_pairs"), py::arg("group"), py::arg("rank_mapping"), py::arg("timeout_s"), py::arg("shapes"),
           py::arg("dtype"), py::arg("device"), py::arg("channels"), py::arg("monitor"), py::arg("weight_store"),
           py::arg("record_actions"), py::arg("stall_report_after_s"), py::arg("stall_report_dir"))
      .def("step", &Pipeline::step, py::arg("inputs"), py::arg("labels"), py::arg("criterion"),
           py::arg("return_outputs"), py::arg("interruptible"))
      .def("last_step_actions", &Pipeline::last_step_actions)
      .def("set_recording", &Pipeline::set_recording, py::arg("on"))
      .def("refuse", &Pipeline::refuse, py::arg("why"))
      .def("close", &Pipeline::close)
      .def_property_readonly("transport", &Pipeline::transport)
      .def_property_readonly("entering_microbatches", &Pipeline::entering)
      .def_property_readonly("loss_microbatches", &Pipeline::loss_owned);
}
