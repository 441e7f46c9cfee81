// Lowering passes that add a stage's data-parallel collectives to a compute schedule, as PyTorch's pipelining adds
// UNSHARD/RESHARD (`_add_unshard_reshard`) and REDUCE_GRAD (`_add_reduce_grad`) to its compute-only orders. They
// make the work around compute part of the plan: the simulator times it on the rank's data-parallel link, `draw`
// shows it, and the runtime runs it as actions (runtime/executor.h, StepArgs::data_parallel).
//   UNSHARD   ZeRO-3 (FSDP): start gathering a stage's parameters from the replicas that own their shards;
//   RESHARD   drop them again once the stage has computed for the step;
//   REDUCE_GRAD  start reducing a stage's gradients over the replicas.
#pragma once

#include "dualpipe/schedule/schedule.h"

namespace dualpipe {

// Where a stage's REDUCE_GRAD goes.
enum class ReduceAt {
  LastGradient,  // right after the last action that adds to the stage's gradients: overlapped with the rest
  StepEnd,       // after the rank's last action (ZeRO-2 and ZeRO-3 reduce to the owners once the step is over)
};

// Each stage a rank holds gets an UNSHARD before the compute action ahead of the stage's first one (before the
// first itself when no compute comes earlier), so the gather runs while that action computes, and a RESHARD right
// after the stage's last compute action. The input holds no data-parallel actions.
Schedule add_unshard_reshard(const Schedule& schedule);

// Each stage a rank holds gets a REDUCE_GRAD where `at` says (stages in the order their gradients are done).
Schedule add_reduce_grad(const Schedule& schedule, ReduceAt at);

// The collectives of `replicas` data-parallel copies of the pipeline under ZeRO stage `zero_stage` (0 to 3): none
// for one replica; REDUCE_GRAD for more (after the last gradient when `overlap_reduction` and below ZeRO-2, else at
// the step's end), and UNSHARD/RESHARD under ZeRO-3. Throws InvalidArgument for replicas < 1, a zero_stage outside
// 0..3, or ZeRO with one replica.
Schedule add_data_parallel_actions(const Schedule& schedule, int replicas, int zero_stage,
                                   bool overlap_reduction = true);

}  // namespace dualpipe
