// What a TrainConfig means before anything runs: the schedule, the stage cut, the model and the learning-rate
// schedule, each checked with errors that name the option.
#pragma once

#include "dualpipe/data/corpus.h"
#include "dualpipe/models/gpt.h"
#include "dualpipe/schedule/schedule.h"
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

// make_run_plan, then what needs the files: the corpus is readable text long enough for --seq-len; no output
// (--metrics, --trace) is an input or lies in --checkpoint-dir; --checkpoint-dir is writable and holds no
// earlier run's checkpoints unless --resume continues them; with --resume, its newest complete checkpoint fits
// this run and is intact. What `dualpipe train` runs once before starting the ranks.
void check_config(const TrainConfig& config);

// A run without --resume is a new run: in a --checkpoint-dir that holds an earlier run's checkpoints it would mix
// two runs' steps, and a later --resume would continue whichever saved last. Throws InvalidArgument then.
void check_fresh_start(const TrainConfig& config);

// What a checkpoint must match for this run to load it: the model, the cut, the ranks and the data stream.
CheckpointIdentity checkpoint_identity(const TrainConfig& config, const RunPlan& plan, const data::Corpus& corpus);

// Throws InvalidArgument naming the first field where the checkpoint `manifest` of `dir` differs from this run,
// or --steps when it leaves nothing to train after the checkpoint.
void check_resumable(const TrainConfig& config, const CheckpointIdentity& identity, const std::string& dir,
                     const CheckpointManifest& manifest);

}  // namespace dualpipe::train
