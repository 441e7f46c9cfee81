#include "dualpipe/sim/kineto_plan.h"

#include <algorithm>
#include <limits>

#include "kineto_shared_cores.h"
#include "median_steps.h"
#include "schedule_waits.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/action_spread.h"
#include "dualpipe/sim/shared_cores.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/number_format.h"
#include "dualpipe/util/printable.h"

namespace dualpipe {

namespace {

// Simulations of a traced run, each with its actions' times drawn from the traces' spread. The median step of 201
// moved by under a point from one seed to another over 40 traced runs (of 51: by up to 3 points).
constexpr int kDraws = 201;

// The schedule the ranks' traces name, the same in every one that names it.
std::optional<Schedule> schedule_of(const KinetoRanks& ranks) {
  const KinetoRankSummary* named = nullptr;
  for (const KinetoRankSummary& r : ranks.ranks) {
    if (r.schedule.empty()) continue;
    if (!named) named = &r;
    DUALPIPE_REQUIRE(r.schedule == named->schedule, "profiler traces '", named->source, "' and '", r.source,
                     "' name different schedules (dualpipe.schedule): they are not one run");
  }
  if (!named) return std::nullopt;
  for (const KinetoRankSummary& r : ranks.ranks)
    DUALPIPE_REQUIRE(!r.schedule.empty(), "profiler trace '", named->source, "' names the schedule its run ran "
                     "(dualpipe.schedule) but '", r.source, "' names none: they are not one run");
  try {
    Schedule schedule = parse_text(named->schedule);
    validate(schedule);
    if (!named->schedule_kind.empty()) schedule.kind = named->schedule_kind;
    return schedule;
  } catch (const Error& e) {
    throw InvalidArgument(detail::concat("profiler trace '", named->source, "': its dualpipe.schedule is not a valid "
                                         "schedule: ", e.what()));
  }
}

// Where the traces name the schedule that ran, the host's time between actions is read where no input was awaited,
// and, without message regions (the runtime's direct links send outside any operator), a message's time from the
// waits for one: gap and comm.
void read_schedule_waits(KinetoCosts& costs, const Schedule& schedule, const KinetoRanks& ranks,
                         const std::optional<SharedHost>& shared) {
  std::vector<const KinetoSummary*> traces;
  std::vector<double> offsets;
  for (const KinetoRankSummary& r : ranks.ranks) traces.push_back(&r.summary), offsets.push_back(r.clock_offset);
  // On shared cores, a rank whose message came while every core ran another rank's action waited for a core, which
  // the simulation makes by sharing them: only the part of the wait with a core free is the message's.
  WaitPart message_part;
  if (shared)
    message_part = [&](double start, double end) {
      return time_with_a_free_core(shared->working, start, end, shared->cores);
    };
  const ScheduleWaits waits = schedule_waits(schedule, traces, offsets, message_part);
  const auto source = [&](const char* cost) {
    auto it = std::find_if(costs.sources.begin(), costs.sources.end(),
                           [&](const KinetoCostSource& s) { return s.cost == cost; });
    return it == costs.sources.end() ? nullptr : &*it;
  };
  const std::size_t replicas = ranks.ranks.size() / static_cast<std::size_t>(schedule.num_ranks);
  const std::string steps =
      detail::concat(" in ", waits.steps, waits.steps == 1 ? " step" : " steps",
                     replicas > 1 ? detail::concat(" of ", replicas, " replicas' pipelines") : std::string(), ")");
  if (waits.gap) {
    costs.costs.gap = waits.gap->value;
    KinetoCostSource read{"gap", waits.gap->value,
                          detail::concat("mean time from a rank's action's end to its next one's start where that "
                                         "one's inputs were there (", waits.gap->count, " gaps", steps),
                          {}, waits.gap->count};
    if (KinetoCostSource* lower_quartile = source("gap")) *lower_quartile = read;
    else costs.sources.push_back(read);
  }
  if (waits.message && !source("comm")) {
    costs.costs.comm = waits.message->value;
    costs.sources.push_back({"comm", waits.message->value,
                             detail::concat("mean wait from an input's producer's end to its consumer's start on "
                                            "another rank, where the consumer was idle",
                                            shared ? ", while a core was free" : "", " (", waits.message->count,
                                            " waits", steps),
                             {}, waits.message->count});
  }
}

// With data-parallel replicas, the traced schedule (dualpipe.schedule) holds the pipeline's actions only: the
// replicas' collectives that ran while none of a rank's work regions was open (the reductions waited for after the
// last backward, ZeRO-3's gathers before the first forward) are in no action. Each trace's time in them a step, and
// which they were.
struct CollectivesOutside {
  std::vector<double> per_step;  // by trace, microseconds
  std::vector<std::string> names;
};

CollectivesOutside collectives_outside(const KinetoRanks& ranks,
                                       const std::function<bool(const std::string&)>& is_work) {
  CollectivesOutside out;
  for (const KinetoRankSummary& r : ranks.ranks) {
    std::vector<ActionTime> work;
    int steps = 0;
    for (const KinetoRegion& region : r.summary.regions) {
      if (region.name == "ProfilerStep") steps = region.count;
      if (!is_work(region.name)) continue;
      for (std::size_t i = 0; i < region.starts.size(); ++i)
        work.push_back({region.starts[i], region.starts[i] + region.durations[i]});
    }
    double outside = 0;
    for (const CollectiveSpan& c : r.collectives) {
      const auto overlaps = [&](const ActionTime& w) { return c.start < w.end && w.start < c.end; };
      if (std::any_of(work.begin(), work.end(), overlaps)) continue;
      outside += c.end - c.start;
      if (std::find(out.names.begin(), out.names.end(), c.name) == out.names.end()) out.names.push_back(c.name);
    }
    out.per_step.push_back(outside / std::max(1, steps));
  }
  return out;
}

// The note that says so: the most a step on any rank; nothing where there were none.
std::optional<std::string> collectives_note(const CollectivesOutside& outside, const KinetoRanks& ranks) {
  const auto most = std::max_element(outside.per_step.begin(), outside.per_step.end());
  if (most == outside.per_step.end() || *most <= 0) return std::nullopt;
  std::string names;
  for (const std::string& n : outside.names) names += (names.empty() ? "" : ", ") + printable_line(n);
  return detail::concat("data-parallel collectives ran outside the traced actions and update (", names, "): up to ",
                        formatted("%.3f", *most / 1e3), " ms a step, on rank ",
                        ranks.ranks[most - outside.per_step.begin()].rank, "; the traced schedule holds the "
                        "pipeline's actions only, so the plan adds each rank's to its update");
}

// Each pipeline rank's own update after its last action (the last stage's, with the output layer, is the largest),
// from each trace's (`traces`); with data-parallel replicas (several traces a rank, replica d's rank r the trace
// d * R + r, as the trainer numbers them) the least of its replicas', that of one that waited in it for no other.
// Traces not one per rank of each replica: `least`, for every rank.
std::vector<double> pipeline_rank_updates(const std::vector<double>& traces, double least, int ranks, int replicas) {
  if (static_cast<int>(traces.size()) != ranks * replicas) return std::vector<double>(ranks, least);
  std::vector<double> updates(traces.begin(), traces.begin() + ranks);
  for (int r = 0; r < ranks; ++r)
    for (int d = 1; d < replicas; ++d) updates[r] = std::min(updates[r], traces[d * ranks + r]);
  return updates;
}

// kineto_run_costs from the steps that make the median, which also gives the schedule the traces name (read once: a
// large one takes a while) and, with `spread`, the spread of the actions' times (of their times alone on shared
// cores).
KinetoCosts run_costs(const MedianSteps& middle, const KinetoCostNames& names, std::optional<SharedCores>* shared_cores,
                      std::optional<Schedule>& schedule, std::vector<double>* spread = nullptr) {
  const KinetoRanks& ranks = middle.ranks;
  bool several_hosts = false;
  const std::optional<SharedHost> shared = shared_host(ranks, work_regions(names), &several_hosts);
  std::vector<const KinetoSummary*> measured, summaries;
  for (std::size_t i = 0; i < ranks.ranks.size(); ++i) {
    measured.push_back(&ranks.ranks[i].summary);
    summaries.push_back(shared ? &shared->alone[i] : measured.back());
  }
  KinetoCosts costs = costs_from_kineto(summaries, names, &measured);
  costs.steps_read = middle.steps;
  costs.steps_traced = middle.traced;
  if (spread) *spread = action_spread(summaries, compute_regions(names));
  if (shared) {
    if (shared_cores) *shared_cores = SharedCores{shared->host, shared->cores, shared->ranks, shared->mean_slowdown};
    costs.warnings.push_back(detail::concat(
        shared->ranks, " ranks shared the ", shared->cores, " cores of host ", shared->host, ": each action's time "
        "is read as if it ran alone, its duration over how much the others computing at once slowed it (x",
        formatted("%.2f", shared->mean_slowdown), " on the whole)"));
  }
  if (several_hosts)
    costs.warnings.push_back("the ranks ran on several hosts: any slowdown from sharing their cores is in the "
                             "costs, not modelled");
  schedule = schedule_of(ranks);
  if (schedule) read_schedule_waits(costs, *schedule, ranks, shared);
  return costs;
}

}  // namespace

KinetoCosts kineto_run_costs(const KinetoRanks& ranks, const KinetoCostNames& names,
                             std::optional<SharedCores>* shared_cores) {
  std::optional<Schedule> schedule;
  return run_costs(median_steps(ranks), names, shared_cores, schedule);
}

KinetoRun read_kineto_run(const KinetoRanks& ranks, const KinetoCostNames& names, int ranks_given) {
  KinetoRun run;
  std::vector<double> spread;
  const MedianSteps middle = median_steps(ranks);
  run.costs = run_costs(middle, names, &run.shared_cores, run.schedule, &spread);
  run.slowest_rank = ranks.ranks[ranks.slowest].rank;
  run.measured_step = ranks.ranks[ranks.slowest].step;
  if (!run.schedule) {
    if (ranks_given > 0 && run.costs.stages > 0) {
      DUALPIPE_REQUIRE(run.costs.stages >= ranks_given, "the profiler traces' regions name ", run.costs.stages,
                       " stages, fewer than the ", ranks_given, " ranks to plan for: a slice of the model per rank "
                       "needs at least one stage");
      run.costs.costs = costs_per_slice(run.costs.costs, ranks_given, run.costs.stages);
    }
    return run;
  }
  const Schedule& s = *run.schedule;
  const int traces = static_cast<int>(ranks.ranks.size());
  DUALPIPE_REQUIRE(traces % s.num_ranks == 0, "the schedule the profiler traces ran (dualpipe.schedule) has ",
                   s.num_ranks, " ranks, but ", traces, " trace", traces == 1 ? " was" : "s were", " given: give "
                   "one trace per rank of the run (", s.num_ranks, ", or a multiple of it with data parallelism)");
  const int stages = run.costs.stages;
  DUALPIPE_REQUIRE(stages == 0 || stages == s.num_stages, "the profiler traces' regions name stages 0 to ",
                   stages - 1, " but the schedule they ran (dualpipe.schedule) has ", s.num_stages);
  // Data-parallel replicas run the same schedule in step, on the same cores; a device (or core) per rank shares none.
  const int replicas = traces / s.num_ranks;
  std::vector<double> trace_updates = run.costs.rank_updates;
  if (replicas > 1) {
    const CollectivesOutside outside = collectives_outside(middle.ranks, work_regions(names));
    if (std::optional<std::string> note = collectives_note(outside, middle.ranks)) run.costs.warnings.push_back(*note);
    if (trace_updates.empty()) trace_updates.assign(outside.per_step.size(), 0);
    for (std::size_t t = 0; t < outside.per_step.size() && t < trace_updates.size(); ++t)
      trace_updates[t] += outside.per_step[t];
  }
  const std::vector<double> updates = pipeline_rank_updates(trace_updates, run.costs.update, s.num_ranks, replicas);
  const CostModel& per_stage = run.costs.costs;
  const int cores = run.shared_cores ? run.shared_cores->cores : std::numeric_limits<int>::max();
  run.simulated_draws = spread.empty() ? 1 : kDraws;
  const SharedCoresStep step = median_of_draws(s, per_stage, replicas, cores, updates, spread, run.simulated_draws);
  run.simulated_pipeline = step.makespan;
  run.simulated_step = step.step;
  if (run.shared_cores) run.shared_cores->simulated_slowdown = step.mean_slowdown;
  run.costs.costs = costs_per_slice(per_stage, s.num_ranks, s.num_stages);
  return run;
}

}  // namespace dualpipe
