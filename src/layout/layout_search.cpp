#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "dualpipe/layout/layout.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/error.h"
#include "layout/pipeline_costs.h"
#include "layout/shared_cores.h"

namespace dualpipe::layout {

namespace {

// The schedule's stages per rank as the layout counts them (vpp): the generator's, or the knob where the caller
// picks it (interleaved 1F1B).
int stages_per_rank(const std::string& kind, int vpp) {
  const GeneratorInfo* generator = find_generator(kind);
  if (!generator) return 1;
  return generator->stages_per_rank == 0 ? vpp : generator->stages_per_rank;
}

// What the layout needs of a schedule without costs: the in-flight peak and who holds what. The schedule itself
// is kept only once a layout is simulated with it (or where it cannot be made again: the planner's); the others
// are dropped, so the search does not hold every schedule it met (1.3 GB for DeepSeek-V3's).
struct ScheduleFacts {
  std::string kind;  // the generator's, with its options; empty for a kept schedule
  ScheduleOptions options;
  mutable std::shared_ptr<const Schedule> kept;
  int peak = 0;                   // stage activations in flight on the worst rank
  bool overlapped_pairs = false;  // it runs forward-backward pairs
  int stages_held_by_rank0 = 1;
  std::vector<std::vector<int>> stages_of_rank;

  const Schedule& schedule() const {
    if (!kept) kept = std::make_shared<const Schedule>(make_schedule(kind, options));
    return *kept;
  }
};

std::unique_ptr<ScheduleFacts> facts_of(const Schedule& schedule) {
  auto facts = std::make_unique<ScheduleFacts>();
  const std::vector<int> peaks = peak_activations(schedule);
  facts->peak = *std::max_element(peaks.begin(), peaks.end());
  for (const auto& actions : schedule.actions)
    for (const Action& a : actions) facts->overlapped_pairs |= a.type == ActionType::Overlapped;
  facts->stages_held_by_rank0 = schedule.placement.stages_held(0);
  facts->stages_of_rank.resize(schedule.num_ranks);
  for (int s = 0; s < schedule.num_stages; ++s)
    for (const int rank : schedule.placement.ranks_holding(s)) facts->stages_of_rank[rank].push_back(s);
  return facts;
}

class ScheduleCache {
 public:
  // nullptr when the generator cannot serve these sizes.
  const ScheduleFacts* get(const std::string& kind, int pp, int microbatches, int vpp) {
    const auto key = std::make_tuple(kind, pp, microbatches, vpp);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second.get();
    std::unique_ptr<ScheduleFacts> facts;
    try {
      ScheduleOptions options;
      options.num_ranks = pp, options.num_microbatches = microbatches;
      const GeneratorInfo* generator = find_generator(kind);
      options.stages_per_rank = generator && generator->stages_per_rank == 0 ? vpp : 0;
      facts = facts_of(make_schedule(kind, options));
      facts->kind = kind, facts->options = options;
    } catch (const InvalidArgument&) {
      facts.reset();
    }
    return (cache_[key] = std::move(facts)).get();
  }

