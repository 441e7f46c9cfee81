#include "dualpipe/sim/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/activation_memory.h"
#include "dualpipe/sim/exact_search.h"
#include "dualpipe/sim/layer_partition.h"
#include "dualpipe/sim/list_scheduler.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "time_tolerance.h"

namespace dualpipe {
namespace {

using detail::kEps;

struct PlacementChoice {
  std::string name;  // "linear", "V", "two directions"
  std::string kind;  // placement_kind()
  Placement placement;
};

bool allowed(const PlanRequest& r, const std::string& kind) {
  return r.placements.empty() || std::find(r.placements.begin(), r.placements.end(), kind) != r.placements.end();
}

// The placements the automatic schedules are built for.
std::vector<PlacementChoice> placements(const PlanRequest& request) {
  const int R = request.num_ranks, M = request.num_microbatches;
  std::vector<PlacementChoice> out;
  if (allowed(request, "linear")) out.push_back({"linear", "linear", Placement::linear(R)});
  if (allowed(request, "v")) out.push_back({"V", "v", Placement::v_shape(R)});
  if (R >= 2 && M >= 2 && allowed(request, "two")) {
    std::vector<std::uint8_t> replica(M);
    for (int m = 0; m < M; ++m) replica[m] = m < (M + 1) / 2 ? 0 : 1;
    out.push_back({"two directions", "two", Placement::bidirectional(R, std::move(replica))});
  }
  return out;
}

// One micro-batch at a time, each stage's forward then the backwards back: the least memory a placement allows.
Schedule one_at_a_time(const Placement& p, int M) {
  Schedule s;
  s.kind = "one-at-a-time";
  s.num_ranks = p.num_ranks();
  s.num_stages = p.num_stages();
  s.num_microbatches = M;
  s.placement = p;
  s.actions.resize(p.num_ranks());
  for (int m = 0; m < M; ++m) {
    for (int st = 0; st < s.num_stages; ++st) s.actions[p.rank(st, m)].push_back(Action::forward(st, m));
    for (int st = s.num_stages - 1; st >= 0; --st) s.actions[p.rank(st, m)].push_back(Action::backward(st, m));
  }
  return s;
}

double slice_units(const Schedule& s, double stage_units) {
  return stage_units * s.num_ranks / s.num_stages;
}

bool differ(double a, double b) { return std::fabs(a - b) > kEps * std::max(1.0, std::fabs(b)); }

// The objective, then less memory, the shorter step, and on a tie (up to rounding) the simpler schedule: fewer
// stages, one replica.
bool better(const PlanCandidate& a, const PlanCandidate& b) {
  if (differ(a.score, b.score)) return a.score < b.score;
  if (differ(a.peak, b.peak)) return a.peak < b.peak;
  if (differ(a.metrics.makespan, b.metrics.makespan)) return a.metrics.makespan < b.metrics.makespan;
  if (a.schedule.num_stages != b.schedule.num_stages) return a.schedule.num_stages < b.schedule.num_stages;
  return a.schedule.placement.num_replicas() < b.schedule.placement.num_replicas();
}

// The switches of a list-scheduler policy (list_scheduler.h) the search varies.
struct Knobs {
  bool delay_first = false;  // forward_may_delay_first_backward
  bool backward_first = true;
  bool delay = true;         // forward_may_delay_backward
  double w_fill = 1.0;
  double inflight = 1.0;
  bool pairs = false;
  // The share of the memory limit the builder is given: a tighter budget sometimes schedules better (the
  // heuristic is greedy with memory), and a plan under a larger limit should never be worse than under a smaller.
  double memory_share = 1.0;
};

struct Trial {
  double score = 0;
  Knobs knobs;
  std::optional<Schedule> schedule;
};

// The policies one switch away.
std::vector<Knobs> neighbours(const Knobs& k, bool pairs_save) {
  std::vector<Knobs> out;
  for (const double d : {0.25, -0.25, 0.5, -0.5}) {
    if (k.inflight > 0 && k.inflight + d >= 1) out.push_back(k), out.back().inflight = k.inflight + d;
  }
  if (k.inflight > 0) out.push_back(k), out.back().inflight = 0;
  for (const double w : {0.0, 0.5, 1.0})
    if (w != k.w_fill) out.push_back(k), out.back().w_fill = w;
  out.push_back(k), out.back().backward_first = !k.backward_first;
  out.push_back(k), out.back().delay = !k.delay;
  out.push_back(k), out.back().delay_first = !k.delay_first;
  if (pairs_save) out.push_back(k), out.back().pairs = !k.pairs;
  for (const double share : {0.75, 0.5})
    if (share < k.memory_share) out.push_back(k), out.back().memory_share = share;
  return out;
}

class Search {
 public:
  explicit Search(const PlanRequest& request) : request_(request) {}

