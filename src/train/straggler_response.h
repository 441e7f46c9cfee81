// --on-straggler's side of a training run (docs/train.md, "Stragglers"): each rank's compute per layer and kind of
// action in a step, and on world rank 0 the straggler watch (run/straggler.h), with what it prints, records in the
// metrics and re-plans (run/replan.h).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/run/replan.h"
#include "dualpipe/run/straggler.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/train/train_config.h"
#include "progress_report.h"
#include "step_stats.h"

namespace dualpipe::train {

// This rank's compute milliseconds per layer for each kind of action, over its step's records from `from`.
run::RankKindTimes kind_times(const runtime::Executor& executor, size_t from, const std::vector<int>& layers_per_stage);

class StragglerResponse {
 public:
  StragglerResponse(const TrainConfig& config, std::vector<int> layers_per_stage);

  // World rank 0, after each step's gather of the pipeline's ranks: a straggler confirmed is printed with its
  // re-plan and recorded; with --on-straggler replan and a predicted gain of at least 5%, the re-plan is kept as
  // pending().
  void observe(int step, const std::vector<RankStepStats>& ranks, ProgressReport& report);
  const std::optional<run::Replan>& pending() const { return pending_; }

  // World rank 0, once every rank saved this step's checkpoint: leaves the re-plan for the launcher, which starts
  // the ranks again with it (include/dualpipe/train/job_launch.h), and says so.
  void stop_for_replan(int step, ProgressReport& report) const;

 private:
  const TrainConfig& config_;
  std::vector<int> cut_;
  run::StragglerWatch watch_;
  std::optional<run::Replan> pending_;
};

// Whether every rank stops after this step for a re-plan: world rank 0's response decides (`mine` is null on the
// other ranks), every rank of `world` hears it. A collective: every rank calls it after every step.
bool agree_on_replan(comm::Communicator& world, const StragglerResponse* mine, int tag,
                     std::chrono::milliseconds timeout);

// --emulate-slow-rank: this process's emulated device slowed from the straggler's first step on, if it is the slow
// pipeline rank.
void emulate_slow_rank(const TrainConfig& config, int pipeline_rank, int step);

}  // namespace dualpipe::train
