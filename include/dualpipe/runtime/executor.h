// Runs any Schedule on this rank's stage modules, one training (or inference) step per call.
//
// The executor lowers the schedule (adds SEND/RECV), posts every receive of the step up front, and walks the
// rank's action list through a table of handlers, one per ActionType. It holds no schedule-specific logic:
// placement and action order come from the Schedule alone.
//
// Loss convention: each micro-batch's loss is criterion(output, label) as the criterion returns it, and the
// backward starts from that loss unscaled, so parameter gradients are the SUM over micro-batches. Divide the
// loss (in the criterion) by the number of micro-batches if you want the mean.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/runtime/stage.h"
#include "dualpipe/schedule.h"

namespace dualpipe::runtime {

// Shape and dtype of one micro-batch's tensor.
struct TensorSpec {
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
};

using Criterion = std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& label)>;

struct ExecutorOptions {
  // boundaries[s] is the input of stage s for one micro-batch, boundaries[S] the last stage's output. With
  // them declared, receive buffers are allocated ahead and inputs and outputs are checked. Left empty, every
  // message carries its shape and dtype (use this when they vary per micro-batch).
  std::vector<TensorSpec> boundaries;
  // Pipeline rank -> communicator rank, when the pipeline is a sub-group of a larger job. Empty: identity.
  std::vector<int> rank_mapping;
  // Wait limit for every receive and send; 0 takes the communicator's.
  std::chrono::milliseconds timeout{0};
  // Record every executed action's start and end (see Executor::recorded_actions()). Off, the cost is one
  // branch per action.
  bool record_trace = false;

  // The same spec at every boundary (stages that keep the shape, like a transformer's blocks).
  static std::vector<TensorSpec> uniform(const TensorSpec& spec, int num_stages) {
    return std::vector<TensorSpec>(static_cast<size_t>(num_stages) + 1, spec);
  }
};

struct StepArgs {
  // The micro-batches that enter the pipeline on this rank (placement of stage 0), concatenated along dim 0
  // in micro-batch order; split into that many equal chunks. Ignored on other ranks.
  torch::Tensor inputs;
  // Labels of the micro-batches whose loss this rank computes (placement of the last stage), same layout.
  torch::Tensor labels;
  Criterion criterion;
  int num_microbatches = 0;  // must equal the schedule's
  bool return_outputs = false;
};

// One executed action of the lowered schedule, on this process's steady clock. Convert to the trace's aligned
// clock with ClockSync (clock_sync.h); gather_trace (trace_gather.h) does it for every rank.
struct ActionRecord {
  int step = 0;   // the executor's step counter when it ran (0 for the first step() call)
  int index = 0;  // position in lowered_schedule().actions[pipeline_rank()]
  std::chrono::steady_clock::time_point start, end;
};

// Measured from the executor's real state during the last step() call.
struct StepStats {
  // Peak number of (stage, micro-batch) activations this rank held, sampled after every action: slots whose
  // stage output (and so its autograd graph) is kept for a backward, plus deferred weight-gradient groups
  // still pending in the WeightGradStore (their closures hold the layer inputs until the W action). This is
  // the quantity simulate.h's peak_activations() counts in stage units, so the two agree for split-aware
  // stages (SplitLinear). For stages without split-aware layers an I action frees everything and W holds
  // nothing, so the measured peak can be lower than the simulated one.
  int peak_live_activations = 0;
  // The same count when the step ended (0 after a complete training step).
  int live_activations_at_end = 0;
};

struct StepResult {
  // Indexed by micro-batch; defined only for the micro-batches whose last stage ran on this rank.
  std::vector<torch::Tensor> losses;
  std::vector<torch::Tensor> outputs;  // last-stage outputs, when return_outputs
};

class Executor {
 public:
  // `stages` maps every stage index this rank holds under the schedule's placement to its module.
  // Throws InvalidArgument when the schedule, the stages or the communicator do not fit together.
  Executor(const Schedule& schedule, std::map<int, std::shared_ptr<Stage>> stages,
           std::shared_ptr<comm::Communicator> communicator, ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // One step. With grad mode on it trains (gradients accumulate into the stages' parameters); with grad mode
  // off (torch::NoGradGuard) it runs only the forwards. Argument errors are raised before any communication.
  StepResult step(const StepArgs& args);

  // For two-replica schedules: sums each stage's gradients with its other replica (see replicas.h).
  void reduce_replica_gradients();

  // Action recording (ExecutorOptions::record_trace sets the initial state). Records accumulate over steps
  // until cleared, in execution order.
  void set_recording(bool on);
  bool recording() const;
  const std::vector<ActionRecord>& recorded_actions() const;
  void clear_recorded_actions();
  // Number of step() calls so far (the `step` of the next ActionRecord).
  int steps_run() const;
  // Live-activation counts of the last step() call (see StepStats).
  const StepStats& last_step_stats() const;

  int pipeline_rank() const;
  const Schedule& lowered_schedule() const;
  // Micro-batches entering on this rank / whose loss this rank computes, in order.
  const std::vector<int>& entering_microbatches() const;
  const std::vector<int>& loss_microbatches() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dualpipe::runtime
