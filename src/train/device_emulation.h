// `dualpipe train --emulate-device COSTS --emulate-link-rate RATE` (internal): the simulator's costs of each
// stage, in milliseconds, turned into the emulated device's costs of one MoE layer (models::EmulatedLayer), so a
// schedule can be simulated and run with the same setting (docs/benchmarks.md, the emulated-device benchmark).
//
// The costs are a stage's of the balanced cut, of L = layers / stages MoE layers: each layer gets F/L, (B-W)/L and
// W/L of compute, and a2a/(2L) of exchange time per dispatch or combine, which at the link's rate is a2a/(2L) x
// RATE/8 bytes sent off the rank; so under an uneven cut a stage of more layers takes longer. Costs given per stage
// ("F=2:1:1") are that stage's, over its own layers.
#pragma once

#include <vector>

#include "dualpipe/models/moe.h"
#include "dualpipe/models/stage_cut.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

// Empty without --emulate-device. Throws InvalidArgument naming the option and the rule: an MoE model on the
// CPU, costs the simulator accepts for the cut's stages without FB or comm (what the run measures), and a link
// rate (like 100mbit) when a2a is given, which needs --ep above 1.
std::vector<models::EmulatedLayer> emulated_stages(const TrainConfig& config, const models::StageCut& cut);

// "100mbit", "1gbit", "8kbit": bits per second; throws InvalidArgument naming `option` otherwise.
double parse_link_rate(const std::string& option, const std::string& text);

}  // namespace dualpipe::train
