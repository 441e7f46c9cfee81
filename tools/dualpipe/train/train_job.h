// `dualpipe train`: the job behind the command (the CLI glue is in cmd_train.cpp). One rank per process; every
// rank builds the same schedule, its stages of the student and the same batches from the options alone.
#pragma once

#include "../train_options.h"
#include "train_model.h"

namespace dualpipe::cli {

ModelSpec model_spec(const TrainOptions& options);

// Runs this process as one rank of the job, finding its peers through MASTER_ADDR, MASTER_PORT, RANK and
// WORLD_SIZE. Rank 0 prints the configuration, one line per step, the checks and a summary, and writes the
// merged trace. Throws dualpipe::Error (naming the rank) when a check fails or a peer is lost.
void run_train_rank(const TrainOptions& options);

}  // namespace dualpipe::cli
