// Runs any Schedule on this rank's stage modules, one training (or inference) step per call.
//
// The executor lowers the schedule (adds SEND/RECV) and walks the rank's action list through a table of
// handlers, one per ActionType. It holds no schedule-specific logic: placement and action order come from the
// Schedule alone. Between any two ranks, messages travel in the order of the sender's SEND actions, which
// both sides read from the lowered schedule, so no backend needs to match tags (NCCL ignores them).
//
// Loss convention: each micro-batch's loss is criterion(outputs, labels) as the criterion returns it, and the
// backward starts from that loss unscaled, so parameter gradients are the SUM over micro-batches. Divide the
// loss (in the criterion) by the number of micro-batches if you want the mean.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/runtime/boundary.h"
#include "dualpipe/runtime/flight_recorder.h"
#include "dualpipe/runtime/stage.h"
#include "dualpipe/runtime/weight_grad_store.h"
#include "dualpipe/schedule/schedule.h"

namespace torch::autograd {
struct Node;
}

namespace dualpipe::runtime {

// The loss of one micro-batch from the last stage's outputs and that micro-batch's labels.
using Criterion = std::function<torch::Tensor(const Tensors& outputs, const Tensors& labels)>;
// For the common case of one output and one label tensor.
Criterion single_tensor_criterion(std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> loss);

// How a backward is split into I (input gradients) and W (parameter gradients) for Zero Bubble schedules.
enum class WeightSplit {
  // Any module: I computes only the gradients the previous stage needs, W the parameter gradients, without
  // computing anything twice (backward_split.h). Parameter gradients are bit-identical to an unsplit backward.
  Generic,
  // Only split-aware layers (SplitLinear) defer their dW, as closures; other layers do all their work in I.
  SplitAwareLayers,
};

struct ExecutorOptions {
  // boundaries[s] lists the inputs of stage s for one micro-batch, boundaries[S] the last stage's outputs.
  // Declared, they are checked before any message moves (every local stage runs once on zeros of its declared
  // inputs when the executor is built, and must return its declared outputs), receive buffers are allocated
  // ahead, and shapes do not travel. Left empty, every message carries its shapes and dtypes.
  std::vector<BoundarySpec> boundaries;
  // Whether boundaries[0] (the pipeline's inputs) and boundaries[S] (the last stage's outputs) hold too. False: only
  // the boundaries between stages, what the messages carry (as DeepSeek's set_p2p_tensor_shapes declares them), so
  // that a first stage may take token ids and a last one return logits; stage 0 is then checked on its first real
  // micro-batch instead of on zeros.
  bool boundaries_include_ends = true;
  // Pipeline rank -> communicator rank, when the pipeline is a sub-group of a larger job. Empty: identity.
  std::vector<int> rank_mapping;
  // Wait limit for every receive and send; 0 takes the communicator's.
  std::chrono::milliseconds timeout{0};
  WeightSplit weight_split = WeightSplit::Generic;
  // Autograd nodes whose backward must run exactly once: user autograd Functions, which may add to .grad themselves
  // (DeepSeek's example does) or defer through UserWeightDeferral, and compiled regions, whose backward is one
  // opaque node. WeightSplit::Generic runs a weight node's backward twice (at I for the inputs, at W for the
  // parameters); a backward that holds such a node leading to parameters is not split and runs whole at its I.
  // Empty: every node may run twice.
  std::function<bool(const torch::autograd::Node&)> runs_once;
  // Weight-gradient work the stages' own code defers at every I action, run at its W (weight_grad_store.h).
  UserWeightDeferral user_deferral;
  // Measure activation bytes (StepStats::peak_activation_bytes). Off by default: every allocation then goes
  // through c10's reporting hook and its global lock, which costs about 1-4 ms per step of
  // bench_runtime_overhead's R=4 M=20 case (docs/benchmarks.md).
  bool measure_memory = false;
  // Record every executed action's start and end (see Executor::recorded_actions()). Off, the cost is one
  // branch per action.
  bool record_trace = false;
  // Activation recomputation: after a stage's forward only its inputs (and its outputs, detached, for the next
  // stage) are kept; the autograd graph is dropped and rebuilt by running the forward again when the
  // micro-batch's backward (B, I, or the backward half of an overlapped pair) starts. Trades one more forward
  // per backward for the memory of every saved tensor in between. Gradients and losses are bit-identical as
  // long as the stage's forward is deterministic (same inputs, same outputs: no dropout or other random ops).
  bool recompute = false;
  // The backward half of every overlapped (F;B) pair computes its input gradients first and its parameter
  // gradients after them (BackwardHalf::weight, through the generic split), instead of in autograd's interleaved
  // order; the gradients are the same bits (backward_split.h). For stages that run the halves side by side
  // (ConcurrentOverlapStage): the input gradients hold all of the backward's communication and take about as long
  // as the forward, so the two halves' exchanges line up with each other's computation, and the parameter
  // gradients, which communicate nothing, come last. Needs WeightSplit::Generic (ignored otherwise).
  bool pair_weights_last = false;
  // What this rank did lately, for stall reports (flight_recorder.h, stall_watch.h). Null: the executor keeps
  // one of its own. The executors of one rank (training, evaluation) share one.
  std::shared_ptr<FlightRecorder> flight_recorder;

