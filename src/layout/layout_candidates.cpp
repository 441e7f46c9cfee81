#include "layout/layout_candidates.h"

#include <map>
#include <tuple>
#include <utility>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"

namespace dualpipe::layout {

namespace {

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

// (kind, vpp) of every schedule a pipeline of two ranks or more may run, held to the fixed schedule and vpp.
std::vector<std::pair<std::string, int>> pipeline_schedules(const LayoutFix& fix) {
  std::vector<std::pair<std::string, int>> schedules;
  for (const GeneratorInfo& g : generators()) {
    const std::string kind(g.name);
    if (!fix.allows_schedule(kind)) continue;
    if (g.stages_per_rank == 0) {  // the caller picks: 2 and 4 stages per rank
      for (const int v : held_to(fix.vpp, {2, 4})) schedules.emplace_back(kind, v);
    } else if (!fix.vpp || *fix.vpp == g.stages_per_rank) {
      schedules.emplace_back(kind, g.stages_per_rank);
    }
  }
  return schedules;
}

// Megatron-Core runs combined 1F1B only where it has an all-to-all to hide and layers to interleave: its
// TransformerConfig asserts expert_model_parallel_size > 1 and refuses full recomputation with
// overlap_moe_expert_parallel_comm.
bool combined_1f1b_serves(const Layout& l) {
  return l.schedule != "combined-1f1b" || (l.ep > 1 && l.recompute != Recompute::Full);
}

}  // namespace

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
  parallel::check(l, model.experts, parallel::DimsSpelling::Fix);
  DUALPIPE_REQUIRE(global_batch % (l.dp * l.micro_batch_size) == 0, "global batch ", global_batch,
                   " must be a multiple of dp x micro-batch size = ", l.dp, " x ", l.micro_batch_size);
  DUALPIPE_REQUIRE(l.zero >= 0 && l.zero <= 3, "zero=", l.zero, " must be 0, 1, 2 or 3");
  DUALPIPE_REQUIRE((l.pp == 1) == (l.schedule == "none"), "schedule '", l.schedule,
                   "' with pp=", l.pp, ": a pipeline of one stage has schedule none, a longer one needs a schedule");
}

int stages_per_rank(const std::string& kind, int vpp) {
  const GeneratorInfo* generator = find_generator(kind);
  if (!generator) return 1;
  return generator->stages_per_rank == 0 ? vpp : generator->stages_per_rank;
}

ScheduleOptions schedule_options(const Layout& l) {
  ScheduleOptions options;
  options.num_ranks = l.pp, options.num_microbatches = l.microbatches;
  const GeneratorInfo* generator = find_generator(l.schedule);
  options.stages_per_rank = generator && generator->stages_per_rank == 0 ? l.vpp : 0;
  return options;
}

std::vector<Layout> candidate_layouts(const LayoutRequest& request) {
  const ModelSpec& model = request.model;
  const ClusterSpec& cluster = request.cluster;
  const LayoutFix& fix = request.fix;
  const std::vector<std::pair<std::string, int>> schedules = pipeline_schedules(fix);
  const std::vector<std::pair<std::string, int>> no_pipeline = {{"none", 1}};
  const std::vector<Recompute> recomputes =
      held_to(fix.recompute, {Recompute::None, Recompute::Selective, Recompute::Full});
  const int first_zero = fix.zero.value_or(0);

  std::vector<Layout> candidates;
  for (const int tp : held_to(fix.tp, powers_of_two_dividing(cluster.gpus_per_node, cluster.gpus_per_node)))
    for (const int cp : held_to(fix.cp, powers_of_two_dividing(model.seq_len, 16)))
      for (const int pp : held_to(fix.pp, divisors(cluster.gpus, model.layers))) {
        if (cluster.gpus % (tp * cp * pp) != 0) continue;
        const int dp = cluster.gpus / (tp * cp * pp);
        if (fix.dp && *fix.dp != dp) continue;
        const std::vector<int> eps = model.experts > 0
                                         ? held_to(fix.ep, powers_of_two_dividing(model.experts, model.experts))
                                         : std::vector<int>{1};
        for (const int ep : eps)
          for (const int mbs : held_to(fix.mbs, {1, 2, 4, 8}))
            for (const Recompute recompute : recomputes)
              for (const auto& [kind, vpp] : pp > 1 ? schedules : no_pipeline) {
                Layout l;
                l.tp = tp, l.cp = cp, l.pp = pp, l.dp = dp, l.ep = ep, l.micro_batch_size = mbs;
                l.recompute = recompute, l.schedule = kind, l.vpp = vpp, l.zero = first_zero;
                fix.apply(l);
                // With FlashAttention the scores are never kept: selective recomputation is no recomputation.
                if (l.flash_attention && recompute == Recompute::Selective && !fix.recompute) continue;
                // pp=1 ("none", vpp 1) against a fixed schedule or vpp; an uneven cut under even_stages
                if (!fix.holds(l) || !fix.cuts_as_required(model, l)) continue;
                if (!combined_1f1b_serves(l)) continue;
                try {
                  check_divides(model, cluster, request.global_batch, l);
                } catch (const InvalidArgument&) {
                  continue;  // sizes that do not divide: not a layout
                }
                l.microbatches = request.global_batch / (dp * mbs);
                candidates.push_back(std::move(l));
              }
      }
  return candidates;
}

SearchSize check_search_size(const LayoutRequest& request, const std::vector<Layout>& candidates) {
  std::map<std::tuple<std::string, int, int, int>, double> needed;  // (kind, pp, micro-batches, vpp) -> bytes
  const Layout* largest = nullptr;
  double largest_bytes = 0, total_bytes = 0;
  for (const Layout& l : candidates) {
    if (l.pp < 2) continue;
    const auto [it, added] = needed.try_emplace(std::make_tuple(l.schedule, l.pp, l.microbatches, l.vpp), 0.0);
    if (!added) continue;
    it->second = estimate_schedule_bytes(l.schedule, schedule_options(l));
    total_bytes += it->second;
    if (it->second > largest_bytes) largest_bytes = it->second, largest = &l;
  }
  const double limit = static_cast<double>(request.max_memory_bytes);
  const std::string what = detail::concat("layout of ", request.model.name, " on ", request.cluster.name,
                                          " with global batch ", request.global_batch);
  const char* remedy = "lower --global-batch, hold the larger dp or mbs with --fix, or raise --max-memory";
  if (largest_bytes > limit)  // then some schedule needed more than nothing: `largest` is set
    throw InvalidArgument(detail::concat(what, ": its layout pp=", largest->pp, " dp=", largest->dp, " mbs=",
                                         largest->micro_batch_size, " needs ", largest->schedule, " with ",
                                         largest->microbatches, " micro-batches, about ", describe_bytes(largest_bytes),
                                         " of memory, above the limit of ", describe_bytes(limit), " (", remedy, ")"));
  DUALPIPE_REQUIRE(total_bytes <= kSearchBytesPerLimit * limit, what, " would generate ", needed.size(),
                   " schedules of about ", describe_bytes(total_bytes), " in all, above the ",
                   describe_bytes(kSearchBytesPerLimit * limit), " a search may generate (", kSearchBytesPerLimit,
                   " x the memory limit of ", describe_bytes(limit), "; ", remedy, ")");
  return {static_cast<long long>(needed.size()), total_bytes};
}

}  // namespace dualpipe::layout
