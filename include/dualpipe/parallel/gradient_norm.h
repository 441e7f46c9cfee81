// The global gradient norm of a training step, and clipping to it 
//
// Every parameter is counted once, wherever its gradient lives after the data-parallel reduction: a stage by the
// holder of its first copy (DualPipe and Chimera hold two); a dense gradient by every replica alike; an expert's
// by its EP group's members, each for its own experts; a tensor-parallel layer's slices by the members of the TP
// group; and with ZeRO-2 a sharded tensor's gradient by its owner alone, so those squares are summed over the
// data-parallel group (a sharded expert's over the expert-data-parallel group) first.
#pragma once

#include <chrono>
#include <map>

#include "dualpipe/parallel/data_parallel.h"
#include "dualpipe/comm/communicator.h"
#include "dualpipe/schedule/schedule.h"
#include "dualpipe/parallel/optimizer_sharding.h"
#include "dualpipe/parallel/tensor_parallel.h"
#include "dualpipe/parallel/stage_parameters.h"

namespace dualpipe::parallel {

// The norm over every stage of the job, the same on every rank; when `clip` > 0 and the norm is above it, every
// gradient of `stages` is scaled to `clip`. `sharded_gradients`: ZeRO-2's ownership (null: gradients whole after
// the reduction). Collective over the pipeline and the data-parallel, expert and tensor-parallel groups.
double clip_to_global_norm(Stages& stages, const Placement& placement, int pipeline_rank,
                           const DataParallel& dp, const OptimizerSharding* sharded_gradients,
                           const TensorGroup& tp, comm::Communicator& pipeline,
                           std::chrono::milliseconds timeout, double clip);

}  // namespace dualpipe::parallel
