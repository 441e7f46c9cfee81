#include "straggler_response.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "dualpipe/models/moe.h"
#include "dualpipe/run/train_options.h"
#include "dualpipe/runtime/gather.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/util/median.h"
#include "dualpipe/util/number_format.h"
#include "dualpipe/util/shell_words.h"

namespace dualpipe::train {

namespace {

int kind_of(ActionType type) {
  switch (type) {
    case ActionType::Forward: return 0;
    case ActionType::Backward: return 1;
    case ActionType::BackwardInput: return 2;
    case ActionType::BackwardWeight: return 3;
    case ActionType::Overlapped: return 4;
    default: return -1;
  }
}

// One layer's F, B and W in milliseconds at speed 1 (run::layer_cost_of) from the median over the ranks of each
// kind, every rank's figure scaled by its measured speed.
LayerCost layer_cost_of(const std::vector<RankStepStats>& ranks, const std::vector<double>& speed) {
  run::RankKindTimes typical{};
  for (int k = 0; k < run::kActionKinds; ++k) {
    std::vector<double> values;
    for (std::size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r].kind_ms_per_layer[k] > 0) values.push_back(ranks[r].kind_ms_per_layer[k] * speed[r]);
    typical[k] = median(values);  // 0 where no rank ran the kind
  }
  return run::layer_cost_of(typical);
}

}  // namespace

run::RankKindTimes kind_times(const runtime::Executor& executor, size_t from, const std::vector<int>& layers) {
  const auto& records = executor.recorded_actions();
  const auto& actions = executor.lowered_schedule().actions[executor.pipeline_rank()];
  std::array<double, run::kActionKinds> ms{}, units{};
  for (size_t i = from; i < records.size(); ++i) {
    const Action& a = actions[records[i].index];
    const int k = kind_of(a.type);
    if (k < 0) continue;
    ms[k] += std::chrono::duration<double, std::milli>(records[i].end - records[i].start).count();
    units[k] += a.type == ActionType::Overlapped ? layers[a.stage] + 2.0 * layers[a.bwd_stage] : layers[a.stage];
  }
  run::RankKindTimes out;
  for (int k = 0; k < run::kActionKinds; ++k) out[k] = units[k] > 0 ? ms[k] / units[k] : -1;
  return out;
}

StragglerResponse::StragglerResponse(const TrainConfig& c, std::vector<int> cut)
    : config_(c), cut_(std::move(cut)),
      watch_(c.stragglers.threshold, c.stragglers.steps, c.stragglers.rank_speed) {}

void StragglerResponse::observe(int step, const std::vector<RankStepStats>& ranks, ProgressReport& report) {
  std::vector<run::RankKindTimes> times;
  for (const RankStepStats& r : ranks) times.push_back(r.kind_ms_per_layer);
  const std::optional<run::Straggler> found = watch_.observe(step, times);
  if (!found) return;
  const std::vector<double>& speed = watch_.measured_speed();
  std::string kinds;
  nlohmann::ordered_json per_kind;
  for (int k = 0; k < run::kActionKinds; ++k) {
    if (found->per_kind[k] <= 0) continue;
    kinds += formatted("%s%s %.2fx", kinds.empty() ? "" : ", ", run::action_kind_name(k), found->per_kind[k]);
    per_kind[run::action_kind_name(k)] = found->per_kind[k];
  }
  std::printf("straggler: pipeline rank %d at %.2fx the median since step %d (%s); speeds measured %s\n", found->rank,
              found->slowdown, found->since_step, kinds.c_str(), run::format_speeds(speed).c_str());
  const run::Replan replan = run::replan_for(config_, cut_, speed, layer_cost_of(ranks, speed));
  std::printf("  re-planned for those speeds: %s with layers per stage %s (now %s %s): step %.1f ms predicted "
              "against %.1f ms now (%+.1f%%)\n",
              replan.schedule.c_str(), format_cut(replan.layers_per_stage).c_str(), config_.pipeline.schedule.c_str(),
              format_cut(cut_).c_str(), replan.predicted_ms, replan.current_ms, -100 * replan.gain());
  TrainConfig applied = config_;
  run::apply_replan(replan, applied);
  applied.checkpoint.resume = !applied.checkpoint.dir.empty();
  std::vector<std::string> words = {"dualpipe", "train"};
  for (std::string& argument : run::command_arguments(applied, /*every_option=*/false))
    words.push_back(std::move(argument));
  const std::string command = shell_command(words);
  // The re-plan restarts the ranks after a step; after the last one there is nothing left to re-plan.
  const bool last_step = step >= config_.optimizer.steps;
  const bool replans = config_.stragglers.action == run::StragglerAction::Replan;
  const bool apply = replans && replan.gain() >= run::kMinimumReplanGain && !last_step;
  if (apply) {
    std::printf("  applying it after this step (--on-straggler replan)\n");
  } else if (replans && last_step) {
    std::printf("  not applied: found at the last step (%d); to apply it to a next run: %s\n", step, command.c_str());
  } else if (replans) {
    std::printf("  not applied: it gains under %.0f%%\n", 100 * run::kMinimumReplanGain);
  } else {
    std::printf("  to apply it: %s\n", command.c_str());
  }
  std::fflush(stdout);
  if (apply) pending_ = replan;
  nlohmann::ordered_json record = {{"type", "straggler"},       {"step", step},
                                   {"rank", found->rank},        {"since_step", found->since_step},
                                   {"slowdown", found->slowdown}, {"per_kind", per_kind},
                                   {"measured_speed", speed}};
  record["replan"] = {{"schedule", replan.schedule},
                      {"stages_per_rank", replan.stages_per_rank},
                      {"layers_per_stage", format_cut(replan.layers_per_stage)},
                      {"current_ms", replan.current_ms},
                      {"predicted_ms", replan.predicted_ms},
                      {"gain", replan.gain()},
                      {"applied", apply},
                      {"command", command}};
  report.record(record.dump());
}

bool agree_on_replan(comm::Communicator& world, const StragglerResponse* mine, int tag,
                     std::chrono::milliseconds timeout) {
  const double stop = mine && mine->pending() ? 1 : 0;
  return runtime::sum_over_ranks(world, torch::full({1}, stop, torch::kDouble), tag, timeout).item<double>() > 0;
}

void emulate_slow_rank(const TrainConfig& c, int pipeline_rank, int step) {
  if (c.stragglers.emulate_slow_rank.empty()) return;
  const run::SlowRank slow = run::parse_slow_rank(c.stragglers.emulate_slow_rank, c.parallel.pp);
  models::set_emulated_slowdown(pipeline_rank == slow.rank && step >= slow.from_step ? slow.factor : 1.0);
}

void StragglerResponse::stop_for_replan(int step, ProgressReport& report) const {
  const run::Replan& r = *pending_;
  run::write_replan_request(config_.checkpoint.dir, step, r);
  std::printf("stopping after step %d to restart the ranks re-planned: %s with layers per stage %s\n", step,
              r.schedule.c_str(), format_cut(r.layers_per_stage).c_str());
  std::fflush(stdout);
  const nlohmann::ordered_json record = {{"type", "replan"},
                                         {"step", step},
                                         {"schedule", r.schedule},
                                         {"layers_per_stage", format_cut(r.layers_per_stage)},
                                         {"rank_speed", r.rank_speed},
                                         {"predicted_ms", r.predicted_ms},
                                         {"current_ms", r.current_ms}};
  report.record(record.dump());
}

}  // namespace dualpipe::train
