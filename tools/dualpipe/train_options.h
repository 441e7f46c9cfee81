// The options of `dualpipe train` as CLI11 options, generated from the table of include/dualpipe/run/
// train_options.h, and its launch options. Shared by the command (cmd_train.cpp, in the LibTorch-free `dualpipe`)
// and the rank processes it starts (tools/dualpipe/train/, the `dualpipe-train-worker` executable), so both parse
// the same options the same way.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dualpipe/run/train_config.h"
#include "dualpipe/run/train_launch.h"

namespace dualpipe::cli {

// Adds every option of the table to `command`, with its help text, group and default.
void add_train_options(CLI::App& command, run::TrainConfig& config);

using run::TrainLaunch;

// Adds the launch options (--nnodes, --node-rank, --nproc-per-node, --master-addr, --master-port, --max-restarts)
// to `command`, in their own help group.
void add_train_launch_options(CLI::App& command, TrainLaunch& launch);

// The same options as command-line arguments, for the launcher (the worker with --launch).
std::vector<std::string> train_launch_arguments(const TrainLaunch& launch);

}  // namespace dualpipe::cli