  // Simulates the schedule and keeps it when it is within the limit and the best of its name so far.
  // The costs of a cut into S stages: the comparison convention, or the balanced cut of the layers.
  const CostModel& costs_for(int S) {
    auto it = costs_.find(S);
    if (it != costs_.end()) return it->second;
    CostModel c;
    if (request_.layers.empty()) {
      c = costs_per_stage(request_.costs, request_.num_ranks, S);
    } else {
      const std::vector<int> cut = balanced_cut(request_.layers, S);
      c = costs_of_cut(request_.layers, cut, request_.num_ranks, request_.costs);
      cuts_[S] = cut;
    }
    return costs_.emplace(S, std::move(c)).first->second;
  }
  bool can_cut(int S) const { return request_.layers.empty() || static_cast<int>(request_.layers.size()) >= S; }

  void consider(const std::string& name, Schedule schedule) {
    if (!can_cut(schedule.num_stages)) return;
    CostModel costs = costs_for(schedule.num_stages);
    std::vector<int> cut;
    if (!request_.layers.empty()) cut = cuts_.at(schedule.num_stages);
    // Ranks of unequal speed: the cut depends on which rank runs which stage, so on the schedule's placement.
    if (!request_.layers.empty() && !request_.costs.rank_speed.empty()) {
      cut = speed_balanced_cut(request_.layers, schedule.placement, request_.num_microbatches,
                               request_.costs.rank_speed);
      costs = costs_of_cut(request_.layers, cut, request_.num_ranks, request_.costs);
    }
    Metrics metrics = simulate(schedule, costs).metrics;
    ++evaluated_;
    const double peak = slice_peak(schedule, metrics);
    if (request_.memory_limit && peak > *request_.memory_limit + kEps) return;
    PlanCandidate c{name, std::move(schedule), std::move(costs), std::move(metrics), peak, 0.0, {}};
    c.score = objective_value(c.metrics, request_.objective);
    c.layers_per_stage = std::move(cut);
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      by_name_.emplace(name, std::move(c));
    } else if (better(c, it->second)) {
      it->second = std::move(c);
    }
  }

  void families() {
    for (const GeneratorInfo& g : generators()) {
      if (!allowed(request_, std::string(g.placement))) continue;
      std::vector<int> degrees = {0};
      if (g.stages_per_rank == 0) degrees = {2, 3, 4};  // the caller picks the stages per rank
      for (int v : degrees) {
        ScheduleOptions o{request_.num_ranks, request_.num_microbatches, v};
        Schedule s;
        try {
          s = g.make(o);
        } catch (const InvalidArgument&) {
          continue;  // the family cannot serve R and M
        }
        consider(v ? detail::concat(g.name, " v=", v) : std::string(g.name), std::move(s));
      }
    }
  }