  // The same tensors at every boundary (stages that keep the shape, like a transformer's blocks).
  static std::vector<BoundarySpec> uniform(const BoundarySpec& spec, int num_stages) {
    return std::vector<BoundarySpec>(static_cast<size_t>(num_stages) + 1, spec);
  }
};

// What a REDUCE_GRAD started: the bytes of gradients it reduces, and when that reduction completed (ready once it
// has; invalid where the caller cannot tell), so that a trace shows the reduction itself, not only its start.
struct StartedReduction {
  int64_t bytes = 0;
  std::shared_future<std::chrono::steady_clock::time_point> completed;
};

struct StepArgs {
  // What enters the pipeline on this rank (placement of stage 0; ignored elsewhere), in one of two forms:
  //  - `inputs`: whole batches, one tensor per stage-0 input; the runtime cuts each along dim 0 into as many
  //    micro-batches as enter here, like torch.chunk (equal parts of ceil(rows/k), the last may be smaller);
  //  - `microbatch_inputs`: ready micro-batches in entering order, which may differ in shape (sequence length).
  Tensors inputs;
  std::vector<Tensors> microbatch_inputs;
  // The labels of the micro-batches whose loss this rank computes (placement of the last stage), in the same
  // two forms.
  Tensors labels;
  std::vector<Tensors> microbatch_labels;
  Criterion criterion;
  int num_microbatches = 0;  // must equal the schedule's
  bool return_outputs = false;
  // What the schedule's data-parallel actions (schedule/data_parallel_lowering.h) do on this rank, each called
  // with the action's stage where the schedule has it; an empty one makes its action a no-op. The schedule says
  // when, the caller says how (ZeRO-3's gather, a bucket's all-reduce):
  //   unshard      UNSHARD: start gathering the stage's parameters;
  //   wait_unsharded  before the first compute action on a stage after its UNSHARD: finish that gather;
  //   reshard      RESHARD: drop the gathered parameters;
  //   reduce_grad  REDUCE_GRAD (training steps only): start reducing the stage's gradients, which the rest of the
  //                step leaves alone; returns what it started, which the action's record and trace event carry.
  std::function<void(int stage)> unshard, wait_unsharded, reshard;
  std::function<StartedReduction(int stage)> reduce_grad;
};

// One executed action of the lowered schedule, on this process's steady clock. Convert to the trace's aligned
// clock with ClockSync (clock_sync.h); gather_trace (trace_gather.h) does it for every rank.
struct ActionRecord {
  int step = 0;   // the executor's step counter when it ran (0 for the first step() call)
  int index = 0;  // position in lowered_schedule().actions[pipeline_rank()]
  std::chrono::steady_clock::time_point start, end;
  int64_t bytes = -1;  // a REDUCE_GRAD's: the gradient bytes it started reducing (-1: not one, or not told)
  std::shared_future<std::chrono::steady_clock::time_point> completed;  // a REDUCE_GRAD's reduction's end
};

// Measured from the executor's real state during the last step() call.
struct StepStats {
  // Peak bytes of activations this rank held, sampled after every action: everything the step allocated on
  // this thread and had not freed (saved tensors of the autograd graphs, held outputs, received tensors,
  // pending weight-gradient state, buffers of sends in flight), less the parameter gradients it created.
  // Measured through c10's allocator reporting (CPU and CUDA allocators report) when
  // ExecutorOptions::measure_memory is on; 0 otherwise or where no allocator reports.
  int64_t peak_activation_bytes = 0;
  int64_t activation_bytes_at_end = 0;
  // Peak number of (stage, micro-batch) activations this rank held, sampled after every action: slots whose
  // stage outputs (and so their autograd graph) are kept for a backward, plus (stage, micro-batch) pairs whose
  // I ran and whose W has not (they hold the layer inputs the weight gradients need). This is the quantity
  // simulate.h's peak_activations() counts in stage units.
  int peak_live_activations = 0;
  // The same count when the step ended (0 after a complete training step).
  int live_activations_at_end = 0;
};

struct StepResult {
  // Indexed by micro-batch; defined only for the micro-batches whose last stage ran on this rank.
  std::vector<torch::Tensor> losses;
  std::vector<Tensors> outputs;  // last-stage outputs, when return_outputs
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
  // ExecutorOptions::flight_recorder, or the executor's own.
  const std::shared_ptr<FlightRecorder>& flight_recorder() const;
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
