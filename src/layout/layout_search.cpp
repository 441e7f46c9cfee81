#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "dualpipe/layout/layout.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/error.h"
#include "layout/layout_candidates.h"
#include "layout/outside_pipeline.h"
#include "layout/pipeline_costs.h"
#include "dualpipe/sim/shared_cores.h"

namespace dualpipe::layout {

namespace {

// What the layout needs of a schedule without costs: the in-flight peak and who holds what. The schedule itself
// is kept only while the cache's budget allows (and always where it cannot be made again: the planner's); the
// others are dropped, so the search does not hold every schedule it met (1.3 GB for DeepSeek-V3's).
struct ScheduleFacts {
  std::string kind;  // the generator's, with its options; empty for a planner's schedule
  ScheduleOptions options;
  mutable std::shared_ptr<const Schedule> kept;
  int peak = 0;                   // stage activations in flight on the worst rank
  bool overlapped_pairs = false;  // it runs forward-backward pairs
  int stages_held_by_rank0 = 1;
  std::vector<std::vector<int>> stages_of_rank;
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
  // Schedules are generated within `max_memory_bytes` each (check_search_size has refused larger ones), and kept
  // for later simulations up to half of it in all: with the one being generated, the search holds at most 1.5
  // times the limit by the generators' estimate, which is above what a generated schedule alone takes.
  explicit ScheduleCache(std::int64_t max_memory_bytes)
      : max_memory_bytes_(max_memory_bytes), keep_left_(static_cast<double>(max_memory_bytes) / 2) {}

  // nullptr when the generator cannot serve the layout's pipeline.
  const ScheduleFacts* get(const Layout& l) {
    const auto key = std::make_tuple(l.schedule, l.pp, l.microbatches, l.vpp);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second.get();
    std::unique_ptr<ScheduleFacts> facts;
    try {
      ScheduleOptions options = schedule_options(l);
      options.max_memory_bytes = max_memory_bytes_;
      facts = facts_of(make_schedule(l.schedule, options));
      facts->kind = l.schedule, facts->options = options;
    } catch (const InvalidArgument&) {
      facts.reset();
    }
    return (cache_[key] = std::move(facts)).get();
  }

  // The schedule of `facts`, generated again where it was not kept.
  std::shared_ptr<const Schedule> schedule(const ScheduleFacts& facts) {
    if (facts.kept) return facts.kept;
    auto schedule = std::make_shared<const Schedule>(make_schedule(facts.kind, facts.options));
    const double bytes = estimate_schedule_bytes(facts.kind, facts.options);
    if (bytes <= keep_left_) keep_left_ -= bytes, facts.kept = schedule;
    return schedule;
  }