 private:
  std::map<std::tuple<std::string, int, int, int>, std::unique_ptr<ScheduleFacts>> cache_;
};


void check_divides(const ModelSpec& model, const ClusterSpec& cluster, int global_batch, const Layout& l) {
  const auto sizes = [&] {
    return detail::concat("tp=", l.tp, " cp=", l.cp, " pp=", l.pp, " dp=", l.dp, " ep=", l.ep);
  };
  DUALPIPE_REQUIRE(l.tp >= 1 && l.cp >= 1 && l.pp >= 1 && l.dp >= 1 && l.ep >= 1 && l.vpp >= 1 &&
                       l.micro_batch_size >= 1,
                   "every size must be >= 1, got ", sizes(), " vpp=", l.vpp, " mbs=", l.micro_batch_size);
  DUALPIPE_REQUIRE(double(l.tp) * l.cp * l.pp * l.dp == cluster.gpus, sizes(), ": tp x cp x pp x dp must be the ",
                   cluster.gpus, " GPUs of ", cluster.name);
  DUALPIPE_REQUIRE(l.tp <= cluster.gpus_per_node && cluster.gpus_per_node % l.tp == 0, "tp=", l.tp,
                   " must divide the ", cluster.gpus_per_node, " GPUs of a node (tensor parallelism stays in a node)");
  DUALPIPE_REQUIRE(model.heads % l.tp == 0, "tp=", l.tp, " must divide the model's ", model.heads, " heads");
  DUALPIPE_REQUIRE(model.seq_len % l.cp == 0, "cp=", l.cp, " must divide the sequence of ", model.seq_len);
  if (model.experts == 0) {
    DUALPIPE_REQUIRE(l.ep == 1, "ep=", l.ep, ": the model has no experts");
  } else {
    DUALPIPE_REQUIRE(model.experts % l.ep == 0, "ep=", l.ep, " must divide the model's ", model.experts, " experts");
    DUALPIPE_REQUIRE((l.tp * l.cp * l.dp) % l.ep == 0, "ep=", l.ep, " must divide tp x cp x dp = ",
                     l.tp * l.cp * l.dp, " (experts are spread over the ranks of one pipeline stage)");
  }
  DUALPIPE_REQUIRE(global_batch % (l.dp * l.micro_batch_size) == 0, "global batch ", global_batch,
                   " must be a multiple of dp x micro-batch size = ", l.dp, " x ", l.micro_batch_size);
  DUALPIPE_REQUIRE(l.zero >= 0 && l.zero <= 3, "zero=", l.zero, " must be 0, 1, 2 or 3");
  DUALPIPE_REQUIRE((l.pp == 1) == (l.schedule == "none"), "schedule '", l.schedule,
                   "' with pp=", l.pp, ": a pipeline of one stage has schedule none, a longer one needs a schedule");
}

// What a layout costs before its zero stage is chosen: everything but the model states' sharding and the
// data-parallel traffic.
struct PipelineEstimate {
  Layout layout;
  PipelineCosts costs;
  const ScheduleFacts* facts = nullptr;  // null for pp = 1
  double lower_bound = 0;                // seconds: the busiest rank's share of the work, no bubble
  double activation_bytes = 0;
  double dense_params = 0, expert_params = 0;  // on the rank holding the most
  double copies = 1;
  double slice_activation_bytes = 0;  // one micro-batch's activations of a 1/pp slice of the layers
  double logit_bytes = 0;
};

// planned: the schedule, where the planner made it (else the generator's of l.schedule, from the cache).
PipelineEstimate estimate(const ModelSpec& model, const ClusterSpec& cluster, const Layout& l, ScheduleCache& cache,
                          const ScheduleFacts* planned = nullptr) {
  PipelineEstimate e;
  e.layout = l;
  const int stages = l.stages(), m = l.microbatches;
  if (l.pp > 1) {
    e.facts = planned ? planned : cache.get(l.schedule, l.pp, m, l.vpp);
    DUALPIPE_REQUIRE(e.facts, "schedule '", l.schedule, "' cannot run pp=", l.pp, " with ", m,
                     " micro-batches (vpp=", l.vpp, ")");
  }
  e.costs = pipeline_costs(model, cluster, l, e.facts && e.facts->overlapped_pairs);
  const CostModel& c = e.costs.costs;
  double work = 0;
  for (int s = 0; s < stages; ++s) work += c.forward_of(s) + c.backward_of(s);
  if (c.overlapped) work *= *c.overlapped / (c.forward + c.backward);
  e.lower_bound = m * work / l.pp;
  int peak = 1;
  std::vector<std::vector<int>> stages_of_rank{{0}};
  if (e.facts) {
    peak = e.facts->peak;
    stages_of_rank = e.facts->stages_of_rank;
    e.copies = double(e.facts->stages_held_by_rank0) * l.pp / stages;
  }
  int max_layers = 0;
  for (const auto& held : stages_of_rank) {
    double dense = 0, experts = 0;
    for (const int s : held) dense += e.costs.parameters[s].dense, experts += e.costs.parameters[s].experts;
    if (dense + experts > e.dense_params + e.expert_params) e.dense_params = dense, e.expert_params = experts;
  }
  for (const int n : e.costs.layers_per_stage) max_layers = std::max(max_layers, n);
  LayerShape shape;
  shape.micro_batch = l.micro_batch_size, shape.tp = l.tp, shape.cp = l.cp, shape.recompute = l.recompute;
  const double layer = layer_activation_bytes(model, model.experts > 0, shape);
  // The loss's fp32 logits of one micro-batch on the last stage (Korthikanti et al.'s 4sbv/t).
  const double logits = 4.0 * l.micro_batch_size * model.seq_len / l.cp * model.vocab / l.tp;
  e.activation_bytes = peak * max_layers * layer + logits;
  e.slice_activation_bytes = double(model.layers) / l.pp * layer;
  e.logit_bytes = logits;
  return e;
}

// The model states under a zero stage: dense parameters sharded over dp x cp, experts over the ranks that hold
// the same experts (tp x cp x dp / ep).
LayoutMemory memory_of(const PipelineEstimate& e, int zero) {
  const Layout& l = e.layout;
  const ModelStateBytes dense = model_state_bytes(e.dense_params, zero, l.dp * l.cp);
  const ModelStateBytes experts = model_state_bytes(e.expert_params, zero, l.tp * l.cp * l.dp / l.ep);
  return {dense.parameters + experts.parameters, dense.gradients + experts.gradients,
          dense.optimizer + experts.optimizer, e.activation_bytes};
}

// Data-parallel traffic left exposed: ZeRO-0/1 reduce the gradients once, behind the last backward; ZeRO-2
// reduce-scatters every micro-batch's gradients behind its backward; ZeRO-3 also gathers the parameters for every
// forward and backward, behind them.
double exposed_data_parallel(const ClusterSpec& cluster, const PipelineEstimate& e, int zero) {
  const Layout& l = e.layout;
  const int dense_ranks = l.dp * l.cp, expert_ranks = l.tp * l.cp * l.dp / l.ep;
  const auto ring = [](double bytes, int n) { return n > 1 ? bytes * (n - 1) / n : 0.0; };
  const double dense_bw = group_bandwidth(cluster, dense_ranks, l.tp);
  const double expert_bw = group_bandwidth(cluster, expert_ranks, l.ep);
  const auto pass = [&](double bytes_per_param) {  // one ring pass over this rank's parameters
    return ring(bytes_per_param * e.dense_params, dense_ranks) / dense_bw +
           ring(bytes_per_param * e.expert_params, expert_ranks) / expert_bw;
  };
  const CostModel& c = e.costs.costs;
  const double stages_per_rank = double(l.stages()) / l.pp * e.copies;
  const double backward = (c.backward) * stages_per_rank, forward = c.forward * stages_per_rank;
  const int m = l.microbatches;
  if (zero <= 1) return std::max(0.0, 2 * pass(2) - backward);
  if (zero == 2) return m * std::max(0.0, pass(2) - backward) + pass(2);
  return m * std::max(0.0, 3 * pass(2) - forward - backward);
}

LayoutResult finish(const ModelSpec& model, const ClusterSpec& cluster, int global_batch, const PipelineEstimate& e,
                    int zero) {
  LayoutResult r;
  r.layout = e.layout;
  r.layout.zero = zero;
  r.memory = memory_of(e, zero);
  r.memory_limit = cluster.memory_bytes();
  r.fits = r.memory.total() <= r.memory_limit;
  r.parameter_copies = e.copies;
  const PipelineCosts& pc = e.costs;
  const int m = e.layout.microbatches;
  double makespan = 0, busy = 0;
  const int replicas = cluster.gpus / e.layout.pp;  // the tp x cp x dp ranks holding each pipeline rank's stages
  if (e.facts && cluster.host_cores > 0) {
    const SharedCoresStep shared = simulate_on_shared_cores(e.facts->schedule(), pc.costs, replicas, cluster.host_cores);
    makespan = shared.makespan, busy = shared.busiest;
  } else if (e.facts) {
    const Metrics metrics = simulate(e.facts->schedule(), pc.costs).metrics;
    makespan = metrics.makespan;
    for (const RankMetrics& rank : metrics.per_rank) busy = std::max(busy, rank.busy);
  } else {
    const double slowdown = cluster.host_cores > 0 ? std::max(1.0, double(replicas) / cluster.host_cores) : 1.0;
    makespan = busy = slowdown * m * (pc.costs.forward_of(0) + pc.costs.backward_of(0));
  }
  r.peak_stage_activations = e.facts ? e.facts->peak : 1;
  // The busiest rank's busy time split as the stages' sums are.
  const double parts = pc.compute + pc.tp + pc.cp + pc.ep;
  r.time.compute = busy * pc.compute / parts;
  r.time.tp = busy * pc.tp / parts, r.time.cp = busy * pc.cp / parts, r.time.ep = busy * pc.ep / parts;
  r.time.bubble = makespan - busy;
  r.time.dp = exposed_data_parallel(cluster, e, zero);
  // A rank updates the parameters whose optimizer state it holds (12 bytes each; ZeRO shards them), slowed like
  // the compute where the ranks share cores.
  const double updated = r.memory.optimizer / 12;
  r.time.update = updated * cluster.update_ns_per_parameter * 1e-9 *
                  (cluster.host_cores > 0 ? std::max(1.0, double(cluster.gpus) / cluster.host_cores) : 1.0);
  const double modelled = makespan + r.time.dp + r.time.update;
  r.time.other = (cluster.step_time_factor - 1) * modelled;
  r.time.step = modelled + r.time.other;
  const double tokens = double(global_batch) * model.seq_len;
  r.tokens_per_second_per_gpu = tokens / r.time.step / cluster.gpus;
  r.tflops_per_gpu = r.tokens_per_second_per_gpu * model_flops_per_token(model) / 1e12;
  r.mfu = r.tflops_per_gpu / cluster.peak_tflops;
  r.bubble_fraction = r.time.bubble / r.time.step;
  return r;
}

// (Counted in long long: doubling past 2^30 would overflow an int to 0, and n % 0 is a crash.)
std::vector<int> powers_of_two_dividing(int n, int cap) {
  std::vector<int> out;
  for (long long v = 1; v <= cap && v <= n; v *= 2)
    if (n % v == 0) out.push_back(int(v));
  return out;
}

std::vector<int> divisors(int n, int cap) {
  std::vector<int> out;
  for (long long v = 1; v <= cap && v <= n; ++v)
    if (n % v == 0) out.push_back(int(v));
  return out;
}

template <typename T>
std::vector<T> held_to(const std::optional<T>& fixed, std::vector<T> choices) {
  if (fixed) return {*fixed};
  return choices;
}

// Faster first; among equals, the simpler layout (fewer ranks in context, pipeline and tensor groups, smaller
// micro-batches), then the one needing less memory.
bool better(const LayoutResult& a, const LayoutResult& b) {
  if (a.fits != b.fits) return a.fits;
  if (a.tokens_per_second_per_gpu != b.tokens_per_second_per_gpu)
    return a.tokens_per_second_per_gpu > b.tokens_per_second_per_gpu;
  const Layout &x = a.layout, &y = b.layout;
  const auto simplicity = [](const Layout& l) { return std::make_tuple(l.cp, l.pp * l.vpp, l.tp, l.micro_batch_size); };
  if (simplicity(x) != simplicity(y)) return simplicity(x) < simplicity(y);
  return a.memory.total() < b.memory.total();
}

// One row per pipeline: its best ZeRO stage (the fastest that fits, the least memory among equals).
std::optional<LayoutResult> best_zero_stage(const LayoutRequest& request, const PipelineEstimate& e,
                                            const std::vector<int>& zeros) {
  std::optional<LayoutResult> best;
  for (const int zero : zeros) {
    LayoutResult r = finish(request.model, request.cluster, request.global_batch, e, zero);
    if ((r.fits || request.include_unfit) && (!best || better(r, *best))) best = r;
  }
  return best;
}

// Inserts a row in rank order, keeping the best request.top.
void add_ranked(std::vector<LayoutResult>& ranked, const LayoutResult& row, int top) {
  ranked.insert(std::upper_bound(ranked.begin(), ranked.end(), row, better), row);
  if (int(ranked.size()) > top) ranked.pop_back();
}

// The schedule planner's own schedule (automatic, on linear and V placements: one copy of the parameters) for the
// pipelines of the best rows, within the memory their model states leave; a row of its own where it is not one
// of the hand-made families. At most `pipelines` distinct pipelines are planned, best first.
void add_planner_schedules(const LayoutRequest& request, const std::vector<int>& zeros, ScheduleCache& cache,
                           std::vector<std::unique_ptr<ScheduleFacts>>& planned, LayoutSearch& search,
                           int pipelines) {
  const ModelSpec& model = request.model;
  const ClusterSpec& cluster = request.cluster;
  std::vector<Layout> done;
  const std::vector<LayoutResult> rows = search.ranked;
  for (const LayoutResult& row : rows) {
    Layout base = row.layout;
    if (base.pp < 2 || int(done.size()) >= pipelines) continue;
    base.schedule = "1f1b", base.vpp = 1;
    const auto same = [&](const Layout& l) {
      return std::tie(l.tp, l.cp, l.pp, l.dp, l.ep, l.micro_batch_size, l.recompute) ==
             std::tie(base.tp, base.cp, base.pp, base.dp, base.ep, base.micro_batch_size, base.recompute);
    };
    if (std::any_of(done.begin(), done.end(), same)) continue;
    done.push_back(base);
    PipelineEstimate linear;
    try {
      linear = estimate(model, cluster, base, cache);
    } catch (const InvalidArgument&) {
      continue;
    }
    // What one copy of the model states leaves for activations, in 1/pp slices of one micro-batch.
    const LayoutMemory states = memory_of(linear, row.layout.zero);
    const double left = cluster.memory_bytes() - (states.total() - states.activations) - linear.logit_bytes;
    PlanRequest plan_request;
    plan_request.num_ranks = base.pp, plan_request.num_microbatches = base.microbatches;
    plan_request.costs = pipeline_costs(model, cluster, base, true).costs;
    plan_request.memory_limit = left / linear.slice_activation_bytes;
    plan_request.placements = {"linear"};
    if (2 * base.pp <= model.layers) plan_request.placements.push_back("v");  // a V needs two layers per rank
    Plan plan;
    try {
      plan = plan_schedule(plan_request);
    } catch (const InvalidArgument&) {
      continue;  // not even a micro-batch at a time fits
    }
    if (plan.best.name.rfind("auto", 0) != 0 && plan.best.name.rfind("exact", 0) != 0) continue;  // a family's
    Layout l = base;
    l.schedule = "planned " + plan.best.name;
    l.vpp = plan.best.schedule.num_stages / base.pp;
    planned.push_back(facts_of(plan.best.schedule));
    planned.back()->kept = std::make_shared<const Schedule>(plan.best.schedule);
    PipelineEstimate e;
    try {
      e = estimate(model, cluster, l, cache, planned.back().get());
    } catch (const InvalidArgument&) {
      continue;
    }
    ++search.simulated;
    std::optional<LayoutResult> best = best_zero_stage(request, e, zeros);
    if (!best || !request.fix.holds(best->layout)) continue;  // its vpp is the plan's
    best->plan_command = "dualpipe plan --ranks " + std::to_string(base.pp) + " --microbatches " +
                         std::to_string(base.microbatches) + " --cost " + plan_request.costs.to_string() +
                         " --memory-limit " + detail::concat(*plan_request.memory_limit) +
                         " --placements " + (plan_request.placements.size() == 2 ? "linear,v" : "linear") +
                         " --format text -o plan.txt";
    add_ranked(search.ranked, *best, request.top);
  }
}

}  // namespace

double model_flops_per_token(const ModelSpec& model) {
  const double input_embedding = model.tied_embeddings ? 0 : double(model.vocab) * model.hidden;
  return 6 * (model.active_parameters() - input_embedding) + 12.0 * model.layers * model.hidden * model.seq_len;
}

LayoutResult evaluate_layout(const ModelSpec& model, const ClusterSpec& cluster, int global_batch,
                             const Layout& layout) {
  model.check();
  cluster.check();
  check_divides(model, cluster, global_batch, layout);
  Layout l = layout;
  l.microbatches = global_batch / (l.dp * l.micro_batch_size);
  l.vpp = l.pp > 1 ? stages_per_rank(l.schedule, l.vpp) : 1;
  ScheduleCache cache;
  return finish(model, cluster, global_batch, estimate(model, cluster, l, cache), l.zero);
}

LayoutSearch search_layouts(const LayoutRequest& request) {
  const ModelSpec& model = request.model;
  const ClusterSpec& cluster = request.cluster;
  const LayoutFix& fix = request.fix;
  model.check();
  cluster.check();
  DUALPIPE_REQUIRE(request.global_batch >= 1, "--global-batch must be >= 1, got ", request.global_batch);
  DUALPIPE_REQUIRE(request.top >= 1, "--top must be >= 1, got ", request.top);
  fix.check_can_hold(model);

  std::vector<std::pair<std::string, int>> schedules;  // (kind, vpp) for pp > 1
  for (const GeneratorInfo& g : generators()) {
    const std::string kind(g.name);
    if (fix.schedule && *fix.schedule != kind) continue;
    if (g.stages_per_rank == 0) {  // the caller picks: 2 and 4 stages per rank
      for (const int v : held_to(fix.vpp, {2, 4})) schedules.emplace_back(kind, v);
    } else if (!fix.vpp || *fix.vpp == g.stages_per_rank) {
      schedules.emplace_back(kind, g.stages_per_rank);
    }
  }
  const std::vector<Recompute> recomputes =
      held_to(fix.recompute, {Recompute::None, Recompute::Selective, Recompute::Full});
  const std::vector<int> zeros = held_to(fix.zero, {0, 1, 2, 3});

  LayoutSearch search;
  ScheduleCache cache;
  std::vector<PipelineEstimate> estimates;
  for (const int tp : held_to(fix.tp, powers_of_two_dividing(cluster.gpus_per_node, cluster.gpus_per_node)))
    for (const int cp : held_to(fix.cp, powers_of_two_dividing(model.seq_len, 16)))
      for (const int pp : held_to(fix.pp, divisors(cluster.gpus, model.layers))) {
        if (cluster.gpus % (tp * cp * pp) != 0) continue;
        const int dp = cluster.gpus / (tp * cp * pp);
        if (fix.dp && *fix.dp != dp) continue;
        const std::vector<int> eps =
            model.experts > 0 ? held_to(fix.ep, powers_of_two_dividing(model.experts, model.experts)) : std::vector<int>{1};
        for (const int ep : eps)
          for (const int mbs : held_to(fix.mbs, {1, 2, 4, 8}))
            for (const Recompute recompute : recomputes)
              for (const auto& [kind, vpp] : pp > 1 ? schedules : std::vector<std::pair<std::string, int>>{{"none", 1}}) {
                Layout l;
                l.tp = tp, l.cp = cp, l.pp = pp, l.dp = dp, l.ep = ep, l.micro_batch_size = mbs;
                l.recompute = recompute, l.schedule = kind, l.vpp = vpp, l.zero = zeros.front();
                if (!fix.holds(l)) continue;  // pp=1 ("none", vpp 1) against a fixed schedule or vpp
                try {
                  check_divides(model, cluster, request.global_batch, l);
                  l.microbatches = request.global_batch / (dp * mbs);
                  PipelineEstimate e = estimate(model, cluster, l, cache);
                  ++search.layouts;
                  const bool some_fit = std::any_of(zeros.begin(), zeros.end(), [&](int zero) {
                    return memory_of(e, zero).total() <= cluster.memory_bytes();
                  });
                  if (!some_fit) ++search.over_memory;
                  if (some_fit || request.include_unfit) estimates.push_back(std::move(e));
                } catch (const InvalidArgument&) {
                  // sizes that do not divide, or a schedule that cannot serve them: not a layout
                }
              }
      }
  const std::string fixed = fix.to_string();
  DUALPIPE_REQUIRE(search.layouts > 0, "no layout of ", model.name, " on ", cluster.name, " divides with global batch ",
                   request.global_batch, fixed.empty() ? "" : " and --fix " + fixed,
                   ": the GPUs must factor into tp x cp x pp x dp and the batch into dp x micro-batch size");

  // Cheapest bound first; a pipeline is simulated only while its bound could still make the top.
  std::sort(estimates.begin(), estimates.end(),
            [](const PipelineEstimate& a, const PipelineEstimate& b) { return a.lower_bound < b.lower_bound; });
  std::vector<LayoutResult>& ranked = search.ranked;
  for (const PipelineEstimate& e : estimates) {
    if (int(ranked.size()) >= request.top && ranked.back().fits &&
        e.lower_bound >= ranked.back().time.step)
      break;
    ++search.simulated;
    if (const std::optional<LayoutResult> best = best_zero_stage(request, e, zeros))
      add_ranked(ranked, *best, request.top);
  }
  std::vector<std::unique_ptr<ScheduleFacts>> planned;
  if (request.planner && !fix.schedule) add_planner_schedules(request, zeros, cache, planned, search, 1);
  return search;
}

}  // namespace dualpipe::layout
