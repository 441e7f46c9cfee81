#include "dualpipe/sim/result_json.h"

#include <algorithm>
#include <cmath>

#include "dualpipe/sim/layer_partition.h"

namespace dualpipe {

using Json = nlohmann::ordered_json;

Json json_units(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15)
    return static_cast<long long>(value);
  return value;
}

namespace {

Json list_or_null(const std::vector<double>& list) { return list.empty() ? Json(nullptr) : Json(list); }

Json placement_json(const Placement& p) {
  Json rank_of_stage = Json::array();
  for (int replica = 0; replica < p.num_replicas(); ++replica) {
    Json ranks = Json::array();
    for (int s = 0; s < p.num_stages(); ++s) ranks.push_back(p.rank_of(replica, s));
    rank_of_stage.push_back(ranks);
  }
  Json out = {{"replicas", p.num_replicas()}, {"rank_of_stage", rank_of_stage}};
  if (p.num_replicas() == 2) {
    Json replica = Json::array();
    for (int m = 0; m < p.num_microbatches(); ++m) replica.push_back(p.replica(m));
    out["replica_of_microbatch"] = replica;
  }
  return out;
}

}  // namespace

Json costs_json(const CostModel& c) {
  const auto list_or = [](const std::vector<double>& list, double uniform) {
    return list.empty() ? Json(uniform) : Json(list);
  };
  return {{"F", list_or(c.stage_forward, c.forward)},
          {"B", list_or(c.stage_backward, c.backward)},
          {"W", list_or(c.stage_weight, c.weight)},
          {"I", c.input ? list_or(c.stage_input, *c.input) : Json(nullptr)},  // null: B - W
          {"FB", c.overlapped_pair()},
          {"comm", c.comm},
          {"gap", c.gap},
          {"a2a", c.all_to_all},
          {"a2a_latency", c.all_to_all_latency.value_or(0)},
          {"layers", c.layers},
          {"pair", pair_mode_name(c.pair)},
          {"unshard", c.unshard},
          {"reduce", c.reduce},
          {"scale", list_or_null(c.stage_scale)},
          {"act_bytes", c.activation_bytes > 0 ? Json(c.activation_bytes) : Json(nullptr)},
          {"act_scale", list_or_null(c.stage_activation)},
          {"w_mem", c.w_mem},
          {"recompute", c.recompute},
          {"input_mem", c.input_mem}};
}

Json actions_json(const Schedule& s) {
  Json actions = Json::array();
  for (const auto& rank_actions : s.actions) {
    Json row = Json::array();
    for (const Action& a : rank_actions) row.push_back(to_string(a));
    actions.push_back(row);
  }
  return actions;
}

Json schedule_json(const Schedule& s, bool with_actions) {
  Json out = {{"kind", s.kind},
              {"ranks", s.num_ranks},
              {"stages", s.num_stages},
              {"microbatches", s.num_microbatches},
              {"placement", placement_json(s.placement)}};
  if (with_actions) out["actions"] = actions_json(s);
  return out;
}

Json simulated_json(const Schedule& schedule, const CostModel& costs, const Metrics& metrics) {
  const bool bytes = costs.activation_bytes > 0;
  Json per_rank = Json::array();
  for (const RankMetrics& m : metrics.per_rank) {
    per_rank.push_back({{"rank", m.rank},
                        {"busy", m.busy},
                        {"idle", m.idle},
                        {"span", m.span},
                        {"peak_activations", json_units(m.peak_activations)},
                        {"peak_activation_fraction", m.peak_activation_fraction},
                        {"peak_activation_bytes", bytes ? Json(m.peak_activation_bytes) : nullptr},
                        {"stages_held", m.stages_held},
                        {"parameter_copies", json_units(m.parameter_copies)}});
  }
  return {{"kind", schedule.kind},
          {"ranks", schedule.num_ranks},
          {"stages", schedule.num_stages},
          {"microbatches", schedule.num_microbatches},
          {"costs", costs_json(costs)},
          {"costs_text", costs.to_string()},
          {"makespan", metrics.makespan},
          {"bubble", metrics.bubble},
          {"bubble_rate", metrics.bubble_rate},
          {"step_bubble_rate", metrics.step_bubble_rate},
          {"peak_activations", json_units(metrics.peak_activations())},
          {"per_rank", per_rank}};
}

double parameter_copies(const PlanCandidate& c) {
  double copies = 0;
  for (const RankMetrics& r : c.metrics.per_rank) copies = std::max(copies, r.parameter_copies);
  return copies;
}

Json plan_json(const Plan& plan, const PlanRequest& request, bool with_actions) {
  const PlanCandidate& best = plan.best;
  Json j = simulated_json(best.schedule, best.costs, best.metrics);
  j["kind"] = best.name;
  j["objective"] = request.objective == PlanObjective::Span ? "span" : "makespan";
  j["objective_value"] = best.score;
  j["memory_limit"] = request.memory_limit ? Json(*request.memory_limit) : nullptr;
  j["peak_activations_per_slice"] = best.peak;
  j["parameter_copies"] = json_units(parameter_copies(best));
  j["minimum_memory"] = plan.minimum_memory;
  if (!best.layers_per_stage.empty()) j["layers_per_stage"] = format_cut(best.layers_per_stage);
  if (with_actions) j["actions"] = actions_json(best.schedule);
  return j;
}

}  // namespace dualpipe