 private:
  std::int64_t max_memory_bytes_;
  double keep_left_;
  std::map<std::tuple<std::string, int, int, int>, std::unique_ptr<ScheduleFacts>> cache_;
};

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
    e.facts = planned ? planned : cache.get(l);
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
  shape.sequence_parallel = l.sequence_parallel, shape.flash_attention = l.flash_attention;
  const double layer = layer_activation_bytes(model, model.experts > 0, shape);
  // The loss's fp32 logits of one micro-batch on the last stage (Korthikanti et al.'s 4sbv/t).
  const double logits = 4.0 * l.micro_batch_size * model.seq_len / l.cp * model.vocab / l.tp;
  // Under full recomputation the backward re-runs one layer's forward at a time and holds all of its activations
  // while it runs.
  LayerShape whole = shape;
  whole.recompute = Recompute::None;
  const double working = l.recompute == Recompute::Full ? layer_activation_bytes(model, model.experts > 0, whole) : 0;
  e.activation_bytes = peak * max_layers * layer + logits + working;
  e.slice_activation_bytes = double(model.layers) / l.pp * layer;
  e.logit_bytes = logits;
  return e;
}

// The model states under a zero stage: dense parameters sharded over dp x cp, experts over the ranks that hold
// the same experts (tp x cp x dp / ep).
LayoutMemory memory_of(const PipelineEstimate& e, int zero) {
  const Layout& l = e.layout;
  const ModelStateBytes dense = model_state_bytes(e.dense_params, zero_stage(zero), l.dp * l.cp);
  const ModelStateBytes experts = model_state_bytes(e.expert_params, zero_stage(zero), l.tp * l.cp * l.dp / l.ep);
  LayoutMemory memory{dense.parameters + experts.parameters, dense.gradients + experts.gradients,
                      dense.optimizer + experts.optimizer, e.activation_bytes};
  memory.optimizer_step = memory.optimizer * 4 / 12;  // fp32 gradients of the parameters whose 12 bytes it holds
  return memory;
}

// The pipeline's step as the simulator plays it: its makespan and the busiest rank's busy time (seconds). The
// same for every ZeRO stage, so simulated once per pipeline.
struct PipelineTime {
  double makespan = 0, busy = 0;
};

PipelineTime simulate_pipeline(const ClusterSpec& cluster, const PipelineEstimate& e, ScheduleCache& cache) {
  const PipelineCosts& pc = e.costs;
  const int replicas = cluster.gpus / e.layout.pp;  // the tp x cp x dp ranks holding each pipeline rank's stages
  PipelineTime t;
  if (e.facts && cluster.host_cores > 0) {
    const SharedCoresStep shared =
        simulate_on_shared_cores(*cache.schedule(*e.facts), pc.costs, replicas, cluster.host_cores);
    t.makespan = shared.makespan, t.busy = shared.busiest;
  } else if (e.facts) {
    const Metrics metrics = simulate(*cache.schedule(*e.facts), pc.costs).metrics;
    t.makespan = metrics.makespan;
    for (const RankMetrics& rank : metrics.per_rank) t.busy = std::max(t.busy, rank.busy);
  } else {
    const double slowdown = cluster.host_cores > 0 ? std::max(1.0, double(replicas) / cluster.host_cores) : 1.0;
    t.makespan = t.busy = slowdown * e.layout.microbatches * (pc.costs.forward_of(0) + pc.costs.backward_of(0));
  }
  return t;
}

LayoutResult finish(const ModelSpec& model, const ClusterSpec& cluster, int global_batch, const PipelineEstimate& e,
                    const PipelineTime& pipeline, int zero) {
  LayoutResult r;
  r.layout = e.layout;
  r.layout.zero = zero;
  r.memory = memory_of(e, zero);
  r.memory_limit = cluster.memory_bytes();
  r.fits = r.memory.total() <= r.memory_limit;
  r.parameter_copies = e.copies;
  const PipelineCosts& pc = e.costs;
  const double makespan = pipeline.makespan, busy = pipeline.busy;
  r.peak_stage_activations = e.facts ? e.facts->peak : 1;
  // The busiest rank's busy time split as the stages' sums are.
  const double scale = busy / (pc.compute + pc.recompute + pc.tp + pc.cp + pc.ep);
  LayoutTime& t = r.time;
  t.compute = scale * pc.compute, t.recompute = scale * pc.recompute;
  t.tp = scale * pc.tp, t.cp = scale * pc.cp, t.ep = scale * pc.ep;
  t.tp_hidden = scale * pc.tp_hidden, t.cp_hidden = scale * pc.cp_hidden, t.ep_hidden = scale * pc.ep_hidden;
  t.compute_efficiency = pc.flops / ((pc.compute + pc.recompute) * cluster.peak_tflops * 1e12);
  t.bubble = makespan - busy;
  const double held = double(e.layout.stages()) / e.layout.pp * e.copies;  // stages a rank runs, copies counted
  const DataParallelTime dp = data_parallel_time(cluster, e.layout, zero_stage(zero), e.dense_params,
                                                 e.expert_params, held * pc.costs.forward, held * pc.costs.backward);
  t.dp = dp.exposed, t.dp_hidden = dp.total - dp.exposed;
  t.update = update_seconds(cluster, r.memory.optimizer / 12);  // 12 bytes of optimizer state a parameter
  const double modelled = makespan + t.dp + t.update;
  t.other = (cluster.step_time_factor - 1) * modelled;
  t.step = modelled + t.other;
  const double tokens = double(global_batch) * model.seq_len;
  r.tokens_per_second_per_gpu = tokens / t.step / cluster.gpus;
  r.tflops_per_gpu = r.tokens_per_second_per_gpu * model_flops_per_token(model) / 1e12;
  const double executed = executed_flops_per_token(model, e.layout.recompute, e.layout.flash_attention);
  r.hardware_tflops_per_gpu = r.tokens_per_second_per_gpu * executed / 1e12;
  r.mfu = r.tflops_per_gpu / cluster.peak_tflops;
  r.bubble_fraction = r.time.bubble / r.time.step;
  return r;
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
                                            ScheduleCache& cache, const std::vector<int>& zeros) {
  std::optional<LayoutResult> best;
  const PipelineTime pipeline = simulate_pipeline(request.cluster, e, cache);
  for (const int zero : zeros) {
    LayoutResult r = finish(request.model, request.cluster, request.global_batch, e, pipeline, zero);
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
    const double left = cluster.memory_bytes() - states.states() - linear.logit_bytes;
    PlanRequest plan_request;
    plan_request.num_ranks = base.pp, plan_request.num_microbatches = base.microbatches;
    plan_request.costs = pipeline_costs(model, cluster, base, true).costs;
    plan_request.memory_limit = left / linear.slice_activation_bytes;
    plan_request.max_memory_bytes = request.max_memory_bytes;
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
    std::optional<LayoutResult> best = best_zero_stage(request, e, cache, zeros);
    if (!best || !request.fix.holds(best->layout) || !request.fix.cuts_as_required(model, best->layout))
      continue;  // its vpp is the plan's
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

double executed_flops_per_token(const ModelSpec& model, Recompute recompute, bool flash_attention) {
  const double attention_core = 4.0 * model.layers * model.hidden * model.seq_len;
  const double embeddings = double(model.vocab) * model.hidden * (model.tied_embeddings ? 1 : 2);
  const double layers = 2 * (model.active_parameters() - embeddings) + attention_core;
  double again = 0;
  if (recompute == Recompute::Full) again = layers;
  if (recompute == Recompute::Selective && !flash_attention) again = attention_core;
  return model_flops_per_token(model) + again;
}

LayoutResult evaluate_layout(const ModelSpec& model, const ClusterSpec& cluster, int global_batch,
                             const Layout& layout) {
  model.check();
  cluster.check();
  check_divides(model, cluster, global_batch, layout);
  Layout l = layout;
  l.microbatches = global_batch / (l.dp * l.micro_batch_size);
  l.vpp = l.pp > 1 ? stages_per_rank(l.schedule, l.vpp) : 1;
  ScheduleCache cache(kDefaultMaxScheduleMemory);
  const PipelineEstimate e = estimate(model, cluster, l, cache);
  return finish(model, cluster, global_batch, e, simulate_pipeline(cluster, e, cache), l.zero);
}

LayoutSearch search_layouts(const LayoutRequest& request) {
  const ModelSpec& model = request.model;
  const ClusterSpec& cluster = request.cluster;
  const LayoutFix& fix = request.fix;
  model.check();
  cluster.check();
  DUALPIPE_REQUIRE(request.global_batch >= 1, "--global-batch must be >= 1, got ", request.global_batch);
  DUALPIPE_REQUIRE(request.top >= 1, "--top must be >= 1, got ", request.top);
  DUALPIPE_REQUIRE(request.max_memory_bytes >= 1, "--max-memory must be above 0 bytes, got ",
                   request.max_memory_bytes);
  fix.check_can_hold(model);
  const std::vector<Layout> candidates = candidate_layouts(request);
  const std::string fixed = fix.to_string();
  DUALPIPE_REQUIRE(!candidates.empty(), "no layout of ", model.name, " on ", cluster.name,
                   " divides with global batch ", request.global_batch, fixed.empty() ? "" : " and --fix " + fixed,
                   ": the GPUs must factor into tp x cp x pp x dp and the batch into dp x micro-batch size");
  const SearchSize size = check_search_size(request, candidates);
  const std::vector<int> zeros = fix.zero ? std::vector<int>{*fix.zero} : std::vector<int>{0, 1, 2, 3};

  LayoutSearch search;
  search.schedules = size.schedules, search.schedule_bytes = size.bytes;
  ScheduleCache cache(request.max_memory_bytes);
  std::vector<PipelineEstimate> estimates;
  for (const Layout& l : candidates) {
    try {
      PipelineEstimate e = estimate(model, cluster, l, cache);
      ++search.layouts;
      const bool some_fit = std::any_of(zeros.begin(), zeros.end(), [&](int zero) {
        return memory_of(e, zero).total() <= cluster.memory_bytes();
      });
      if (!some_fit) ++search.over_memory;
      if (some_fit || request.include_unfit) estimates.push_back(std::move(e));
    } catch (const InvalidArgument&) {
      // a schedule that cannot serve these sizes: not a layout
    }
  }
  DUALPIPE_REQUIRE(search.layouts > 0, "no layout of ", model.name, " on ", cluster.name, " divides with global batch ",
                   request.global_batch, fixed.empty() ? "" : " and --fix " + fixed,
                   ": no schedule serves the pipelines whose sizes divide");

  // Cheapest bound first; a pipeline is simulated only while its bound could still make the top.
  std::sort(estimates.begin(), estimates.end(),
            [](const PipelineEstimate& a, const PipelineEstimate& b) { return a.lower_bound < b.lower_bound; });
  std::vector<LayoutResult>& ranked = search.ranked;
  for (const PipelineEstimate& e : estimates) {
    if (int(ranked.size()) >= request.top && ranked.back().fits &&
        e.lower_bound >= ranked.back().time.step)
      break;
    ++search.simulated;
    if (const std::optional<LayoutResult> best = best_zero_stage(request, e, cache, zeros))
      add_ranked(ranked, *best, request.top);
  }
  std::vector<std::unique_ptr<ScheduleFacts>> planned;
  if (request.planner && fix.schedules.empty()) add_planner_schedules(request, zeros, cache, planned, search, 1);
  return search;
}

}  // namespace dualpipe::layout
