// The data-parallel side of a training step over one rank's stages: data parallelism and ZeRO stages 1 to 3
// together (DataParallel, OptimizerSharding, ParameterSharding), so that the trainer's step says only how; when is
// the schedule's (schedule/data_parallel_lowering.h). Each step, in this order:
//   bind(args)           what the schedule's data-parallel actions do: UNSHARD and RESHARD gather and drop ZeRO-3's
//                        parameters, REDUCE_GRAD starts a stage's reduction over the replicas (an all-reduce below
//                        ZeRO-2, a reduce onto each tensor's owner from ZeRO-2 on), on every step, step 1 included;
//   finish_reductions()  right after the schedule: the started reductions waited for and written back (before
//                        anything else touches the gradients: the sequence-parallel sums come after), from ZeRO-2 on
//                        with the gradients other replicas own dropped;
//   update(step)         the optimizer's step on the gradients this replica owns, then the updated tensors shared.
#pragma once

#include <functional>

#include "dualpipe/parallel/data_parallel.h"
#include "dualpipe/parallel/optimizer_sharding.h"
#include "dualpipe/parallel/parameter_sharding.h"
#include "dualpipe/parallel/stage_parameters.h"
#include "dualpipe/parallel/state_bytes.h"
#include "dualpipe/runtime/executor.h"

namespace dualpipe::parallel {

class ReplicatedStep {
 public:
  ReplicatedStep() = default;  // one replica, no ZeRO
  // `dp` and `stages` must outlive this; `stages` hold whole parameters now (see ParameterSharding).
  ReplicatedStep(DataParallel& dp, Stages& stages, ZeroStage zero);

  void bind(runtime::StepArgs& args);
  // Whether the stage copies (DualPipe, Chimera) are summed inside the data-parallel reductions: then the
  // pipeline's own exchange between the copies (Executor::reduce_replica_gradients) must not run.
  bool joins_copies() const { return dp_ && dp_->replicas() > 1 && dp_->joins_stage_copies(); }
  // The milliseconds it waited for the reductions (0 where it has none to do).
  double finish_reductions();
  // ZeRO-2 and 3's owners of the reduced gradients, for the global norm (null: every replica holds them whole).
  const OptimizerSharding* gradient_owners() const { return shards_gradients(zero_) ? &sharding_ : nullptr; }
  void update(const std::function<void()>& optimizer_step);

  // The whole state (every parameter and AdamW moment) on every replica, for a checkpoint or an evaluation, and
  // back to this replica's shard.
  void gather_all();
  void shard_again();
  // ZeRO-3's parameters alone, gathered and dropped (evaluation and sampling need no optimizer state).
  void gather_parameters() { parameters_.gather_all(); }
  void release_parameters() { parameters_.release_all(); }
  // After a checkpoint's load, which brings the whole state: back to the shard.
  void drop_unowned_state() { sharding_.drop_unowned_state(*stages_); }

  // The ZeRO paper's figures for this rank's model state.
  StateBytes predicted_bytes() const { return predicted_; }

 private:
  DataParallel* dp_ = nullptr;
  Stages* stages_ = nullptr;
  ZeroStage zero_ = ZeroStage::None;
  OptimizerSharding sharding_;    // off below ZeRO-1
  ParameterSharding parameters_;  // off below ZeRO-3
  StateBytes predicted_;

  runtime::StartedReduction reduce(int stage);  // REDUCE_GRAD
};

}  // namespace dualpipe::parallel
