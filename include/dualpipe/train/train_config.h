// The trainer's configuration under the train library's own names: the type is run::TrainConfig
// (run/train_config.h), which `dualpipe layout` fills too and whose rules run/train_rules.h holds.
#pragma once

#include "dualpipe/run/train_config.h"

namespace dualpipe::train {

using run::overlap_mode;
using run::TrainConfig;

}  // namespace dualpipe::train