  // Automatic schedules: a few policies per placement, then coordinate descent from the best one.
  void automatic(const std::vector<PlacementChoice>& choices) {
    const bool pairs_save = request_.costs.overlapped &&
                            *request_.costs.overlapped < request_.costs.forward + request_.costs.backward;
    std::vector<Trial> best(choices.size());
    auto run = [&](std::size_t p, const Knobs& k) {
      const PlacementChoice& choice = choices[p];
      const int S = choice.placement.num_stages();
      if (!can_cut(S)) return false;
      const CostModel& costs = costs_for(S);
      ListTiming timing;
      ListPolicy policy = policy_of(k, S);
      if (best[p].schedule) {  // only a better schedule of this placement is of use
        policy.give_up_above = best[p].score;
        policy.give_up_on_span = request_.objective == PlanObjective::Span;
      }
      std::optional<Schedule> s =
          list_schedule(choice.placement, request_.num_microbatches, costs, policy, "auto", &timing);
      ++evaluated_;
      if (!s) return false;
      const double score = request_.objective == PlanObjective::Makespan ? timing.makespan : timing.max_span;
      Trial& t = best[p];
      if (t.schedule && score >= t.score - kEps * std::max(1.0, t.score)) return false;
      t = Trial{score, k, std::move(s)};
      return true;
    };
    // Chosen on the Zero Bubble paper's settings and small grids: 1F1B's warm-up with W filling gaps (ZB-1p),
    // twice the warm-up with W in every gap (ZB-2p), no cap, and the same with forwards after backwards.
    std::vector<Knobs> base = {
        {false, true, true, 1.0, 1.0, false}, {false, true, true, 0.0, 2.0, false},
        {false, true, true, 1.0, 0.0, false}, {false, false, true, 1.0, 1.0, false},
        {false, false, true, 0.0, 2.0, false}, {false, false, false, 0.0, 0.0, false},
    };
    if (pairs_save) {
      const std::size_t n = base.size();
      for (std::size_t i = 0; i < n; ++i) base.push_back(base[i]), base.back().pairs = true;
    }
    for (std::size_t p = 0; p < choices.size(); ++p) {
      for (const Knobs& k : base) run(p, k);
      if (request_.memory_limit && best[p].schedule) {  // the best so far under a tighter budget
        Knobs tighter = best[p].knobs;
        tighter.memory_share = 0.75;
        run(p, tighter);
      }
    }

    // Refine the best placement's policy one knob at a time while that improves it.
    std::size_t top = choices.size();
    for (std::size_t p = 0; p < choices.size(); ++p)
      if (best[p].schedule && (top == choices.size() || best[p].score < best[top].score)) top = p;
    if (top < choices.size()) {
      for (int budget = request_.refine_evaluations; budget > 0;) {
        bool moved = false;
        for (const Knobs& k : neighbours(best[top].knobs, pairs_save)) {
          if (budget-- <= 0) break;
          if (run(top, k)) {
            moved = true;
            break;
          }
        }
        if (!moved) break;
      }
    }
    for (std::size_t p = 0; p < choices.size(); ++p)
      if (best[p].schedule) consider("auto " + choices[p].name, std::move(*best[p].schedule));
  }

  void exact(const std::vector<PlacementChoice>& choices) {
    for (const PlacementChoice& choice : choices) {
      const int S = choice.placement.num_stages();
      if (3 * S * request_.num_microbatches > request_.exact_max_actions || !can_cut(S)) continue;
      ExactRequest r;
      r.placement = choice.placement;
      r.num_microbatches = request_.num_microbatches;
      r.costs = costs_for(S);
      r.memory_limit = request_.memory_limit ? *request_.memory_limit * S / request_.num_ranks
                                             : std::numeric_limits<double>::infinity();
      r.objective = request_.objective;
      r.node_limit = request_.exact_node_limit;
      const auto it = by_name_.find("auto " + choice.name);
      if (it != by_name_.end()) r.upper_bound = it->second.score;
      std::optional<Schedule> s = exact_schedule(r);
      if (s) consider("exact " + choice.name, std::move(*s));
    }
  }

  void set_minimum(double minimum) { minimum_ = minimum; }

  Plan finish(double minimum_memory) {
    Plan plan;
    plan.minimum_memory = minimum_memory;
    plan.evaluated = evaluated_;
    for (auto& [name, c] : by_name_) plan.candidates.push_back(std::move(c));
    std::stable_sort(plan.candidates.begin(), plan.candidates.end(), better);
    DUALPIPE_REQUIRE(!plan.candidates.empty(), "no schedule of the allowed placements serves R=", request_.num_ranks,
                     " M=", request_.num_microbatches, " within the memory limit");
    plan.best = plan.candidates.front();
    return plan;
  }

 private:
  ListPolicy policy_of(const Knobs& k, int num_stages) const {
    ListPolicy p;
    p.memory_limit = request_.memory_limit
                         ? std::max(*request_.memory_limit * k.memory_share, minimum_) * num_stages / request_.num_ranks
                         : std::numeric_limits<double>::infinity();
    p.forward_may_delay_first_backward = k.delay_first;
    p.backward_first = k.backward_first;
    p.forward_may_delay_backward = k.delay;
    p.w_fill = k.w_fill;
    p.inflight = k.inflight;
    p.overlap_pairs = k.pairs;
    return p;
  }

  const PlanRequest& request_;
  double minimum_ = 0;  // the feasible minimum, in 1/R slice activations
  std::map<int, CostModel> costs_;        // by stage count
  std::map<int, std::vector<int>> cuts_;  // by stage count, with layer costs
  std::map<std::string, PlanCandidate> by_name_;
  int evaluated_ = 0;
};

}  // namespace

std::string placement_kind(const Schedule& schedule) {
  const Placement& p = schedule.placement;
  if (p.num_replicas() == 2) return "two";
  if (schedule.num_stages == schedule.num_ranks) return "linear";
  if (schedule.num_stages == 2 * schedule.num_ranks && p == Placement::v_shape(schedule.num_ranks)) return "v";
  return "looped";
}

