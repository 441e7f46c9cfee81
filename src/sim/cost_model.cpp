#include "dualpipe/sim/cost_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "dualpipe/sim/phase_pair.h"
#include "dualpipe/util/error.h"

// How long an action takes under the costs, and the costs of other shares of the model (costs_per_stage). Their
// text and rules: cost_text.cpp.
namespace dualpipe {

double CostModel::scale(int stage) const {
  return stage >= 0 && stage < static_cast<int>(stage_scale.size()) ? stage_scale[stage] : 1.0;
}

namespace {
double at(const std::vector<double>& list, int stage, double otherwise) {
  return stage >= 0 && stage < static_cast<int>(list.size()) ? list[stage] : otherwise;
}
}  // namespace

double CostModel::forward_of(int stage) const { return at(stage_forward, stage, forward) * scale(stage); }
double CostModel::backward_of(int stage) const { return at(stage_backward, stage, backward) * scale(stage); }
double CostModel::weight_of(int stage) const { return at(stage_weight, stage, weight) * scale(stage); }
double CostModel::input_of(int stage) const {
  if (!input) return backward_of(stage) - weight_of(stage);
  return at(stage_input, stage, *input) * scale(stage);
}
double CostModel::all_to_all_of(int stage) const { return all_to_all * scale(stage); }
namespace {

// An overlapped pair whose exchanges the other half's compute hides (sim/phase_pair.h), as phases on one thread or
// as halves on two; without exchanges, its halves' compute.
double pair_time(const CostModel& c, double forward, double forward_exchanges, double backward, double weight,
                 double backward_exchanges) {
  if (c.pair == PairMode::Off || forward_exchanges + backward_exchanges <= 0)
    return forward + forward_exchanges + backward + backward_exchanges;
  const PairHalves halves{forward,         forward_exchanges,  c.layers, backward - weight,
                          weight,          backward_exchanges, c.layers, c.all_to_all_latency.value_or(0)};
  return (c.pair == PairMode::Threads ? time_threaded_pair(halves) : time_phased_pair(halves)).duration;
}

// A lone backward: as phases, the chain of a pair without a forward half; else waiting for its exchanges whole.
double lone_backward_time(const CostModel& c, double backward, double weight, double exchanges) {
  if (c.pair != PairMode::Phases) return backward + exchanges;
  return pair_time(c, 0, 0, backward, weight, exchanges);
}

}  // namespace

double CostModel::overlapped_pair() const {
  return overlapped.value_or(pair_time(*this, forward, all_to_all, backward, weight, all_to_all));
}
double CostModel::activation_of(int stage) const { return at(stage_activation, stage, 1.0); }

double CostModel::recompute_time(int stage) const { return recompute ? forward_of(stage) : 0.0; }

double CostModel::duration(const Action& a) const {
  switch (a.type) {
    case ActionType::Forward: return forward_of(a.stage) + all_to_all_of(a.stage);
    case ActionType::Backward:
      return lone_backward_time(*this, backward_of(a.stage), weight_of(a.stage), all_to_all_of(a.stage)) +
             recompute_time(a.stage);
    case ActionType::BackwardInput:
      return input_of(a.stage) + all_to_all_of(a.stage) + recompute_time(a.stage);
    case ActionType::BackwardWeight: return weight_of(a.stage);
    case ActionType::Overlapped: {
      const double compute = forward_of(a.stage) + backward_of(a.bwd_stage);
      // FB is given for a pair of uniform stages; uneven stages scale it like the separate halves. The backward
      // half's recomputation is not overlapped with anything: it comes on top.
      if (overlapped) return *overlapped * compute / (forward + backward) + recompute_time(a.bwd_stage);
      return pair_time(*this, forward_of(a.stage), all_to_all_of(a.stage), backward_of(a.bwd_stage),
                       weight_of(a.bwd_stage), all_to_all_of(a.bwd_stage)) +
             recompute_time(a.bwd_stage);
    }
    case ActionType::Unshard: return unshard * scale(a.stage);
    case ActionType::ReduceGrad: return reduce * scale(a.stage);
    default: return 0.0;
  }
}

double CostModel::speed_of(int rank) const {
  return rank >= 0 && rank < static_cast<int>(rank_speed.size()) ? rank_speed[rank] : 1.0;
}

double CostModel::duration_on(int rank, const Action& a) const {
  const double d = duration(a);
  return a.is_compute() ? d / speed_of(rank) : d;
}

namespace {

// The costs of k times the share of the model: F, B, W, FB, a2a, the data-parallel collectives (their bytes are the
// share's parameters and gradients) and the activation's bytes.
void scale_model_share(CostModel& costs, double k) {
  costs.all_to_all *= k;
  costs.layers = std::max(1, static_cast<int>(std::lround(costs.layers * k)));
  // The network's, not the share's: it stays, within the exchanges' new time.
  if (costs.all_to_all_latency)
    costs.all_to_all_latency = std::min(*costs.all_to_all_latency, costs.all_to_all / (2 * costs.layers));
  costs.unshard *= k;
  costs.reduce *= k;
  costs.forward *= k;
  costs.backward *= k;
  costs.weight *= k;
  if (costs.input) *costs.input *= k;
  if (costs.overlapped) *costs.overlapped *= k;
  costs.activation_bytes *= k;
}

// Calls fn(list, name, factor) on the six per-stage lists, with what a change of stage size does to each: F, B,
// W and I scale with the share of the model a stage holds; the multipliers and activation shapes do not.
template <typename Fn>
void for_each_stage_list(CostModel& costs, double share, Fn&& fn) {
  fn(costs.stage_scale, "scale", 1.0);
  fn(costs.stage_forward, "F", share);
  fn(costs.stage_backward, "B", share);
  fn(costs.stage_weight, "W", share);
  fn(costs.stage_input, "I", share);
  fn(costs.stage_activation, "act_scale", 1.0);
}

}  // namespace

CostModel costs_per_stage(const CostModel& per_slice, int num_ranks, int num_stages) {
  DUALPIPE_REQUIRE(num_ranks >= 1 && num_stages >= num_ranks, "costs per stage need 1 <= R <= S, got R=", num_ranks,
                   " S=", num_stages);
  CostModel costs = per_slice;
  const double k = static_cast<double>(num_ranks) / num_stages;
  scale_model_share(costs, k);  // a stage holds R/S of the model, and so of its time and activations
  const auto spread = [&](std::vector<double>& list, const char* name, double factor) {
    const int given = static_cast<int>(list.size());
    if (given == num_ranks && num_stages != num_ranks) {
      std::vector<double> per_stage(num_stages);
      for (int s = 0; s < num_stages; ++s) per_stage[s] = list[static_cast<std::size_t>(s) * num_ranks / num_stages];
      list = std::move(per_stage);
    }
    DUALPIPE_REQUIRE(list.empty() || static_cast<int>(list.size()) == num_stages, "cost ", name, " has ", given,
                     " values; comparing schedules on R=", num_ranks, " ranks needs one per 1/R of the model (",
                     num_ranks, " values)");
    for (double& v : list) v *= factor;
  };
  for_each_stage_list(costs, k, spread);
  return costs;
}

CostModel costs_per_slice(const CostModel& per_stage, int num_ranks, int num_stages) {
  DUALPIPE_REQUIRE(num_ranks >= 1 && num_stages >= num_ranks, "costs per slice need 1 <= R <= S, got R=",
                   num_ranks, " S=", num_stages);
  CostModel costs = per_stage;
  const double k = static_cast<double>(num_stages) / num_ranks;
  scale_model_share(costs, k);
  const auto gather = [&](std::vector<double>& list, const char* name, double factor) {
    if (list.empty()) return;
    DUALPIPE_REQUIRE(static_cast<int>(list.size()) == num_stages, "cost ", name, " has ", list.size(),
                     " values; costs of S=", num_stages, " stages need one per stage");
    std::vector<double> sum(num_ranks, 0.0), count(num_ranks, 0.0);
    for (int s = 0; s < num_stages; ++s) {
      const std::size_t slice = static_cast<std::size_t>(s) * num_ranks / num_stages;  // as costs_per_stage spreads
      sum[slice] += list[s];
      count[slice] += 1;
    }
    list.assign(num_ranks, 0.0);
    for (int r = 0; r < num_ranks; ++r) list[r] = sum[r] / count[r] * factor;
  };
  for_each_stage_list(costs, k, gather);
  return costs;
}

}  // namespace dualpipe
