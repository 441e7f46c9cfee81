// What a TrainConfig means before anything runs: the schedule, the stage cut, the model and the learning-rate
// schedule, each checked with errors that name the option.
#pragma once

#include "dualpipe/models/gpt.h"
#include "dualpipe/schedule.h"
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

// make_run_plan, then what needs the files: the corpus is readable text long enough for --seq-len and one
// step's sequences, and --checkpoint-dir is usable. What `dualpipe train` runs once before starting the ranks.
void check_config(const TrainConfig& config);

}  // namespace dualpipe::train
