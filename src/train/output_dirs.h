// The directories a run writes into besides its checkpoints: --kineto-trace and --stall-report-dir. Each must be a
// directory that exists or can be made where it is named, writable, apart from the checkpoint directory and from
// each other; checked with the other options, and made only once every check passed, so that a refused command
// writes nothing.
#pragma once

#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

void check_output_dirs(const TrainConfig& config);
void make_output_dirs(const TrainConfig& config);

}  // namespace dualpipe::train
