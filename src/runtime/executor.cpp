#include "dualpipe/runtime/executor.h"

#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <set>

#include "dualpipe/runtime/replicas.h"
#include "dualpipe/runtime/weight_grad_store.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "executor_impl.h"
#include "mailbox.h"

namespace dualpipe::runtime {

using detail::Direction;
using detail::MessageKey;

namespace {

// Whether a forward-only step runs the action: backwards, their messages and the gradient reduction return at once
// (their handlers), so they are not recorded as if they ran. An overlapped pair runs its forward half.
bool runs_forward_only(ActionType type) {
  switch (type) {
    case ActionType::Backward:
    case ActionType::BackwardInput:
    case ActionType::BackwardWeight:
    case ActionType::SendBackward:
    case ActionType::RecvBackward:
    case ActionType::ReduceGrad:
      return false;
    default:
      return true;
  }
}

}  // namespace

Criterion single_tensor_criterion(std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> loss) {
  return [loss = std::move(loss)](const Tensors& outputs, const Tensors& labels) {
    DUALPIPE_REQUIRE(outputs.size() == 1 && labels.size() == 1,
                     "this criterion takes one output and one label tensor, got ", outputs.size(), " outputs and ",
                     labels.size(), " labels");
    return loss(outputs[0], labels[0]);
  };
}

Executor::Executor(const Schedule& schedule, std::map<int, std::shared_ptr<Stage>> stages,
                   std::shared_ptr<comm::Communicator> communicator, ExecutorOptions options)
    : impl_(new Impl) {
  auto& I = *impl_;
  DUALPIPE_REQUIRE(communicator != nullptr, "Executor needs a communicator");
  I.schedule = schedule.has_communication() ? schedule : lower_communication(schedule);
  validate(I.schedule);
  const int R = I.schedule.num_ranks, S = I.schedule.num_stages;
  auto& map = options.rank_mapping;
  if (map.empty()) {
    DUALPIPE_REQUIRE(R == communicator->size(), "the schedule has ", R, " ranks but the communicator has ",
                     communicator->size(), "; give a rank_mapping to run a pipeline on a sub-group");
    I.rank = communicator->rank();
  } else {
    DUALPIPE_REQUIRE(static_cast<int>(map.size()) == R, "rank_mapping has ", map.size(),
                     " entries, the schedule has ", R, " ranks");
    std::set<int> seen;
    for (int r = 0; r < R; ++r) {
      DUALPIPE_REQUIRE(map[r] >= 0 && map[r] < communicator->size() && seen.insert(map[r]).second,
                       "rank_mapping[", r, "] = ", map[r], " is not a distinct rank of the communicator (size ",
                       communicator->size(), ")");
      if (map[r] == communicator->rank()) I.rank = r;
    }
    DUALPIPE_REQUIRE(I.rank >= 0, "communicator rank ", communicator->rank(), " is not in the rank_mapping");
  }
  DUALPIPE_REQUIRE(options.boundaries.empty() || static_cast<int>(options.boundaries.size()) == S + 1,
                   "ExecutorOptions::boundaries needs S+1 = ", S + 1, " entries (or none), got ",
                   options.boundaries.size());
  std::set<int> held;
  for (int m = 0; m < I.schedule.num_microbatches; ++m)
    for (int s = 0; s < S; ++s)
      if (I.schedule.placement.rank(s, m) == I.rank) held.insert(s);
  for (int s : held)
    DUALPIPE_REQUIRE(stages.count(s) && stages.at(s), "rank ", I.rank, " runs stage ", s,
                     " under the schedule's placement but no module was given for it");
  for (const auto& [s, module] : stages)
    DUALPIPE_REQUIRE(held.count(s), "a module was given for stage ", s, " but rank ", I.rank,
                     " does not run it under the schedule's placement");
  for (int m = 0; m < I.schedule.num_microbatches; ++m) {
    if (I.schedule.placement.rank(0, m) == I.rank) I.entering.push_back(m);
    if (I.schedule.placement.rank(S - 1, m) == I.rank) I.loss_owned.push_back(m);
  }
  I.stages = std::move(stages);
  I.comm = std::move(communicator);
  I.options = std::move(options);
  I.recording = I.options.record_trace;
  I.timeout = I.options.timeout.count() > 0 ? I.options.timeout : I.comm->timeout();
  I.stage_devices.assign(static_cast<size_t>(S), c10::Device(c10::kCPU));
  for (const auto& [s, stage] : I.stages) I.stage_devices[static_cast<size_t>(s)] = stage->device();
  I.plan_messages();
  if (!I.options.boundaries.empty()) I.check_stages_against_boundaries();
  I.flight = I.options.flight_recorder ? I.options.flight_recorder : std::make_shared<FlightRecorder>();
  I.schedule_summary = dualpipe::detail::concat(I.schedule.kind, ", ", R, " ranks, ", I.schedule.num_microbatches,
                                      " micro-batches");
  I.schedule_fingerprint = fingerprint_of(format_text(I.schedule));
}

Executor::~Executor() = default;

// What every peer sends this rank, in its sending order: the order of its SEND actions in the lowered
// schedule, which every rank holds whole.
void Executor::Impl::plan_messages() {
  for (int src = 0; src < schedule.num_ranks; ++src) {
    if (src == rank) continue;
    for (const Action& a : schedule.actions[src]) {
      if (a.peer != rank) continue;
      if (a.type == ActionType::SendForward) {
        incoming_training[comm_rank(src)].push_back({Direction::Forward, a.stage, a.microbatch});
        incoming_forward_only[comm_rank(src)].push_back({Direction::Forward, a.stage, a.microbatch});
      } else if (a.type == ActionType::SendBackward) {
        incoming_training[comm_rank(src)].push_back({Direction::Backward, a.stage, a.microbatch});
      }
    }
  }
}

void Executor::set_recording(bool on) { impl_->recording = on; }
bool Executor::recording() const { return impl_->recording; }
const std::vector<ActionRecord>& Executor::recorded_actions() const { return impl_->records; }
void Executor::clear_recorded_actions() { impl_->records.clear(); }
int Executor::steps_run() const { return impl_->steps_run; }
const std::shared_ptr<FlightRecorder>& Executor::flight_recorder() const { return impl_->flight; }
const StepStats& Executor::last_step_stats() const { return impl_->stats; }

int Executor::Impl::live_activations() const {
  // A slot keeps its stage outputs only while a backward still needs them (finish_backward clears them), so
  // counting defined outputs counts held graphs; after I the slot's pending W holds what W needs.
  // The store's groups are SplitLinear's (WeightSplit::SplitAwareLayers); under the generic split it holds only
  // user-deferred work, of slots already counted by their pending W.
  int live = options.weight_split == WeightSplit::Generic ? 0 : static_cast<int>(store.pending_groups());
  if (!training) return live;
  for (const Slot& sl : slots) live += (!sl.outputs.empty() || sl.weight_pending) ? 1 : 0;
  return live;
}

int64_t Executor::Impl::parameter_grad_bytes() const {
  int64_t bytes = 0;
  for (const auto& [s, st] : stages)
    for (const auto& p : st->parameters())
      if (p.grad().defined()) bytes += static_cast<int64_t>(p.grad().nbytes());
  return bytes;
}

int64_t Executor::Impl::activation_bytes() const {
  if (!meter || !meter->active()) return 0;
  return meter->live_bytes() - (parameter_grad_bytes() - grad_bytes_at_start);
}

int Executor::pipeline_rank() const { return impl_->rank; }
const Schedule& Executor::lowered_schedule() const { return impl_->schedule; }
const std::vector<int>& Executor::entering_microbatches() const { return impl_->entering; }
const std::vector<int>& Executor::loss_microbatches() const { return impl_->loss_owned; }

void Executor::reduce_replica_gradients() {
  auto& I = *impl_;
  runtime::reduce_replica_gradients(I.schedule.placement, I.rank, I.stages, *I.comm, I.options.rank_mapping,
                                    I.timeout);
}

StepResult Executor::step(const StepArgs& args) {
  auto& I = *impl_;
  I.training = torch::GradMode::is_enabled();
  I.check_args(args);  // everything the caller can get wrong, before any message moves
  I.split_batches(args);
  I.args = &args;
  I.slots.assign(static_cast<size_t>(I.S()) * I.M(), Slot{});
  I.result = StepResult{};
  I.result.losses.resize(I.M());
  if (args.return_outputs) I.result.outputs.resize(I.M());
  I.store.clear();
  I.stats = StepStats{};
  const int step_number = I.steps_run++;
  WeightGradStore::Scope scope(&I.store);
  I.grad_bytes_at_start = I.parameter_grad_bytes();
  if (I.options.measure_memory) I.meter.emplace();
  auto clear = [&] {
    I.slots.clear();
    I.store.clear();
    I.mail.reset();
    I.args = nullptr;
    I.unsharding.clear();
    I.input_chunks.clear();
    I.label_chunks.clear();
    I.meter.reset();
  };
  FlightRecorder& flight = *I.flight;
  flight.step_started(step_number, I.training ? I.schedule_summary : I.schedule_summary + ", forward only",
                      I.schedule_fingerprint);
  try {
    detail::MailboxSetup setup;
    setup.communicator = I.comm.get();
    setup.timeout = I.timeout;
    setup.boundaries = &I.options.boundaries;
    setup.stage_devices = I.stage_devices;
    setup.incoming = I.training ? I.incoming_training : I.incoming_forward_only;
    setup.learned = &I.learned_shapes;
    setup.flight = &flight;
    I.mail = std::make_unique<detail::Mailbox>(std::move(setup));
    const std::vector<Action>& actions = I.schedule.actions[I.rank];
    for (size_t i = 0; i < actions.size(); ++i) {
      flight.action_started(static_cast<int>(i), actions[i]);
      if (actions[i].is_compute()) I.wait_for_parameters(actions[i]);  // outside its record, as a RECV is
      if (I.recording && (I.training || runs_forward_only(actions[i].type))) {
        const auto start = std::chrono::steady_clock::now();
        I.action_reduction.reset();
        I.run(actions[i]);
        ActionRecord record{step_number, static_cast<int>(i), start, std::chrono::steady_clock::now(), -1, {}};
        if (I.action_reduction) {
          record.bytes = I.action_reduction->bytes;
          record.completed = I.action_reduction->completed;
        }
        I.records.push_back(std::move(record));
      } else {
        I.run(actions[i]);
      }
      flight.action_ended();
      I.mail->poll_sends();
      I.stats.peak_live_activations = std::max(I.stats.peak_live_activations, I.live_activations());
      I.stats.peak_activation_bytes = std::max(I.stats.peak_activation_bytes, I.activation_bytes());
    }
    I.stats.live_activations_at_end = I.live_activations();
    I.mail->finish();
    I.stats.activation_bytes_at_end = I.activation_bytes();
    DUALPIPE_CHECK(I.store.pending_groups() == 0, "deferred weight gradients left after the step");
  } catch (...) {
    flight.step_ended();
    clear();
    // A failed step ends every rank's (the peer monitor), none learning from it: they guess alike next time.
    I.learned_shapes.clear();
    throw;
  }
  flight.step_ended();
  clear();
  return std::move(I.result);
}

// The handler table: one entry per ActionType, in enum order. No schedule kind anywhere.
void Executor::Impl::run(const Action& a) {
  using Handler = void (Impl::*)(const Action&);
  static constexpr std::array<Handler, 12> handlers = {
      &Impl::on_forward,         &Impl::on_backward,     &Impl::on_backward_input, &Impl::on_backward_weight,
      &Impl::on_overlapped,      &Impl::on_send_forward, &Impl::on_recv_forward,   &Impl::on_send_backward,
      &Impl::on_recv_backward,   &Impl::on_unshard,      &Impl::on_reshard,        &Impl::on_reduce_grad,
  };
  auto index = static_cast<size_t>(a.type);
  DUALPIPE_CHECK(index < handlers.size(), "unknown action type ", index);
  // Only training's actions are regions: a forward-only step's skip their backwards, and its forwards keep no graph.
  if (!a.is_compute() || !training) return (this->*handlers[index])(a);
  RECORD_USER_SCOPE(profiler_region(a));  // named only while a profiler records
  (this->*handlers[index])(a);
}

}  // namespace dualpipe::runtime
