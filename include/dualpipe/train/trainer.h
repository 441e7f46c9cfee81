// One rank of a pipeline-parallel training run of the transformer language model (models/gpt.h) on text
// (data/): AdamW with warm-up and cosine decay, clipping by the global gradient norm over all stages,
// validation loss, a sample generated through the pipeline's forward-only mode, checkpoints that resume
// exactly, and metrics. Rank 0 prints the progress and writes the metrics, trace and checkpoint manifests.
//
// Every rank builds the same model and reads the same sequences from the seed, so nothing but activations,
// gradients and statistics travels between ranks.
#pragma once

#include <memory>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

// Over the given communicator (one rank per pipeline rank: its size must be config.ranks).
void run_training_rank(const TrainConfig& config, std::shared_ptr<comm::Communicator> communicator);
// Over a Gloo group joined from the environment of `dualpipe launch` or torchrun (MASTER_ADDR, MASTER_PORT,
// RANK, WORLD_SIZE).
void run_training_rank(const TrainConfig& config);

}  // namespace dualpipe::train
