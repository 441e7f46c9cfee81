#include "dualpipe/run/replan.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dualpipe/run/train_rules.h"
#include "dualpipe/run/train_values.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"
#include "dualpipe/util/number_format.h"
#include "dualpipe/util/printable.h"

namespace dualpipe::run {

using detail::concat;

namespace {

// `kind` over the config's ranks and micro-batches; throws InvalidArgument where it cannot serve them.
Schedule schedule_for(const TrainConfig& c, const std::string& kind, int stages_per_rank) {
  ScheduleOptions options;
  options.num_ranks = c.parallel.pp, options.num_microbatches = c.pipeline.microbatches, options.stages_per_rank = stages_per_rank;
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
  if (c.device.emulate.empty()) return false;
  const CostModel costs = CostModel::parse(c.device.emulate);
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
  const std::vector<LayerCost> layers(c.model.layers, layer);
  Replan best;
  best.rank_speed = speeds;
  best.current_ms = simulated_ms(schedule_for(c, c.pipeline.schedule, c.pipeline.stages_per_rank), current_cut, layers, speeds);
  best.predicted_ms = best.current_ms;
  best.schedule = c.pipeline.schedule, best.stages_per_rank = c.pipeline.stages_per_rank, best.layers_per_stage = current_cut;
  // Emulated costs named per stage do not carry over to another count of stages.
  const bool same_stage_count = emulated_per_stage(c);
  for (const GeneratorInfo& g : generators()) {
    const int stages_per_rank = g.stages_per_rank == 0 && c.pipeline.schedule == g.name ? c.pipeline.stages_per_rank : 0;
    Schedule schedule;
    try {
      schedule = schedule_for(c, std::string(g.name), stages_per_rank);
    } catch (const InvalidArgument&) {
      continue;  // it cannot serve these ranks and micro-batches
    }
    if (schedule.num_stages > c.model.layers) continue;
    if (same_stage_count && schedule.num_stages != static_cast<int>(current_cut.size())) continue;
    const std::vector<int> cut = speed_balanced_cut(layers, schedule.placement, c.pipeline.microbatches, speeds);
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
  if (!c.device.emulate.empty() && before != after)  // each layer keeps its emulated cost
    c.device.emulate = emulated_costs_for(c.device.emulate, before, after);
  c.pipeline.schedule = r.schedule, c.pipeline.stages_per_rank = r.stages_per_rank;
  c.model.layers_per_stage = r.layers_per_stage;
  // As the report prints them (three digits), so that the run applied is the command the report gives.
  c.stragglers.rank_speed = parse_speeds(format_speeds(r.rank_speed));
}

// What a request that cannot be applied leaves behind.
constexpr const char* kReplanKept = " (the ranks write this file when they stop for a re-plan; the checkpoint beside "
                                    "it is kept: --resume continues on the current cut)";

std::string replan_request_path(const std::string& checkpoint_dir) { return checkpoint_dir + "/replan.json"; }

std::string start_replan_job() {
  std::random_device random;
  const std::string job = formatted("%08x%08x", random(), random());
  DUALPIPE_CHECK(::setenv(kReplanJobVariable, job.c_str(), 1) == 0, "cannot set ", kReplanJobVariable);
  return job;
}

void write_replan_request(const std::string& checkpoint_dir, int step, const Replan& r) {
  const char* job = std::getenv(kReplanJobVariable);
  const nlohmann::ordered_json request = {{"job", job ? job : ""},
                                          {"step", step},
                                          {"schedule", r.schedule},
                                          {"stages_per_rank", r.stages_per_rank},
                                          {"layers_per_stage", r.layers_per_stage},
                                          {"rank_speed", r.rank_speed},
                                          {"current_ms", r.current_ms},
                                          {"predicted_ms", r.predicted_ms}};
  write_file_atomically(replan_request_path(checkpoint_dir), request.dump(2) + "\n");
}

namespace {

// The request file's text, nullopt where there is none. The ranks write a few hundred bytes; anything larger in its
// place is refused naming it (read_file_within), not parsed into a restart.
std::optional<std::string> request_text(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  return read_file_within(path, kMaxReplanRequestBytes, "re-plan requests");
}

}  // namespace

std::optional<ReplanRequest> read_replan_request(const std::string& checkpoint_dir) {
  const std::string path = replan_request_path(checkpoint_dir);
  const std::optional<std::string> text = request_text(path);
  if (!text) return std::nullopt;  // no re-plan: the ranks stopped for good
  return parse_replan_request(*text, path);
}

std::optional<std::string> replan_request_job(const std::string& checkpoint_dir) {
  try {
    const std::optional<std::string> text = request_text(replan_request_path(checkpoint_dir));
    if (!text) return std::nullopt;
    const nlohmann::json j = nlohmann::json::parse(*text);
    return j.is_object() && j.contains("job") && j["job"].is_string() ? j["job"].get<std::string>() : "";
  } catch (const std::exception&) {  // unreadable, too large or not JSON: no job's request
    return "";
  }
}

ReplanRequest parse_replan_request(const std::string& text, const std::string& path) {
  const auto bad = [&](const std::string& why) { return InvalidArgument(concat(path, ": ", why, kReplanKept)); };
  ReplanRequest request;
  Replan& r = request.replan;
  // nlohmann converts any number to int, a double or 4e20 past int's range too (undefined behaviour: fuzz_replan).
  const auto whole = [&](const nlohmann::json& v, const char* what) {
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 1'000'000'000)
      throw bad(concat(what, " ", v.dump().substr(0, 40), " is not a whole number from 0 to 10^9"));
    return static_cast<int>(v.get<long long>());
  };
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    request.job = j.value("job", std::string());
    request.step = whole(j.at("step"), "step");
    r.schedule = j.at("schedule").get<std::string>();
    r.stages_per_rank = whole(j.at("stages_per_rank"), "stages_per_rank");
    if (!j.at("layers_per_stage").is_array()) throw bad("layers_per_stage is not a list");
    for (const nlohmann::json& layers : j.at("layers_per_stage"))
      r.layers_per_stage.push_back(whole(layers, "layers_per_stage holds"));
    r.rank_speed = j.at("rank_speed").get<std::vector<double>>();
    r.current_ms = j.at("current_ms").get<double>();
    r.predicted_ms = j.at("predicted_ms").get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("not a re-plan request: ") + e.what());
  }
  if (request.step < 1) throw bad("step " + std::to_string(request.step) + " is not a step (1 or more)");
  if (!find_generator(r.schedule))
    throw bad("schedule '" + printable_line(r.schedule).substr(0, 100) + "' is not a schedule kind");
  for (int layers : r.layers_per_stage)
    if (layers < 1) throw bad("layers_per_stage holds " + std::to_string(layers) + ": every stage has a layer");
  for (double speed : r.rank_speed)
    if (!(std::isfinite(speed) && speed > 0))
      throw bad("rank_speed holds " + formatted("%g", speed) + ": speeds are above 0");
  if (!(std::isfinite(r.current_ms) && std::isfinite(r.predicted_ms) && r.current_ms >= 0 && r.predicted_ms >= 0))
    throw bad("current_ms and predicted_ms must be finite and 0 or more");
  return request;
}

TrainConfig replanned_config(const ReplanRequest& request, const TrainConfig& config) {
  const Replan& r = request.replan;
  TrainConfig next = config;
  try {
    apply_replan(r, next);
    check_options(next);
    const int stages = schedule_of(next).num_stages;
    const long long layers = std::accumulate(r.layers_per_stage.begin(), r.layers_per_stage.end(), 0LL);
    DUALPIPE_REQUIRE(static_cast<int>(r.layers_per_stage.size()) == stages, "its cut has ",
                     r.layers_per_stage.size(), " stages, ", r.schedule, " over ", next.parallel.pp, " ranks has ", stages);
    DUALPIPE_REQUIRE(layers == next.model.layers, "its cut holds ", layers, " layers, the model ", next.model.layers);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(concat(replan_request_path(config.checkpoint.dir), ": the re-plan cannot run: ", e.what(),
                                 kReplanKept));
  }
  next.checkpoint.resume = true;
  return next;
}

}  // namespace dualpipe::run
