// The executor's private state and handlers (internal): executor.cpp builds it and drives a step,
// executor_actions.cpp holds one handler per action type, executor_checks.cpp what the caller can get wrong.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "backward_split.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/runtime/weight_grad_store.h"
#include "mailbox.h"
#include "memory_meter.h"

namespace dualpipe::runtime {

// Per (stage, micro-batch) tensors of the step in flight.
struct Slot {
  Tensors inputs;        // stage inputs (leaves requiring grad where they carry one back, when training)
  Tensors outputs;       // stage outputs, kept for the backward (detached under recomputation until it runs)
  torch::Tensor loss;    // last stage only
  Tensors output_grads;  // gradients of the outputs that require one, from the next stage
  Tensors input_grads;   // gradients of the inputs that require one, waiting for SEND_B
  detail::DeferredWeightGrad weight;  // after I, until W
  // After an I with no input gradient to compute (the first stage's), until W: the whole backward, which W runs.
  std::optional<BackwardHalf> whole_at_w;
  bool weight_pending = false;
  bool needs_recompute = false;  // ExecutorOptions::recompute: the forward's graph was dropped
};

struct Executor::Impl {
  Schedule schedule;  // lowered
  std::map<int, std::shared_ptr<Stage>> stages;
  std::shared_ptr<comm::Communicator> comm;
  ExecutorOptions options;
  int rank = -1;  // pipeline rank
  std::chrono::milliseconds timeout{0};
  std::vector<int> entering, loss_owned;
  std::vector<c10::Device> stage_devices;  // of local stages; CPU elsewhere
  // Communicator rank -> messages it sends this rank, in order; with and without the backward messages.
  std::map<int, std::vector<detail::MessageKey>> incoming_training, incoming_forward_only;
  WeightGradStore store;  // SplitLinear's deferral, with WeightSplit::SplitAwareLayers

  // Instrumentation (ExecutorOptions::record_trace, Executor::last_step_stats).
  bool recording = false;
  std::vector<ActionRecord> records;
  std::optional<StartedReduction> action_reduction;  // what the running REDUCE_GRAD tells its record
  int steps_run = 0;
  StepStats stats;
  std::shared_ptr<FlightRecorder> flight;  // ExecutorOptions::flight_recorder
  std::string schedule_summary;            // what the flight recorder says this executor runs
  uint64_t schedule_fingerprint = 0;

  // State of the step in flight.
  const StepArgs* args = nullptr;
  bool training = false;
  std::vector<Slot> slots;
  std::unique_ptr<detail::Mailbox> mail;
  detail::LearnedShapes learned_shapes;  // what earlier steps' messages carried (mailbox.h)
  StepResult result;
  std::vector<Tensors> input_chunks, label_chunks;  // indexed by micro-batch
  std::optional<detail::MemoryMeter> meter;
  int64_t grad_bytes_at_start = 0;
  std::set<int> unsharding;  // stages whose UNSHARD ran and whose gather no compute action has waited for yet

  int S() const { return schedule.num_stages; }
  int M() const { return schedule.num_microbatches; }
  Slot& slot(int s, int m) { return slots[static_cast<size_t>(s) * M() + m]; }
  bool local(int s, int m) const { return schedule.placement.rank(s, m) == rank; }
  int comm_rank(int r) const { return options.rank_mapping.empty() ? r : options.rank_mapping[r]; }
  Stage& stage(int s) { return *stages.at(s); }

  // executor_checks.cpp
  void check_stages_against_boundaries();
  void check_args(const StepArgs& a) const;
  void split_batches(const StepArgs& a);
  void check_output(int s, int m, const Tensors& outputs) const;

  void plan_messages();
  void run(const Action& a);
  // (stage, micro-batch) activations held right now: outputs kept for a backward + pending W.
  int live_activations() const;
  int64_t activation_bytes() const;
  int64_t parameter_grad_bytes() const;

  // The halves shared by F, B, I and the overlapped pair.
  Tensors forward_inputs(int s, int m);
  // `loss`: the last stage's loss when the stage computed it (ForwardLoss); else the criterion computes it here.
  void finish_forward(int s, int m, Tensors outputs, torch::Tensor loss = {});
  void drop_graph(int s, int m);
  void recompute_forward(int s, int m);
  BackwardHalf backward_half(int s, int m, bool split);
  BackwardHalf nothing_until_weight(int s, int m, const Tensors& roots, const Tensors& grads,
                                    std::optional<c10::Stream> stream);
  // The parameter gradients of (s, m) whose input half ran split (the W action, or a pair's BackwardHalf::weight).
  void backward_weight(int s, int m);
  void finish_backward(int s, int m, Tensors input_grads);

  void on_forward(const Action& a);
  void on_backward(const Action& a);
  void on_backward_input(const Action& a);
  void on_backward_weight(const Action& a);
  void on_overlapped(const Action& a);
  void on_send_forward(const Action& a);
  void on_recv_forward(const Action& a);
  void on_send_backward(const Action& a);
  void on_recv_backward(const Action& a);
  // executor_data_parallel.cpp
  void on_unshard(const Action& a);
  void on_reshard(const Action& a);
  void on_reduce_grad(const Action& a);
  void wait_for_parameters(const Action& compute);
};

}  // namespace dualpipe::runtime
