// Lowering passes that add a stage's data-parallel collectives to a compute schedule, as PyTorch's pipelining adds
// UNSHARD/RESHARD (`_add_unshard_reshard`) and REDUCE_GRAD (`_add_reduce_grad`) to its compute-only orders. They
// make the work around compute part of the plan: the simulator times it on the rank's data-parallel link, `draw`
// shows it, and the runtime runs it as actions (runtime/executor.h, StepArgs::data_parallel).
//   UNSHARD   ZeRO-3 (FSDP): start gathering a stage's parameters from the replicas that own their shards;
//   RESHARD   drop them again once the stage has computed for the step;
//   REDUCE_GRAD  start reducing a stage's gradients over the replicas.
#pragma once

#include <string>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/schedule/zero_stage.h"

namespace dualpipe {

// Where a stage's REDUCE_GRAD goes.
enum class ReduceAt {
  LastGradient,  // right after the last action that adds to the stage's gradients: overlapped with the rest
  StepEnd,       // after the rank's last action: nothing overlaps the reductions
};

// Each stage a rank holds gets an UNSHARD before the compute action ahead of the stage's first one (before the
// first itself when no compute comes earlier), so the gather runs while that action computes, and a RESHARD right
// after the stage's last compute action. The input holds no data-parallel actions.
Schedule add_unshard_reshard(const Schedule& schedule);

// Each stage a rank holds gets a REDUCE_GRAD where `at` says (stages in the order their gradients are done).
Schedule add_reduce_grad(const Schedule& schedule, ReduceAt at);

// The collectives of `replicas` data-parallel copies of the pipeline under ZeRO stage `zero`: none
// for one replica; REDUCE_GRAD for more (after the last gradient when `overlap_reduction`, else at the step's end;
// in every ZeRO stage, as Megatron and DeepSpeed start a bucket's reduction during the backward: an all-reduce
// below ZeRO-2, a reduce onto the owners from ZeRO-2 on), and UNSHARD/RESHARD under ZeRO-3. This is the one place
// that decides when a reduction runs: the runtime runs REDUCE_GRAD where it stands, on every step. Throws
// InvalidArgument for replicas < 1, or ZeRO with one replica.
Schedule add_data_parallel_actions(const Schedule& schedule, int replicas, ZeroStage zero,
                                   bool overlap_reduction = true);

// "0UNSHARD on rank 0": the first data-parallel action a schedule holds (a file that already has them cannot take
// them again from --dp and --zero), or "" when it holds none.
std::string first_data_parallel_action(const Schedule& schedule);

}  // namespace dualpipe
