// The options of `dualpipe train` as CLI11 options, generated from the table of include/dualpipe/run/
// train_options.h, and its launch options. Shared by the command (cmd_train.cpp, in the LibTorch-free `dualpipe`)
// and the rank processes it starts (tools/dualpipe/train/, the `dualpipe-train-worker` executable), so both parse
// the same options the same way.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dualpipe/run/train_config.h"

namespace dualpipe::cli {

// Adds every option of the table to `command`, with its help text, group and default.
void add_train_options(CLI::App& command, run::TrainConfig& config);

// Where this machine's ranks stand in the job, as torchrun's multi-node flags (docs/launch.md).
struct TrainLaunch {
  int nnodes = 1, node_rank = 0;
  int nproc_per_node = 0;  // 0: the world split evenly over the nodes
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port (one node), 29500 (several)
  int max_restarts = 0;
};

// Adds the launch options (--nnodes, --node-rank, --nproc-per-node, --master-addr, --master-port, --max-restarts)
// to `command`, in their own help group.
void add_train_launch_options(CLI::App& command, TrainLaunch& launch);

// The same options as command-line arguments, for the launcher (the worker with --launch).
std::vector<std::string> train_launch_arguments(const TrainLaunch& launch);

}  // namespace dualpipe::cli
