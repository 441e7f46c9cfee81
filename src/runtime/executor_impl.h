// The executor's private state and handlers (internal): executor.cpp builds it and drives a step,
// executor_actions.cpp holds one handler per action type.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "dualpipe/runtime/executor.h"
#include "dualpipe/runtime/weight_grad_store.h"
#include "mailbox.h"

namespace dualpipe::runtime {

// Per (stage, micro-batch) tensors of the step in flight.
struct Slot {
  torch::Tensor input;        // stage input (a leaf requiring grad when training and stage > 0)
  torch::Tensor output;       // stage output, kept for the backward
  torch::Tensor loss;         // last stage only
  torch::Tensor output_grad;  // gradient of output, from the next stage
  torch::Tensor input_grad;   // gradient of input, waiting for SEND_B
};

struct Executor::Impl {
  Schedule schedule;  // lowered
  std::map<int, std::shared_ptr<Stage>> stages;
  std::shared_ptr<comm::Communicator> comm;
  ExecutorOptions options;
  int rank = -1;  // pipeline rank
  std::chrono::milliseconds timeout{0};
  std::vector<int> entering, loss_owned;
  WeightGradStore store;

  // Instrumentation (ExecutorOptions::record_trace, Executor::last_step_stats).
  bool recording = false;
  std::vector<ActionRecord> records;
  int steps_run = 0;
  StepStats stats;

  // State of the step in flight.
  const StepArgs* args = nullptr;
  bool training = false;
  std::vector<Slot> slots;
  std::unique_ptr<detail::Mailbox> mail;
  StepResult result;
  std::vector<torch::Tensor> input_chunks, label_chunks;  // indexed by micro-batch

  int S() const { return schedule.num_stages; }
  int M() const { return schedule.num_microbatches; }
  Slot& slot(int s, int m) { return slots[static_cast<size_t>(s) * M() + m]; }
  bool local(int s, int m) const { return schedule.placement.rank(s, m) == rank; }
  int comm_rank(int r) const { return options.rank_mapping.empty() ? r : options.rank_mapping[r]; }
  Stage& stage(int s) { return *stages.at(s); }

  void check_args(const StepArgs& a) const;
  void split_batches(const StepArgs& a);
  void post_receives();
  void run(const Action& a);
  // (stage, micro-batch) activations held right now: outputs kept for a backward + pending W groups.
  int live_activations() const;

  // The halves shared by F, B, I and the overlapped pair.
  torch::Tensor forward_input(int s, int m);
  void finish_forward(int s, int m, const torch::Tensor& output);
  BackwardHalf backward_half(int s, int m);
  void finish_backward(int s, int m);

  void on_forward(const Action& a);
  void on_backward(const Action& a);
  void on_backward_input(const Action& a);
  void on_backward_weight(const Action& a);
  void on_overlapped(const Action& a);
  void on_send_forward(const Action& a);
  void on_recv_forward(const Action& a);
  void on_send_backward(const Action& a);
  void on_recv_backward(const Action& a);
};

}  // namespace dualpipe::runtime
