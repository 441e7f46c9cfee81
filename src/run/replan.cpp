#include "dualpipe/run/replan.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dualpipe/run/train_rules.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/number_format.h"

namespace dualpipe::run {

namespace {

// `kind` over the config's ranks and micro-batches; throws InvalidArgument where it cannot serve them.
Schedule schedule_for(const TrainConfig& c, const std::string& kind, int stages_per_rank) {
  ScheduleOptions options;
  options.num_ranks = c.ranks, options.num_microbatches = c.microbatches, options.stages_per_rank = stages_per_rank;
  return make_schedule(kind, options);
}

// The step's pipeline in milliseconds, the layers cut as `cut`, each rank at its speed.
double simulated_ms(const Schedule& schedule, const std::vector<int>& cut, const std::vector<LayerCost>& layers,
                    const std::vector<double>& speeds) {
  CostModel costs = costs_of_cut(layers, cut, schedule.num_ranks, CostModel{});
  costs.rank_speed = speeds;
  return simulate(schedule, costs).metrics.makespan;
}

// --emulate-device's costs are a stage's of the balanced cut (train/device_emulation.h); per-stage lists name
// particular stages.
bool emulated_per_stage(const TrainConfig& c) {
  if (c.emulate_device.empty()) return false;
  const CostModel costs = CostModel::parse(c.emulate_device);
  return !costs.stage_forward.empty() || !costs.stage_scale.empty();
}

// The same per-layer costs as a stage's of a cut into `after` stages instead of `before`.
std::string emulated_costs_for(const std::string& text, int before, int after) {
  const CostModel c = CostModel::parse(text);
  const double k = static_cast<double>(before) / after;
  std::string out = formatted("F=%g,B=%g,W=%g", c.forward * k, c.backward * k, c.weight * k);
  if (c.all_to_all > 0) out += formatted(",a2a=%g", c.all_to_all * k);
  return out;
}

}  // namespace

std::string format_speeds(const std::vector<double>& speeds) {
  std::string text;
  for (const double s : speeds) text += (text.empty() ? "" : ",") + formatted("%.3g", s);
  return text;
}

Replan replan_for(const TrainConfig& c, const std::vector<int>& current_cut, const std::vector<double>& speeds,
                  const LayerCost& layer) {
  const std::vector<LayerCost> layers(c.layers, layer);
  Replan best;
  best.rank_speed = speeds;
  best.current_ms = simulated_ms(schedule_for(c, c.schedule, c.stages_per_rank), current_cut, layers, speeds);
  best.predicted_ms = best.current_ms;
  best.schedule = c.schedule, best.stages_per_rank = c.stages_per_rank, best.layers_per_stage = current_cut;
  // Emulated costs named per stage do not carry over to another count of stages.
  const bool same_stage_count = emulated_per_stage(c);
  for (const GeneratorInfo& g : generators()) {
    const int stages_per_rank = g.stages_per_rank == 0 && c.schedule == g.name ? c.stages_per_rank : 0;
    Schedule schedule;
    try {
      schedule = schedule_for(c, std::string(g.name), stages_per_rank);
    } catch (const InvalidArgument&) {
      continue;  // it cannot serve these ranks and micro-batches
    }
    if (schedule.num_stages > c.layers) continue;
    if (same_stage_count && schedule.num_stages != static_cast<int>(current_cut.size())) continue;
    const std::vector<int> cut = speed_balanced_cut(layers, schedule.placement, c.microbatches, speeds);
    const double ms = simulated_ms(schedule, cut, layers, speeds);
    if (ms < best.predicted_ms * (1 - 1e-9)) {
      best.schedule = g.name, best.stages_per_rank = stages_per_rank;
      best.layers_per_stage = cut, best.predicted_ms = ms;
    }
  }
  return best;
}

void apply_replan(const Replan& r, TrainConfig& c) {
  const int before = schedule_of(c).num_stages, after = static_cast<int>(r.layers_per_stage.size());
  if (!c.emulate_device.empty() && before != after)  // each layer keeps its emulated cost
    c.emulate_device = emulated_costs_for(c.emulate_device, before, after);
  c.schedule = r.schedule, c.stages_per_rank = r.stages_per_rank;
  c.layers_per_stage = format_cut(r.layers_per_stage);
  c.rank_speed = format_speeds(r.rank_speed);
}

std::string replan_request_path(const std::string& checkpoint_dir) { return checkpoint_dir + "/replan.json"; }

void write_replan_request(const std::string& checkpoint_dir, int step, const Replan& r) {
  const nlohmann::ordered_json request = {{"step", step},
                                          {"schedule", r.schedule},
                                          {"stages_per_rank", r.stages_per_rank},
                                          {"layers_per_stage", r.layers_per_stage},
                                          {"rank_speed", r.rank_speed},
                                          {"current_ms", r.current_ms},
                                          {"predicted_ms", r.predicted_ms}};
  write_file_atomically(replan_request_path(checkpoint_dir), request.dump(2) + "\n");
}

std::optional<ReplanRequest> read_replan_request(const std::string& checkpoint_dir) {
  std::ifstream in(replan_request_path(checkpoint_dir));
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str());
  ReplanRequest request;
  request.step = j.at("step").get<int>();
  Replan& r = request.replan;
  r.schedule = j.at("schedule").get<std::string>();
  r.stages_per_rank = j.at("stages_per_rank").get<int>();
  r.layers_per_stage = j.at("layers_per_stage").get<std::vector<int>>();
  r.rank_speed = j.at("rank_speed").get<std::vector<double>>();
  r.current_ms = j.at("current_ms").get<double>();
  r.predicted_ms = j.at("predicted_ms").get<double>();
  return request;
}

}  // namespace dualpipe::run
