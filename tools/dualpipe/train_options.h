// The options of `dualpipe train` as CLI11 options, generated from the table of include/dualpipe/train/
// train_options.h. Shared by the command (cmd_train.cpp, in the LibTorch-free `dualpipe`) and the rank processes
// it starts (tools/dualpipe/train/, the `dualpipe-train-worker` executable), so both parse the same options the
// same way.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dualpipe/train/train_config.h"

namespace dualpipe::cli {

// Adds every option of the table to `command`, with its help text, group and default.
void add_train_options(CLI::App& command, train::TrainConfig& config);

// The same options as command-line arguments, every one explicit (a switch either way, a flag when set), for the
// rank processes.
std::vector<std::string> train_arguments(const train::TrainConfig& config);

}  // namespace dualpipe::cli
