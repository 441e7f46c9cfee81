#include "dualpipe/runtime/executor.h"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <set>

#include "dualpipe/lower.h"
#include "dualpipe/runtime/replicas.h"
#include "dualpipe/runtime/weight_grad_store.h"
#include "dualpipe/validate.h"
#include "executor_impl.h"
#include "mailbox.h"

namespace dualpipe::runtime {

using detail::Direction;

namespace {
std::string shape_text(const TensorSpec& s) {
  return dualpipe::detail::concat(c10::IntArrayRef(s.shape), " ", s.dtype);
}
bool matches(const torch::Tensor& t, const TensorSpec& s) {
  return t.sizes() == c10::IntArrayRef(s.shape) && t.scalar_type() == s.dtype;
}
}  // namespace

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
}

Executor::~Executor() = default;

void Executor::set_recording(bool on) { impl_->recording = on; }
bool Executor::recording() const { return impl_->recording; }
const std::vector<ActionRecord>& Executor::recorded_actions() const { return impl_->records; }
void Executor::clear_recorded_actions() { impl_->records.clear(); }
int Executor::steps_run() const { return impl_->steps_run; }
const StepStats& Executor::last_step_stats() const { return impl_->stats; }

int Executor::Impl::live_activations() const {
  // A slot keeps its stage output only while a backward still needs it (finish_backward clears the slot), so
  // counting defined outputs counts held graphs; an I action hands its activations over to the store's group.
  int live = static_cast<int>(store.pending_groups());
  if (!training) return live;
  for (const Slot& sl : slots) live += sl.output.defined() ? 1 : 0;
  return live;
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
  try {
    I.mail = std::make_unique<detail::Mailbox>(*I.comm, I.timeout, I.options.boundaries, I.S(), I.M());
    I.post_receives();
    const std::vector<Action>& actions = I.schedule.actions[I.rank];
    for (size_t i = 0; i < actions.size(); ++i) {
      if (I.recording) {
        const auto start = std::chrono::steady_clock::now();
        I.run(actions[i]);
        I.records.push_back({step_number, static_cast<int>(i), start, std::chrono::steady_clock::now()});
      } else {
        I.run(actions[i]);
      }
      I.stats.peak_live_activations = std::max(I.stats.peak_live_activations, I.live_activations());
      I.mail->poll_sends();
    }
    I.stats.live_activations_at_end = I.live_activations();
    I.mail->finish();
    DUALPIPE_CHECK(I.store.pending_groups() == 0, "deferred weight gradients left after the step");
  } catch (...) {
    I.slots.clear();
    I.store.clear();
    I.mail.reset();
    I.args = nullptr;
    throw;
  }
  I.slots.clear();
  I.mail.reset();
  I.args = nullptr;
  I.input_chunks.clear();
  I.label_chunks.clear();
  return std::move(I.result);
}

void Executor::Impl::check_args(const StepArgs& a) const {
  DUALPIPE_REQUIRE(a.num_microbatches == M(), "step() was asked for ", a.num_microbatches,
                   " micro-batches but the schedule has M=", M());
  if (!entering.empty()) {
    DUALPIPE_REQUIRE(a.inputs.defined() && a.inputs.dim() >= 1, "rank ", rank, " feeds ", entering.size(),
                     " micro-batches into stage 0 but got no inputs");
    int64_t n = a.inputs.size(0), k = static_cast<int64_t>(entering.size());
    DUALPIPE_REQUIRE(n % k == 0, "rank ", rank, ": inputs with ", n, " rows do not split into ", k,
                     " equal micro-batches");
    if (!options.boundaries.empty()) {
      const TensorSpec& spec = options.boundaries[0];
      DUALPIPE_REQUIRE(matches(a.inputs.narrow(0, 0, n / k), spec), "rank ", rank, ": a micro-batch of inputs is ",
                       a.inputs.narrow(0, 0, n / k).sizes(), " ", a.inputs.scalar_type(),
                       ", the executor was declared with ", shape_text(spec));
    }
  }
  if (!loss_owned.empty() && (training || a.labels.defined())) {
    DUALPIPE_REQUIRE(!training || a.criterion, "rank ", rank, " computes the loss of ", loss_owned.size(),
                     " micro-batches but no criterion was given");
    DUALPIPE_REQUIRE(a.labels.defined() && a.labels.dim() >= 1, "rank ", rank, " computes the loss of ",
                     loss_owned.size(), " micro-batches but got no labels");
    int64_t n = a.labels.size(0), k = static_cast<int64_t>(loss_owned.size());
    DUALPIPE_REQUIRE(n % k == 0, "rank ", rank, ": labels with ", n, " rows do not split into ", k,
                     " equal micro-batches");
  }
}

void Executor::Impl::split_batches(const StepArgs& a) {
  input_chunks.assign(M(), torch::Tensor());
  label_chunks.assign(M(), torch::Tensor());
  if (!entering.empty()) {
    auto chunks = a.inputs.chunk(static_cast<int64_t>(entering.size()), 0);
    for (size_t i = 0; i < entering.size(); ++i) input_chunks[entering[i]] = chunks[i];
  }
  if (!loss_owned.empty() && a.labels.defined()) {
    auto chunks = a.labels.chunk(static_cast<int64_t>(loss_owned.size()), 0);
    for (size_t i = 0; i < loss_owned.size(); ++i) label_chunks[loss_owned[i]] = chunks[i];
  }
}

void Executor::Impl::post_receives() {
  for (const Action& a : schedule.actions[rank]) {
    if (a.type == ActionType::RecvForward) {
      mail->post_recv(Direction::Forward, a.stage - 1, a.microbatch, comm_rank(a.peer));
    } else if (a.type == ActionType::RecvBackward && training) {
      mail->post_recv(Direction::Backward, a.stage + 1, a.microbatch, comm_rank(a.peer));
    }
  }
}

// The handler table: one entry per ActionType, in enum order. No schedule kind anywhere.
void Executor::Impl::run(const Action& a) {
  using Handler = void (Impl::*)(const Action&);
  static constexpr std::array<Handler, 9> handlers = {
      &Impl::on_forward,      &Impl::on_backward,       &Impl::on_backward_input,
      &Impl::on_backward_weight, &Impl::on_overlapped,  &Impl::on_send_forward,
      &Impl::on_recv_forward, &Impl::on_send_backward,  &Impl::on_recv_backward,
  };
  auto index = static_cast<size_t>(a.type);
  DUALPIPE_CHECK(index < handlers.size(), "unknown action type ", index);
  (this->*handlers[index])(a);
}

}  // namespace dualpipe::runtime
