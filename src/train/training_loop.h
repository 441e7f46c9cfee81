// The training loop of one rank (trainer.cpp), given its place in the job: the pipeline's communicator, the
// data-parallel replicas of it and the layers' groups (job_groups.h). trainer.h's entry points make them
// (training_rank.cpp).
#pragma once

#include <memory>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/parallel/data_parallel.h"
#include "dualpipe/train/run_plan.h"
#include "dualpipe/train/trainer.h"
#include "job_groups.h"

namespace dualpipe::train {

// Trains to config.steps (or stops for a re-plan), on one intra-op thread. `layers`: the expert group of the MoE
// layers (none: every expert here) with the timeline told of its exchanges, and the tensor- and context-parallel
// groups of every stage (none: none).
void run_training_loop(const TrainConfig& config, RunPlan plan, const TrainHooks& hooks,
                       std::shared_ptr<comm::Communicator> pipeline, parallel::DataParallel dp, LayerGroups layers = {});

}  // namespace dualpipe::train
