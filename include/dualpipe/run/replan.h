// Re-planning a training run for ranks of unequal speed (docs/train.md, "Stragglers"): every schedule the trainer
// can run on the same ranks and micro-batches, each with the cut of the layers that its placement and the speeds
// call for (sim/layer_partition.h's speed_balanced_cut), simulated with the measured per-layer costs; the best,
// beside the current schedule and cut at the same speeds. The request the ranks leave for the launcher to restart
// them with it. LibTorch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dualpipe/run/train_config.h"
#include "dualpipe/sim/layer_partition.h"

namespace dualpipe::run {

struct Replan {
  std::string schedule;              // a generator's name
  int stages_per_rank = 0;           // interleaved-1f1b's; 0: the schedule's own
  std::vector<int> layers_per_stage;
  std::vector<double> rank_speed;    // what it was planned for
  double current_ms = 0;             // the current schedule and cut at these speeds, predicted (one step's pipeline)
  double predicted_ms = 0;           // the re-planned one
  double gain() const { return current_ms > 0 ? 1 - predicted_ms / current_ms : 0; }
};

// A re-plan gains at least this share of the step, or it is not applied (--on-straggler replan).
constexpr double kMinimumReplanGain = 0.05;

// `layer`: one layer's F, B and W in milliseconds at speed 1; `current_cut`: the run's layers per stage.
Replan replan_for(const TrainConfig& config, const std::vector<int>& current_cut, const std::vector<double>& speeds,
                  const LayerCost& layer);

// "1,1,0.667,1": speeds as --rank-speed takes them, three significant digits.
std::string format_speeds(const std::vector<double>& speeds);

// The options that run it: --schedule, --stages-per-rank, --layers-per-stage and --rank-speed; and --emulate-device's
// costs, which are a stage's of the balanced cut, rescaled where the stage count changes, so that each layer keeps
// its cost.
void apply_replan(const Replan& replan, TrainConfig& config);

// The request file the ranks leave in the checkpoint directory when they stop for a re-plan, and its reading
// (nullopt where there is none). Written whole or not at all.
std::string replan_request_path(const std::string& checkpoint_dir);
// The job the ranks belong to, in their environment (kReplanJobVariable): the launcher makes a new one for each
// start of the ranks, and reads back only a request that names it, so that a file put there by anything else while
// the ranks ran is not taken for theirs.
constexpr const char* kReplanJobVariable = "DUALPIPE_REPLAN_JOB";
std::string start_replan_job();  // a new random name, set in this process's environment for the ranks it starts
void write_replan_request(const std::string& checkpoint_dir, int step, const Replan& replan);
struct ReplanRequest {
  int step = 0;
  Replan replan;
  std::string job;  // kReplanJobVariable of the ranks that wrote it ("" where it was unset)
};
// Throws InvalidArgument naming the file and the rule where it is not what the ranks write (a size above
// kMaxReplanRequestBytes, JSON of other fields, a schedule that is no kind, stages without layers, speeds not above 0).
constexpr std::size_t kMaxReplanRequestBytes = 1 << 20;
std::optional<ReplanRequest> read_replan_request(const std::string& checkpoint_dir);
// The job named by the request file (nullopt: there is none; "": it names none, or is no request at all).
std::optional<std::string> replan_request_job(const std::string& checkpoint_dir);
// The same rules on the file's text; errors name it `path`.
ReplanRequest parse_replan_request(const std::string& text, const std::string& path);
// `config` with the request applied, resuming from its checkpoint, checked as the command line's options are;
// throws InvalidArgument naming the request file where the result cannot run.
TrainConfig replanned_config(const ReplanRequest& request, const TrainConfig& config);

}  // namespace dualpipe::run
