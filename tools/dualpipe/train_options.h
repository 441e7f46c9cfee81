// The options of `dualpipe train`, shared by the command (cmd_train.cpp, in the LibTorch-free `dualpipe`) and
// the rank processes it starts (tools/dualpipe/train/, the `dualpipe-train-worker` executable, which links the
// runtime). Keeping LibTorch out of `dualpipe` keeps every other command starting in milliseconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dualpipe/schedule.h"

namespace dualpipe::cli {

struct TrainOptions {
  std::string schedule = "dualpipe";
  int ranks = 4;
  int microbatches = 8;
  int stages_per_rank = 0;  // interleaved-1f1b; 0: the schedule's default
  int steps = 20;
  int64_t hidden = 32;
  int64_t batch = 4;  // rows per micro-batch
  int layers = 8;     // residual blocks in the whole model
  std::string optimizer = "adam";
  double lr = 0;  // 0: the optimizer's default
  uint64_t seed = 0;
  std::string trace = "dualpipe-trace.json";  // empty: no trace file
  double timeout_seconds = 60;
  double act_bytes = 0;  // bytes of one stage activation, for the planned peak in bytes; 0: not given
};

constexpr double kDefaultAdamLr = 0.003;
constexpr double kDefaultSgdLr = 0.3;

// Adds every option above to `command`, with its help text and default.
void add_train_options(CLI::App& command, TrainOptions& options);

// Checks every option and that the schedule and the model fit together (the layers split evenly into the
// schedule's stages); throws InvalidArgument naming the option and the rule. Returns the schedule to run.
Schedule check_train_options(const TrainOptions& options);

double learning_rate(const TrainOptions& options);

// The same options as command-line arguments, every one explicit, for the rank processes.
std::vector<std::string> train_arguments(const TrainOptions& options);

}  // namespace dualpipe::cli
