// One rank of a pipeline-parallel training run of the transformer language model (models/gpt.h) on text
// (data/): AdamW with warm-up and cosine decay, clipping by the global gradient norm over all stages,
// validation loss, a sample generated through the pipeline's forward-only mode, checkpoints that resume
// exactly, and metrics. Rank 0 prints the progress and writes the metrics, trace and checkpoint manifests.
//
// Every rank builds the same model and reads the same sequences from the seed, so nothing but activations,
// gradients and statistics travels between ranks.
#pragma once

#include <functional>
#include <map>
#include <memory>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/parallel/process_groups.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

// What a program may add to the loop without changing it.
struct TrainHooks {
  // On every rank after each training step, before its evaluation and checkpoint: the pipeline rank and the step
  // (1-based). dualpipe-train-worker's restart test kills a rank here.
  std::function<void(int pipeline_rank, int step)> after_step;
};

// Over the given communicator (one rank per pipeline rank: its size must be config.parallel.pp; config.parallel.dp must be 1).
void run_training_rank(const TrainConfig& config, std::shared_ptr<comm::Communicator> communicator,
                       const TrainHooks& hooks = {});
// Over a Gloo world joined from the launcher's environment (dualpipe launch, torchrun, srun, mpirun:
// comm/launch_environment.h) of config.parallel.pp x config.parallel.dp ranks; with config.parallel.dp > 1, over the process mesh's
// pipeline and data-parallel groups (parallel/process_groups.h).
void run_training_rank(const TrainConfig& config, const TrainHooks& hooks = {});
// Over groups the caller made (NCCL, Gloo, another rank layout): `world` holds every rank of the job (checkpoints
// and the last barrier go over it), `groups` this rank's groups of a config.parallel.pp x config.parallel.dp mesh with expert
// groups of config.ep (parallel/process_groups.h: each group's ranks are its own, the data-parallel rank is the
// replica, which picks the slice of the global batch). `stage_copies`, for DualPipe and Chimera: the groups that
// sum a stage's two copies with its replicas (make_stage_copy_groups); without them the copies are summed
// after the step by a point-to-point exchange. Throws InvalidArgument when a group's size does not fit the config.
void run_training_rank(const TrainConfig& config, std::shared_ptr<comm::Communicator> world,
                       const parallel::MeshGroups& groups,
                       const std::map<int, parallel::StageCopyGroups>& stage_copies = {},
                       const TrainHooks& hooks = {});

}  // namespace dualpipe::train
