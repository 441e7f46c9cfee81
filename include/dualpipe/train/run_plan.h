// What a TrainConfig means before anything runs: the schedule, the stage cut, the model and the learning-rate
// schedule, each checked with errors that name the option.
#pragma once

#include "dualpipe/models/gpt.h"
#include "dualpipe/schedule.h"
#include "dualpipe/train/checkpoint.h"
#include "dualpipe/train/lr_schedule.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

struct RunPlan {
  Schedule schedule;
  models::StageCut cut;
  models::GptConfig model;
  LrSchedule lr;
};

// Checks every option that needs no file (throws InvalidArgument naming the option and the rule).
RunPlan make_run_plan(const TrainConfig& config);

// make_run_plan, then what needs the files: the corpus is readable text long enough for --seq-len, and
// --checkpoint-dir is usable, and with --resume its newest complete checkpoint fits this run and is intact. What
// `dualpipe train` runs once before starting the ranks.
void check_config(const TrainConfig& config);

// What a checkpoint must match for this run to load it.
CheckpointIdentity checkpoint_identity(const TrainConfig& config, const RunPlan& plan);

}  // namespace dualpipe::train