double slice_peak(const Schedule& schedule, const Metrics& metrics) {
  return slice_units(schedule, metrics.peak_activations());
}

double objective_value(const Metrics& metrics, PlanObjective objective) {
  if (objective == PlanObjective::Makespan) return metrics.makespan;
  double span = 0;
  for (const RankMetrics& r : metrics.per_rank) span = std::max(span, r.span);
  return span;
}

void set_layer_costs(PlanRequest& request, std::vector<LayerCost> layers) {
  const CostModel d;
  const CostModel& c = request.costs;
  DUALPIPE_REQUIRE(c.forward == d.forward && c.backward == d.backward && c.weight == d.weight &&
                       c.stage_scale.empty() && c.stage_forward.empty() && c.stage_activation.empty(),
                   "layer costs give F, B, W and activation sizes per layer; leave F, B, W, scale and act_scale "
                   "out of --cost (comm, FB, w_mem, recompute and input_mem still apply)");
  double bytes = 0;
  for (const LayerCost& l : layers) bytes += l.activation_bytes;
  request.costs.activation_bytes = bytes / request.num_ranks;  // the unit: a 1/R slice's activation
  request.layers = std::move(layers);
}

Plan plan_schedule(const PlanRequest& request) {
  const int R = request.num_ranks, M = request.num_microbatches;
  DUALPIPE_REQUIRE(R >= 1 && R <= 4096, "plan needs 1 <= R <= 4096 ranks, got R=", R);
  DUALPIPE_REQUIRE(M >= 1 && M <= 100000, "plan needs 1 <= M <= 100000 micro-batches, got M=", M);
  const double estimate = kPlanMemoryPerSchedule * estimate_schedule_bytes("zbv", ScheduleOptions{R, M});
  DUALPIPE_REQUIRE(estimate <= static_cast<double>(request.max_memory_bytes), "plan with R=", R, " ranks and M=", M,
                   " micro-batches needs about ", describe_bytes(estimate), " of memory, above the limit of ",
                   describe_bytes(static_cast<double>(request.max_memory_bytes)), " (raise it with --max-memory)");
  request.costs.check();
  request.costs.check_ranks(R);
  DUALPIPE_REQUIRE(request.costs.stage_scale.empty() || static_cast<int>(request.costs.stage_scale.size()) == R,
                   "cost scale has ", request.costs.stage_scale.size(), " values; plan needs one per 1/R slice of the "
                   "model (", R, " values for R=", R, ")");
  DUALPIPE_REQUIRE(!request.memory_limit || std::isfinite(*request.memory_limit), "the memory limit must be a finite "
                   "number, got ", request.memory_limit.value_or(0));
  for (const std::string& kind : request.placements)
    DUALPIPE_REQUIRE(kind == "linear" || kind == "v" || kind == "two" || kind == "looped", "unknown placement '",
                     kind, "' (linear, v, two, looped)");
  const std::vector<PlacementChoice> choices = placements(request);

  Search search(request);
  // The least memory any of them allows: one micro-batch at a time.
  double minimum = std::numeric_limits<double>::infinity();
  std::vector<PlacementChoice> for_minimum = choices;  // looped alone: as low as a linear cut's
  if (for_minimum.empty()) for_minimum.push_back({"linear", "linear", Placement::linear(R)});
  for (const PlacementChoice& c : for_minimum) {
    if (!search.can_cut(c.placement.num_stages())) continue;
    const Schedule s = one_at_a_time(c.placement, M);
    double peak = 0;
    for (double p : activation_peaks(s, search.costs_for(s.num_stages))) peak = std::max(peak, p);
    minimum = std::min(minimum, slice_units(s, peak));
  }
  search.set_minimum(minimum);
  DUALPIPE_REQUIRE(minimum < std::numeric_limits<double>::infinity(), "the model has ", request.layers.size(),
                   " layers: too few to cut into the stages of any allowed placement (R=", R, ")");
  if (request.memory_limit) {
    DUALPIPE_REQUIRE(*request.memory_limit >= minimum - kEps, "memory limit ", *request.memory_limit,
                     " is below the feasible minimum of ", minimum,
                     " activations of a 1/R slice per rank (one micro-batch at a time) for costs ",
                     request.costs.to_string());
  }

  for (const PlacementChoice& c : choices) search.consider("one-at-a-time " + c.name, one_at_a_time(c.placement, M));
  search.families();
  if (request.automatic) {
    search.automatic(choices);
    search.exact(choices);
  }
  return search.finish(minimum);
}

}  // namespace dualpipe
