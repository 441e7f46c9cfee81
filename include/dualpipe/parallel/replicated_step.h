// The data-parallel side of a training step over one rank's stages: data parallelism and ZeRO stages 1 to 3
// together (DataParallel, OptimizerSharding, ParameterSharding), so that the trainer's step says only when. Each
// step, in this order:
//   begin(step, args)   what the schedule's data-parallel actions do (schedule/data_parallel_lowering.h): UNSHARD
//                       and RESHARD gather and drop ZeRO-3's parameters, REDUCE_GRAD starts a stage's reduction
//                       where it overlaps the step;
//   finish_overlapped() right after the schedule: the reductions its REDUCE_GRAD actions started, written back
//                       (before anything else touches the gradients: the sequence-parallel sums come after);
//   reduce_gradients()  later, the reduction that did not overlap the schedule: every gradient averaged over the
//                       replicas (from ZeRO-2 on, onto its owner alone);
//   update(step)        the optimizer's step on the gradients this replica owns, then the updated tensors shared.
// Step 1 never overlaps its reduction: the trainer checks it against a single-process run first.
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
  // `overlap_reduction`: reduce each stage's gradients while the schedule goes on (below ZeRO-2).
  ReplicatedStep(DataParallel& dp, Stages& stages, int zero_stage, bool overlap_reduction);

  void begin(int step, runtime::StepArgs& args);
  // Whether this step's stage copies (DualPipe, Chimera) are summed inside the data-parallel buckets: then the
  // pipeline's own exchange between the copies (Executor::reduce_replica_gradients) must not run.
  bool joins_copies() const { return join_copies_; }
  // Each returns the milliseconds it waited for the reduction (0 where it has none to do).
  double finish_overlapped();
  double reduce_gradients();
  // ZeRO-2 and 3's owners of the reduced gradients, for the global norm (null: every replica holds them whole).
  const OptimizerSharding* gradient_owners() const { return zero_stage_ >= 2 ? &sharding_ : nullptr; }
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
  int zero_stage_ = 0;
  bool overlap_reduction_ = false;
  bool overlap_ = false, join_copies_ = false;  // this step's
  OptimizerSharding sharding_;    // off below ZeRO-1
  ParameterSharding parameters_;  // off below ZeRO-3
  StateBytes predicted_;
};

}  // namespace dualpipe::parallel
